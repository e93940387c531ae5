// The Stackwright console: hash-routed views over the console's JSON API, kept live by its
// event stream. Everything the API returns is put in the page as text (textContent), never
// as markup.
'use strict';

const main = document.getElementById('main');
const live = document.getElementById('live');
// flash says what became of the last button pressed; it outlives the view's re-renders
// (the change it made re-renders the view at once) until another page is shown.
const flash = document.getElementById('flash');

// h builds an element: h('a', {href: '#/', class: 'x'}, 'text', child, ...).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  el.append(...nodes(children));
  return el;
}

// nodes flattens children into nodes, dropping what is absent (null, undefined, false).
function nodes(children) {
  return [children].flat(Infinity).filter((c) => c !== undefined && c !== null && c !== false)
    .map((c) => c instanceof Node ? c : document.createTextNode(String(c)));
}

// APIError is an error the API answered: its message, and the API server's reason
// (Forbidden, NotFound, ...) when it came from there.
class APIError extends Error {
  constructor(message, reason) {
    super(message);
    this.reason = reason;
  }
}

async function api(path, init) {
  const res = await fetch(path, Object.assign({credentials: 'same-origin'}, init));
  let body;
  try {
    body = await res.json();
  } catch (e) {
    body = {error: res.status + ' ' + res.statusText};
  }
  if (!res.ok) throw new APIError(body.error || res.statusText, body.reason);
  return body;
}

// post sends a request that changes something: the custom header is what the server
// requires of a POST, and what no other site's page can send without its consent.
function post(path, body) {
  return api(path, {
    method: 'POST',
    headers: {'Content-Type': 'application/json', 'X-Stackwright-Console': '1'},
    body: JSON.stringify(body || {}),
  });
}

const enc = encodeURIComponent;

// press sends a button's request, its group's buttons disabled meanwhile, and says in
// flash what became of it: the API's message, or its error verbatim.
async function press(button, path, body) {
  const group = [...button.parentNode.querySelectorAll('button')];
  for (const b of group) b.disabled = true;
  flash.replaceChildren('Sending…');
  try {
    flash.replaceChildren(h('p', {class: 'done'}, (await post(path, body)).message));
  } catch (err) {
    flash.replaceChildren(errorBox(err));
    for (const b of group) b.disabled = false;
  }
}

function errorBox(err) {
  const title = err.reason ? err.reason : 'Error';
  return h('div', {class: 'error', role: 'alert'}, h('strong', {}, title + ': '), err.message);
}

function notice(text) {
  return text ? h('p', {class: 'notice', role: 'note'}, text) : null;
}

function badge(state, label) {
  return h('span', {class: 'badge s-' + String(state || 'Unknown').replace(/[^A-Za-z]/g, '')}, label || state || 'Unknown');
}

function ago(ts) {
  if (!ts) return '';
  const d = (Date.now() - Date.parse(ts)) / 1000;
  const abs = Math.abs(d);
  let s;
  if (abs < 60) s = Math.round(abs) + 's';
  else if (abs < 3600) s = Math.round(abs / 60) + 'm';
  else if (abs < 172800) s = Math.round(abs / 3600) + 'h';
  else s = Math.round(abs / 86400) + 'd';
  return d >= 0 ? s + ' ago' : 'in ' + s;
}

function time(ts) {
  return ts ? h('time', {datetime: ts, title: ts}, ago(ts)) : '–';
}

function short(rev) {
  if (!rev) return '–';
  return /^[0-9a-f]{40}$/.test(rev) ? rev.slice(0, 12) : rev;
}

function table(caption, head, rows, empty) {
  if (!rows.length) return h('p', {class: 'empty'}, empty || 'None.');
  return h('table', {},
    caption ? h('caption', {class: 'sr'}, caption) : null,
    h('thead', {}, h('tr', {}, head.map((c) => h('th', {scope: 'col'}, c)))),
    h('tbody', {}, rows));
}

function crumbs(...parts) {
  return h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, parts.map((p, i) => [i ? ' / ' : '', p]));
}

function stackLink(ns, name) {
  return h('a', {href: '#/stacks/' + enc(ns) + '/' + enc(name)}, name);
}

// Views. Each has mount(el, args), which builds what stays while the view is shown (a
// filter the person types in) and may return where render's output and errors go instead
// of below it; load(args), which reads the API; render(data), which returns the rest (or
// fills the mounted parts itself, returning nothing); title(args), the heading shown above
// an error; and live(change, args), which says whether a change concerns it.

const fleet = {
  state: {text: '', state: ''},
  mount(el) {
    const input = h('input', {type: 'search', id: 'filter', placeholder: 'namespace or name', value: this.state.text,
      oninput: (e) => { this.state.text = e.target.value; this.renderTable(); }});
    const select = h('select', {id: 'state', onchange: (e) => { this.state.state = e.target.value; this.renderTable(); }},
      ['', 'Ready', 'Reconciling', 'Stalled', 'Suspended', 'Unknown'].map((s) =>
        h('option', {value: s, selected: s === this.state.state}, s || 'Any state')));
    this.summary = h('div', {class: 'summary'});
    this.body = h('div', {});
    el.append(h('h1', {}, 'Stacks'), this.summary,
      h('div', {class: 'filters'},
        h('label', {for: 'filter'}, 'Filter '), input,
        h('label', {for: 'state'}, ' State '), select),
      this.body);
    return this.body; // where an error goes: render fills its own parts
  },
  load: () => api('/api/fleet'),
  render(data) {
    this.data = data;
    const order = ['Ready', 'Reconciling', 'Stalled', 'Suspended', 'Unknown'];
    this.summary.replaceChildren(...nodes([
      notice(data.notice),
      h('ul', {class: 'counts', 'aria-label': 'Stacks by state'},
        h('li', {}, h('span', {class: 'count'}, String(data.stacks.length)), ' Stacks'),
        order.filter((s) => data.counts[s]).map((s) =>
          h('li', {}, h('span', {class: 'count'}, String(data.counts[s])), ' ', badge(s))))]));
    this.renderTable();
  },
  renderTable() {
    if (!this.data) return;
    const text = this.state.text.toLowerCase();
    const rows = this.data.stacks.filter((s) =>
      (!this.state.state || s.state === this.state.state) &&
      (!text || (s.namespace + '/' + s.name).toLowerCase().includes(text)));
    this.body.replaceChildren(table('Stacks',
      ['Namespace', 'Stack', 'State', 'Why', 'Last update', 'Revision', 'Drift', 'Expires', 'Rollout'],
      rows.map((s) => h('tr', {'data-stack': s.namespace + '/' + s.name},
        h('td', {}, s.namespace),
        h('td', {}, stackLink(s.namespace, s.name)),
        h('td', {}, badge(s.state), s.approval === 'AwaitingApproval'
          ? [' ', h('a', {class: 'badge s-Awaiting', href: '#/stacks/' + enc(s.namespace) + '/' + enc(s.name) + '/plan'}, 'awaiting approval')] : null),
        h('td', {class: 'msg'}, s.reason ? h('span', {class: 'reason'}, s.reason) : null, s.message ? ' ' + s.message : ''),
        h('td', {}, s.lastUpdate || '–', s.lastUpdateTime ? [' ', time(s.lastUpdateTime)] : null),
        h('td', {class: 'mono'}, short(s.revision)),
        h('td', {}, s.drift ? badge('Drift', 'drift') : '–'),
        h('td', {}, time(s.expiresAt)),
        h('td', {}, s.rollout ? h('a', {href: '#/rollouts/' + enc(s.namespace) + '/' + enc(s.rollout)}, s.rollout) : '–'))),
      this.data.stacks.length ? 'No Stack matches the filter.' : 'No Stacks.'));
  },
  live: (c) => c.kind === 'Stack',
};

const stack = {
  title: ([, name]) => name,
  mount() {},
  load: ([ns, name]) => api('/api/stacks/' + enc(ns) + '/' + enc(name)),
  render(s) {
    const planLink = '#/stacks/' + enc(s.namespace) + '/' + enc(s.name) + '/plan';
    const a = s.approval;
    return [
      crumbs(h('a', {href: '#/'}, 'Fleet'), s.namespace, s.name),
      h('h1', {}, s.name, ' ', badge(s.state)),
      s.message ? h('p', {class: 'lead'}, h('span', {class: 'reason'}, s.reason), ' ', s.message) : null,
      a && a.state === 'AwaitingApproval' ? h('div', {class: 'callout', role: 'note'},
        h('strong', {}, 'A change awaits approval'), ': ', a.summary || 'no summary', ' (revision ', short(a.revision), '). ',
        h('a', {href: planLink}, 'Review the plan')) : null,
      a && a.state !== 'AwaitingApproval' ? h('p', {}, 'Last preview: ', badge(a.state), ' ', h('a', {href: planLink}, 'plan of ' + a.preview)) : null,
      h('div', {class: 'cols'},
        h('section', {'aria-labelledby': 'h-spec'}, h('h2', {id: 'h-spec'}, 'Spec'),
          h('dl', {class: 'spec'}, s.spec.map((f) => [h('dt', {}, f.label), h('dd', {}, f.value)]),
            s.rollout ? [h('dt', {}, 'Rollout'), h('dd', {}, h('a', {href: '#/rollouts/' + enc(s.namespace) + '/' + enc(s.rollout)}, s.rollout),
              s.heldAt ? ' (held at ' + short(s.heldAt) + ')' : '')] : null,
            s.expiresAt ? [h('dt', {}, 'Expires'), h('dd', {}, time(s.expiresAt))] : null)),
        h('section', {'aria-labelledby': 'h-outputs'}, h('h2', {id: 'h-outputs'}, 'Outputs'),
          table('Outputs', ['Name', 'Value'], s.outputs.map((o) => h('tr', {},
            h('td', {class: 'mono'}, o.name),
            h('td', {class: 'mono'}, o.secret ? h('span', {class: 'masked', title: 'secret: never shown'}, '•••••• secret') : o.value))),
          'No outputs yet.'))),
      h('section', {'aria-labelledby': 'h-conds'}, h('h2', {id: 'h-conds'}, 'Conditions'),
        table('Conditions', ['Type', 'Status', 'Reason', 'Message', 'Since'], s.conditions.map((c) => h('tr', {},
          h('td', {}, c.type), h('td', {}, c.status), h('td', {}, c.reason), h('td', {class: 'msg'}, c.message),
          h('td', {}, time(c.lastTransitionTime)))), 'No conditions yet.')),
      h('section', {'aria-labelledby': 'h-updates'}, h('h2', {id: 'h-updates'}, 'Updates'),
        s.updatesError ? errorBox(new APIError(s.updatesError)) : null,
        s.updates.length ? h('ol', {class: 'timeline'}, s.updates.map((u) => h('li', {class: 'r-' + (u.result || u.phase || 'Pending')},
          h('div', {class: 'when'}, time(u.created)),
          h('div', {},
            h('a', {href: '#/updates/' + enc(s.namespace) + '/' + enc(u.name)}, u.name), ' ',
            h('span', {class: 'badge'}, u.type), ' ', badge(u.result || u.phase, u.result || u.phase || 'Pending'),
            u.name === s.current ? [' ', h('span', {class: 'badge s-Reconciling'}, 'current')] : null,
            h('div', {class: 'meta'}, 'revision ', h('span', {class: 'mono'}, short(u.revision)),
              u.duration ? ', took ' + u.duration : '', u.plan ? ', held to the plan of ' + u.plan : ''),
            u.message ? h('div', {class: 'msg'}, u.message) : null)))) : h('p', {class: 'empty'}, 'No Updates yet.')),
    ];
  },
  live: (c, [ns, name]) => (c.kind === 'Stack' && c.namespace === ns && c.name === name) || (c.kind === 'Update' && c.namespace === ns),
};

const update = {
  title: ([, name]) => 'Update ' + name,
  mount() {},
  load: ([ns, name]) => api('/api/updates/' + enc(ns) + '/' + enc(name)),
  render(u) {
    return [
      crumbs(h('a', {href: '#/'}, 'Fleet'), u.namespace, stackLink(u.namespace, u.stack), u.name),
      h('h1', {}, 'Update ', u.name, ' ', badge(u.result || u.phase, u.result || u.phase || 'Pending')),
      h('dl', {class: 'spec'},
        h('dt', {}, 'Type'), h('dd', {}, u.type),
        h('dt', {}, 'Revision'), h('dd', {class: 'mono'}, u.revision || '–'),
        h('dt', {}, 'Started'), h('dd', {}, time(u.started)),
        h('dt', {}, 'Duration'), h('dd', {}, u.duration || '–'),
        h('dt', {}, 'Runner'), h('dd', {class: 'mono'}, u.runner || '–'),
        u.plan ? [h('dt', {}, 'Held to plan'), h('dd', {}, u.plan)] : null,
        u.changes ? [h('dt', {}, 'Changes'), h('dd', {}, Object.entries(u.changes).map(([k, v]) => k + ' ' + v).join(', '))] : null,
        u.message ? [h('dt', {}, 'Message'), h('dd', {}, u.message)] : null),
      h('h2', {}, 'Log'),
      h('p', {class: 'meta'}, 'From ', u.logSource, '.'),
      notice(u.logNote),
      u.log ? h('pre', {class: 'log', tabindex: '0', 'aria-label': 'Runner log'}, u.log) : h('p', {class: 'empty'}, 'No output recorded yet.'),
    ];
  },
  live: (c, [ns, name]) => c.kind === 'Update' && c.namespace === ns && c.name === name,
};

const plan = {
  title: ([, name]) => 'Plan for ' + name,
  mount() {},
  load: ([ns, name]) => api('/api/stacks/' + enc(ns) + '/' + enc(name) + '/plan'),
  render(p) {
    const a = p.approval;
    const decide = (what) => (e) =>
      press(e.target, '/api/stacks/' + enc(p.namespace) + '/' + enc(p.stack) + '/' + what, {preview: a.preview});
    const policy = p.policy || {};
    const verdicts = [].concat(
      (policy.errors || []).map((v) => ({...v, enforcement: 'error'})),
      policy.violations || []);
    return [
      crumbs(h('a', {href: '#/'}, 'Fleet'), p.namespace, stackLink(p.namespace, p.stack), 'plan'),
      h('h1', {}, 'Plan for ', p.stack, ' ', badge(a.state)),
      h('p', {class: 'lead'}, a.summary || 'No summary.'),
      h('p', {class: 'meta', id: 'preview'}, 'Previewed by Update ', h('span', {class: 'mono'}, a.preview),
        ' at revision ', h('span', {class: 'mono'}, short(a.revision)), '.'),
      notice(a.message),
      p.decidable ? h('div', {class: 'actions'},
        h('button', {class: 'primary', id: 'approve', onclick: decide('approve')}, 'Approve this plan'),
        h('button', {class: 'danger', id: 'reject', onclick: decide('reject')}, 'Reject')) : null,
      h('div', {class: 'cols plan'},
        h('section', {'aria-labelledby': 'h-steps'}, h('h2', {id: 'h-steps'}, 'Changes'),
          p.groups.length ? p.groups.map((g) => h('div', {class: 'group op-' + g.op},
            h('h3', {}, h('span', {class: 'op'}, g.op), ' · ', g.steps.length + (g.steps.length === 1 ? ' resource' : ' resources')),
            h('ul', {class: 'steps'}, g.steps.map((st) => h('li', {},
              h('div', {}, h('strong', {}, st.name), ' ', h('span', {class: 'type mono'}, st.type || '')),
              st.changed && st.changed.length ? h('div', {class: 'props'}, 'changes ',
                st.changed.map((c) => h('code', {class: (st.replacing || []).includes(c) ? 'replacing' : ''}, c))) : null,
              st.replacing && st.replacing.length ? h('div', {class: 'props'}, 'replaced because of ', st.replacing.map((c) => h('code', {class: 'replacing'}, c))) : null,
              h('div', {class: 'urn mono'}, st.urn)))))) : h('p', {class: 'empty'}, 'No resource changes.'),
          p.stepsOmitted ? h('p', {class: 'meta'}, '…and ', String(p.stepsOmitted), ' more steps not listed.') : null),
        h('aside', {'aria-labelledby': 'h-policy'}, h('h2', {id: 'h-policy'}, 'Policies'),
          (policy.evaluated || []).length ? h('p', {class: 'meta'}, 'Judged by ', policy.evaluated.join(', '), '.') : h('p', {class: 'empty'}, 'No policy selects this Stack.'),
          verdicts.length ? h('ul', {class: 'verdicts'}, verdicts.map((v) => h('li', {},
            badge(v.enforcement === 'advisory' ? 'Advisory' : 'Stalled', v.enforcement), ' ', h('strong', {}, v.policy), h('div', {}, v.message))))
            : (policy.evaluated || []).length ? h('p', {}, badge('Ready', 'passed'), ' No violations.') : null)),
    ];
  },
  live: (c, [ns, name]) => (c.kind === 'Stack' && c.namespace === ns && c.name === name) || (c.kind === 'Update' && c.namespace === ns),
};

const rollouts = {
  title: () => 'Rollouts',
  mount() {},
  load: () => api('/api/rollouts'),
  render(d) {
    return [
      h('h1', {}, 'Rollouts'), notice(d.notice),
      table('StackRollouts', ['Namespace', 'Rollout', 'Phase', 'Wave', 'Updated', 'Target', 'Stable', 'Waiting for'],
        d.rollouts.map((r) => h('tr', {},
          h('td', {}, r.namespace),
          h('td', {}, h('a', {href: '#/rollouts/' + enc(r.namespace) + '/' + enc(r.name)}, r.name)),
          h('td', {}, badge(r.phase)), h('td', {}, r.wave || '–'), h('td', {}, r.updated + '/' + r.stacks),
          h('td', {class: 'mono'}, short(r.target)), h('td', {class: 'mono'}, short(r.stable)),
          h('td', {class: 'msg'}, r.waiting || '–'))), 'No StackRollouts.'),
    ];
  },
  live: (c) => c.kind === 'StackRollout',
};

const rolloutLabels = {promote: 'Promote next wave', abort: 'Abort', pause: 'Pause', resume: 'Resume'};

const rollout = {
  title: ([, name]) => name,
  mount() {},
  load: ([ns, name]) => api('/api/rollouts/' + enc(ns) + '/' + enc(name)),
  render(r) {
    const request = (what) => (e) => press(e.target, '/api/rollouts/' + enc(r.namespace) + '/' + enc(r.name) + '/' + what);
    const gates = [r.bakeTime ? 'bake ' + r.bakeTime : null, r.gateJobFrom ? 'gate Job from CronJob ' + r.gateJobFrom : null,
      r.approval === 'Manual' ? 'a person promotes' : null].filter(Boolean);
    return [
      crumbs(h('a', {href: '#/rollouts'}, 'Rollouts'), r.namespace, r.name),
      h('h1', {}, r.name, ' ', badge(r.phase)),
      h('p', {class: 'lead'}, 'Target ', h('span', {class: 'mono'}, short(r.target)), ', stable ', h('span', {class: 'mono'}, short(r.stable)),
        ', ', String(r.updated), ' of ', String(r.stacks), ' Stacks updated. Between waves: ', gates.length ? gates.join(', ') : 'nothing', '.'),
      r.waiting ? h('div', {class: 'callout', role: 'note'}, h('strong', {}, 'Waiting: '), r.waiting) : null,
      h('div', {class: 'actions'}, r.requests.map((q) => h('button', {class: q === 'abort' ? 'danger' : 'primary', id: q, onclick: request(q)}, rolloutLabels[q] || q)),
        h('span', {class: 'meta'}, r.requests.length ? '' : 'No request applies in this phase. ', 'Pause is not available yet.')),
      h('div', {class: 'waves', role: 'list'}, r.waves.map((w) => h('section', {class: 'wave' + (w.current ? ' current' : ''), role: 'listitem', 'aria-label': 'wave ' + w.name},
        h('h2', {}, 'Wave ', w.name, ' ', badge(w.state)),
        h('p', {class: 'meta'}, w.updated + '/' + w.stacks.length + ' updated', w.readyTime ? ', ready ' + ago(w.readyTime) : '',
          w.gateJob ? ', gate Job ' + w.gateJob : ''),
        h('ul', {class: 'cards'}, w.stacks.map((c) => h('li', {class: 'card' + (c.failed ? ' failed' : '') + (c.atTarget ? ' at-target' : '')},
          h('div', {}, c.missing ? c.name : stackLink(r.namespace, c.name), ' ', badge(c.state)),
          h('div', {class: 'meta'}, c.atTarget ? 'at target' : c.released ? 'released' : 'waiting',
            ', deployed ', h('span', {class: 'mono'}, short(c.revision)), c.heldAt ? ', held at ' + short(c.heldAt) : '',
            c.failed ? ', halted the rollout' : ''))))))),
    ];
  },
  live: (c, [ns, name]) => (c.kind === 'StackRollout' && c.namespace === ns && c.name === name) || (c.kind === 'Stack' && c.namespace === ns),
};

const templates = {
  title: () => 'Templates',
  mount() {},
  load: () => api('/api/templates'),
  render(d) {
    return [
      h('h1', {}, 'Templates'),
      d.revisionsError ? errorBox(new APIError(d.revisionsError)) : null,
      d.templates.length ? d.templates.map((t) => h('section', {class: 'template', 'aria-label': t.kind + ' ' + t.name},
        h('h2', {}, t.kind, ' ', h('span', {class: 'meta'}, t.group), ' ', badge(t.state)),
        t.message ? h('p', {class: 'msg'}, t.message) : null,
        h('dl', {class: 'spec'},
          h('dt', {}, 'StackTemplate'), h('dd', {}, t.name),
          h('dt', {}, 'Versions'), h('dd', {}, t.versions.map((v) => h('span', {class: 'badge' + (v.storage ? ' s-Ready' : '')},
            v.name, v.storage ? ' (storage)' : '', v.served ? '' : ' (not served)', v.deprecated ? ' (deprecated)' : ''))),
          h('dt', {}, 'Revision'), h('dd', {}, String(t.revision), t.revisions.length ? ' (kept: ' + t.revisions.join(', ') + ')' : ''),
          h('dt', {}, 'Update strategy'), h('dd', {}, t.strategy || 'default'),
          h('dt', {}, 'Instances'), h('dd', {}, String(t.instances), t.behind ? [', ', h('span', {class: 'badge s-Awaiting behind'}, t.behind + ' behind')] : ', none behind')),
        t.instancesError ? errorBox(new APIError(t.instancesError)) : notice(t.instancesNotice),
        table(t.kind + ' instances by namespace', ['Namespace', 'Instances', 'Behind', 'Not Ready'], t.namespaces.map((n) => h('tr', {},
          h('td', {}, n.namespace), h('td', {}, String(n.instances)), h('td', {}, String(n.behind)), h('td', {}, String(n.notReady)))), 'No instances.')))
        : h('p', {class: 'empty'}, 'No StackTemplates.'),
    ];
  },
  live: (c) => c.kind === 'StackTemplate' || c.kind === 'Stack',
};

// route picks the view of the address's hash.
function route() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  switch (parts[0]) {
    case 'stacks':
      return parts[3] === 'plan' ? {view: plan, args: parts.slice(1, 3), nav: 'fleet'} : {view: stack, args: parts.slice(1, 3), nav: 'fleet'};
    case 'updates': return {view: update, args: parts.slice(1, 3), nav: 'fleet'};
    case 'rollouts': return parts.length > 1 ? {view: rollout, args: parts.slice(1, 3), nav: 'rollouts'} : {view: rollouts, args: [], nav: 'rollouts'};
    case 'templates': return {view: templates, args: [], nav: 'templates'};
    default: return {view: fleet, args: [], nav: 'fleet'};
  }
}

let current = null;
let body = null; // where a view renders what it reads
let generation = 0;

async function refresh() {
  const cur = current;
  const gen = ++generation;
  let out;
  try {
    const data = await cur.view.load(cur.args);
    if (gen !== generation || cur !== current) return; // a newer read, or another page, won
    out = cur.view.render(data);
  } catch (err) {
    if (gen !== generation || cur !== current) return;
    out = [cur.view.title ? h('h1', {}, cur.view.title(cur.args)) : null, errorBox(err)];
  }
  if (out !== undefined) body.replaceChildren(...nodes(out));
}

function show() {
  current = route();
  flash.replaceChildren();
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === current.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  main.replaceChildren();
  const fixed = h('div', {});
  body = h('div', {});
  main.append(fixed, body);
  body = current.view.mount(fixed, current.args) || body;
  refresh();
}

// A burst of changes (an Update's status written many times a second) makes one read.
let pending = null;
function changed() {
  if (pending) return;
  pending = setTimeout(() => { pending = null; refresh(); }, 250);
}

function connect() {
  const blind = new Map();
  const es = new EventSource('/api/events');
  const say = () => {
    live.textContent = blind.size ? 'live, except ' + [...blind.keys()].join(', ') : 'live';
    live.title = [...blind.values()].join('\n');
    live.className = 'live ' + (blind.size ? 'partial' : 'on');
  };
  es.addEventListener('ready', () => { say(); changed(); });
  es.onmessage = (e) => {
    const c = JSON.parse(e.data);
    if (c.error) { blind.set(c.kind + 's', c.error); say(); return; }
    if (current && current.view.live(c, current.args)) changed();
  };
  es.onerror = () => { live.textContent = 'reconnecting…'; live.className = 'live off'; };
}

window.addEventListener('hashchange', show);
show();
connect();
