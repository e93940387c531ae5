package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The templates scenario's StackTemplate: the kind it defines and where its Stacks live.
const (
	// templateGroup is the API group the manager is told to serve templates in
	// (--template-api-groups) when the scenario runs.
	templateGroup  = "bench.stackwright.dev"
	templateKind   = "BenchApp"
	templatePlural = "benchapps"
	templateName   = "bench-apps"
	// templateStack is the template's stack prefix; an instance's stack is
	// <prefix>.<namespace>.<name>, and the plain arm's Stacks are given the same names.
	templateStack = "bench"
	// templateProgram names the one Program of the platform namespace, and the Program of
	// each tenant namespace in the plain arm.
	templateProgram = "bench"
	// templateTenants is how many namespaces the instances (and the plain Stacks) spread over.
	templateTenants = 10
)

var templateGVR = schema.GroupVersionResource{Group: templateGroup, Version: "v1alpha1", Resource: templatePlural}

// tenantNamespaces are the namespaces the templates scenario's instances and plain Stacks
// spread over.
func tenantNamespaces() []string {
	out := make([]string, templateTenants)
	for i := range out {
		out[i] = fmt.Sprintf("bench-tenant-%02d", i)
	}
	return out
}

// templateApps are the namespace/name keys of the N apps of either arm: app-<i> in tenant
// i mod 10, so N/10 each.
func templateApps(n int) []string {
	tenants := tenantNamespaces()
	out := make([]string, n)
	for i := range out {
		out[i] = key(tenants[i%len(tenants)], fmt.Sprintf("app-%05d", i))
	}
	return out
}

// sharedProgram is the bench program for a Program that several Stacks share: its files go
// below ${pulumi.stack}/ of the root, because a template's envRefs are the same for every
// instance and so is STACKWRIGHT_TESTING_ROOT. Both arms run it.
func sharedProgram(ns, name string) *pulumiv1.Program {
	p := benchProgram(ns, name)
	for _, r := range []string{"greeting", "tokenFile"} {
		res := p.Program.Resources[r]
		var path string
		if err := json.Unmarshal(res.Properties["path"].Raw, &path); err != nil {
			panic(err) // benchProgram's own literal
		}
		res.Properties["path"] = *jsonOf("${pulumi.stack}/" + path)
		p.Program.Resources[r] = res
	}
	return p
}

// plainStack is what an instance of the bench template renders, written by hand in the
// tenant's namespace: the same program, stack name, config and root.
func plainStack(ns, name, files string) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: pulumiv1.StackSpec{
			Stack:      fmt.Sprintf("%s.%s.%s", templateStack, ns, name),
			ProgramRef: &pulumiv1.ProgramReference{Name: templateProgram},
			Config:     map[string]apiextensionsv1.JSON{"message": *jsonOf(greetingMessage)},
			EnvRefs:    map[string]pulumiv1.ResourceRef{"STACKWRIGHT_TESTING_ROOT": literal(files)},
		},
	}
}

// benchTemplate is the StackTemplate whose instances are plainStack rendered in the
// platform namespace: parameter message becomes config message.
func benchTemplate(files string) *v1alpha1.StackTemplate {
	stack, err := json.Marshal(map[string]any{
		"stack":      templateStack,
		"programRef": map[string]string{"name": templateProgram},
		"envRefs":    map[string]pulumiv1.ResourceRef{"STACKWRIGHT_TESTING_ROOT": literal(files)},
	})
	if err != nil {
		panic(err) // only literals
	}
	return &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: templateName},
		Spec: v1alpha1.StackTemplateSpec{
			API:        v1alpha1.TemplateAPI{Group: templateGroup, Kind: templateKind, Plural: templatePlural},
			Parameters: jsonOf(map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}}}),
			Namespace:  nsPlatform,
			Stack:      apiextensionsv1.JSON{Raw: stack},
			Config:     []v1alpha1.TemplateConfig{{Key: "message", Parameter: "message"}},
		},
	}
}

func benchInstance(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"parameters": map[string]any{"message": greetingMessage}},
	}}
	u.SetAPIVersion(templateGVR.GroupVersion().String())
	u.SetKind(templateKind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// armResult is what one arm of the templates scenario measured.
type armResult struct {
	creation, wall time.Duration
	ready          int
	readyTimes     []time.Duration
	runs           int
	runPhases      map[string]int
	peakRSS        int64
	before, after  snapshot
}

// runTemplates measures the same N apps twice, on the same program and over the same ten
// tenant namespaces: first as plain Stacks, then, once those are deleted, as instances of
// one StackTemplate, and compares the times to all Ready.
func (b *bench) runTemplates(ctx context.Context) error {
	n, par := b.cfg.N, b.cfg.Parallelism
	apps := templateApps(n)
	floor := b.floorMedian()
	ideal := time.Duration(n) * floor / time.Duration(par)
	timeout := b.cfg.FleetTimeout
	if timeout == 0 {
		timeout = 4*time.Duration(n)*max(floor, 5*time.Second)/time.Duration(par) + 5*time.Minute
	}

	plain, programs, err := b.plainArm(ctx, apps, timeout)
	if err != nil {
		return err
	}
	deleted, err := b.deletePlainArm(ctx, apps)
	if err != nil {
		return err
	}
	tmpl, setup, lag, err := b.templateArm(ctx, apps, timeout)
	setup.plainPrograms = programs
	if err != nil {
		return err
	}

	reached := func(a *armResult) string {
		if a.ready < n {
			return fmt.Sprintf("not reached: %d/%d Ready after %s", a.ready, n, secs(a.wall))
		}
		return fmt.Sprintf("%s (%d/%d)", secs(a.wall), a.ready, n)
	}
	pct := func(a *armResult) string {
		s := Summarize(a.readyTimes)
		return fmt.Sprintf("%s / %s / %s", secs(s.P50), secs(s.P90), secs(s.Max))
	}
	requests := func(a *armResult) float64 {
		if a.before.metricsErr != nil || a.after.metricsErr != nil {
			return 0
		}
		return a.after.metrics.Sum("rest_client_requests_total", nil) - a.before.metrics.Sum("rest_client_requests_total", nil)
	}
	deltas := func(a *armResult, metric, label string) string {
		if a.before.metricsErr != nil || a.after.metricsErr != nil {
			return "metrics unavailable"
		}
		d := DeltaBy(a.before.metrics, a.after.metrics, metric, label)
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(d)) {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, d[k]))
		}
		return orNone(parts)
	}
	cpu := func(a *armResult) time.Duration { return a.after.mgr.CPU - a.before.mgr.CPU }
	engineCPU := func(a *armResult) time.Duration { return a.after.mgr.ChildrenCPU - a.before.mgr.ChildrenCPU }
	peak := func(a *armResult) int64 { return max(a.peakRSS, a.after.mgr.RSS) }
	idealRatio := func(a *armResult) string { return ratio(Ratio(a.wall, ideal)) }
	rows := [][]string{
		{"objects created at the start", fmt.Sprintf("%d Stacks", n), fmt.Sprintf("%d instances", n), ""},
		{"creation of the N objects", secs(plain.creation), secs(tmpl.creation), ""},
		{"start → all Ready", reached(plain), reached(tmpl), ratio(Ratio(tmpl.wall, plain.wall))},
		{"Ready since start: p50 / p90 / max", pct(plain), pct(tmpl),
			ratio(Ratio(Percentile(tmpl.readyTimes, 50), Percentile(plain.readyTimes, 50))) + " (p50)"},
		{"ideal: N × floor median (CLI first update) / parallelism",
			fmt.Sprintf("%s (%d × %s / %d)", secs(ideal), n, secs(floor), par), secs(ideal), ""},
		{"wall / ideal", idealRatio(plain), idealRatio(tmpl), ""},
		{"engine runs started (Updates)", fmt.Sprintf("%d (%s)", plain.runs, mapString(plain.runPhases)),
			fmt.Sprintf("%d (%s)", tmpl.runs, mapString(tmpl.runPhases)), ""},
		{"manager API requests (rest_client_requests_total)", fmt.Sprintf("%.0f", requests(plain)), fmt.Sprintf("%.0f", requests(tmpl)),
			ratio(requests(tmpl) / requests(plain))},
		{"… by method", deltas(plain, "rest_client_requests_total", "method"), deltas(tmpl, "rest_client_requests_total", "method"), ""},
		{"reconciles by controller", deltas(plain, "controller_runtime_reconcile_total", "controller"),
			deltas(tmpl, "controller_runtime_reconcile_total", "controller"), ""},
		{"manager CPU (utime+stime)", secs(cpu(plain)), secs(cpu(tmpl)), ratio(Ratio(cpu(tmpl), cpu(plain)))},
		{"engine CPU (manager's reaped children)", secs(engineCPU(plain)), secs(engineCPU(tmpl)), ratio(Ratio(engineCPU(tmpl), engineCPU(plain)))},
		{"manager peak RSS (sampled 1/s)", MiB(peak(plain)), MiB(peak(tmpl)), ""},
		{"instance Ready after its Stack Ready: p50 / max", "-", lag, ""},
	}
	setupRows := [][]string{
		{"plain arm: its " + fmt.Sprint(templateTenants) + " Programs created → Ready (before its start)", secs(setup.plainPrograms)},
		{"plain arm deleted (Stacks gone, no destroy) after all Ready", secs(deleted)},
		{"template arm: its Program created → Ready", secs(setup.program)},
		{"StackTemplate created → CustomResourceDefinition " + templatePlural + "." + templateGroup + " Established", secs(setup.established)},
		{"StackTemplate created → StackTemplate Ready", secs(setup.ready)},
		{"StackTemplate created → a first instance accepted (server-side dry run; the API server's first write of a new kind)", secs(setup.accepted)},
	}
	body := fmt.Sprintf("The same N apps, twice, one arm after the other, over the same %d tenant namespaces (N/%d each), on "+
		"the same program (the bench program with its two files below `${pulumi.stack}/`, since every instance of a template "+
		"has the same `STACKWRIGHT_TESTING_ROOT`), with the same stack names (`%s.<namespace>.<name>`) and config. "+
		"*plain*: a Program in each tenant namespace, created and Ready beforehand, then N Stacks on them created at once. "+
		"Once all are Ready, they are deleted (no destroy) with their Updates, as a garbage collector would. "+
		"*templates*: one Program in `%s` and one StackTemplate (`%s`, kind `%s`) whose `spec.stack` references it, "+
		"set up beforehand (timed apart, below, with a server-side dry-run create that pays the API server's first write of "+
		"the new kind); then N instances created at once, timed until each instance's own `Ready` "+
		"condition is True for its generation. Both arms are created by %d concurrent clients and timed from the first create; "+
		"no namespace has a share limit (`--max-concurrent-updates-per-namespace 0`). "+
		"`--max-concurrent-updates %d`; the manager runs with `--template-api-groups=%s`. "+
		"The last column is templates / plain.\n\n",
		templateTenants, templateTenants, templateStack, nsPlatform, templateName, templateKind, b.cfg.CreateWorkers, par, templateGroup) +
		table([]string{"", "plain Stacks", "template instances", "templates / plain"}, rows) +
		"\nNot in the instances' time:\n\n" + table([]string{"setup", ""}, setupRows)
	b.rep.add(fmt.Sprintf("Templates (N=%d instances vs N plain Stacks, %d namespaces)", n, templateTenants), body)
	return nil
}

// templateSetup are the times of the work before each arm's start.
type templateSetup struct {
	plainPrograms, program, established, ready, accepted time.Duration
}

// plainArm creates a Program in each tenant namespace, then the N Stacks at once, and waits
// until all are Ready.
func (b *bench) plainArm(ctx context.Context, apps []string, timeout time.Duration) (a *armResult, programs time.Duration, err error) {
	files := filepath.Join(b.work, "files", "templates-plain")
	t0 := time.Now()
	var keys []client.ObjectKey
	for _, ns := range tenantNamespaces() {
		p := sharedProgram(ns, templateProgram)
		if err := b.cluster.client.Create(ctx, p); err != nil {
			return nil, 0, fmt.Errorf("failed to create Program %s/%s: %w", ns, p.Name, err)
		}
		keys = append(keys, client.ObjectKeyFromObject(p))
	}
	if err := b.waitPrograms(ctx, keys); err != nil {
		return nil, 0, err
	}
	programs = time.Since(t0)

	a = &armResult{}
	a.before = b.snap(ctx)
	peak := b.sampleRSS(ctx)
	defer peak()
	start := time.Now()
	b.say("templates: plain arm: creating %d Stacks over %d namespaces (timeout %s)", len(apps), templateTenants, timeout.Round(time.Second))
	err = b.forAll(ctx, "create", apps, func(k string) error {
		ns, name, _ := strings.Cut(k, "/")
		return b.cluster.client.Create(ctx, plainStack(ns, name, files))
	})
	a.creation = time.Since(start)
	if err != nil {
		return nil, 0, err
	}
	progress := func(ready int) {
		b.say("templates: plain arm: %d/%d Ready after %s; manager %s", ready, len(apps), secs(time.Since(start)), procLine(b.mgr.pid()))
	}
	a.ready = b.track.waitKeys(ctx, apps, timeout, 30*time.Second, progress, func(st *stackSeen) bool { return st.readyOn("") })
	a.wall = time.Since(start)
	a.after = b.snap(ctx)
	a.peakRSS = peak()
	if ctx.Err() != nil {
		return nil, 0, ctx.Err()
	}
	var last time.Time
	for _, k := range apps {
		ns, name, _ := strings.Cut(k, "/")
		if at, ok := b.track.readyAt(ns, name, ""); ok {
			a.readyTimes = append(a.readyTimes, at.Sub(start))
			last = maxTime(last, at)
		}
	}
	if a.ready == len(apps) {
		a.wall = last.Sub(start)
	}
	a.runPhases = map[string]int{}
	for _, ns := range tenantNamespaces() {
		for _, u := range b.track.updatesIn(ns, start, time.Now()) {
			a.runs++
			a.runPhases[phaseName(u.phase)]++
		}
	}
	b.say("templates: plain arm: %d/%d Ready after %s", a.ready, len(apps), secs(a.wall))
	return a, programs, nil
}

// deletePlainArm deletes the plain arm's Stacks (they have no destroyOnFinalize, so no
// engine runs) and Programs, waits until the Stacks are gone, and deletes their Updates,
// which the control plane, having no garbage collector, would otherwise keep for the
// manager to watch during the template arm.
func (b *bench) deletePlainArm(ctx context.Context, apps []string) (time.Duration, error) {
	t0 := time.Now()
	b.say("templates: deleting the plain arm")
	if err := b.forAll(ctx, "delete", apps, func(k string) error {
		ns, name, _ := strings.Cut(k, "/")
		return client.IgnoreNotFound(b.cluster.client.Delete(ctx, &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
	}); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		left := 0
		for _, ns := range tenantNamespaces() {
			var list pulumiv1.StackList
			if err := b.cluster.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return 0, fmt.Errorf("failed to list Stacks: %w", err)
			}
			left += len(list.Items)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d Stacks of the plain arm still there 5 minutes after their deletion", left)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	took := time.Since(t0)
	for _, ns := range tenantNamespaces() {
		if err := b.cluster.client.DeleteAllOf(ctx, &v1alpha1.Update{}, client.InNamespace(ns)); err != nil {
			return 0, fmt.Errorf("failed to delete Updates in %s: %w", ns, err)
		}
		if err := b.cluster.client.Delete(ctx, &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: templateProgram}}); err != nil {
			return 0, fmt.Errorf("failed to delete Program %s/%s: %w", ns, templateProgram, err)
		}
	}
	// What the deletions set off in the manager (Program and Update reconciles, cache
	// events) should be over before the next arm's clock starts.
	if err := waitReporting(ctx, 10*time.Second, func() {}); err != nil {
		return 0, err
	}
	return took, nil
}

// templateArm sets up the platform namespace's Program and the StackTemplate, then creates
// the N instances at once and waits until every instance is Ready. lag is the instances'
// Ready after their Stacks' Ready, p50 / max.
func (b *bench) templateArm(ctx context.Context, apps []string, timeout time.Duration) (a *armResult, setup templateSetup, lag string, err error) {
	t0 := time.Now()
	prog := sharedProgram(nsPlatform, templateProgram)
	if err := b.cluster.client.Create(ctx, prog); err != nil {
		return nil, setup, "", fmt.Errorf("failed to create Program %s/%s: %w", nsPlatform, prog.Name, err)
	}
	if err := b.waitPrograms(ctx, []client.ObjectKey{client.ObjectKeyFromObject(prog)}); err != nil {
		return nil, setup, "", err
	}
	setup.program = time.Since(t0)

	tmpl := benchTemplate(filepath.Join(b.work, "files", "templates-instances"))
	t0 = time.Now()
	if err := b.cluster.client.Create(ctx, tmpl); err != nil {
		return nil, setup, "", fmt.Errorf("failed to create StackTemplate %s: %w", tmpl.Name, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crdKey := client.ObjectKey{Name: templatePlural + "." + templateGroup}
	err = pollUntil(ctx, time.Minute, func() (bool, error) {
		if err := b.cluster.client.Get(ctx, crdKey, crd); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, setup, "", fmt.Errorf("failed to wait for CustomResourceDefinition %s: %w", crdKey.Name, err)
	}
	setup.established = time.Since(t0)
	err = pollUntil(ctx, time.Minute, func() (bool, error) {
		if err := b.cluster.client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl); err != nil {
			return false, err
		}
		return apimeta.IsStatusConditionTrue(tmpl.Status.Conditions, pulumiv1.ConditionReady), nil
	})
	if err != nil {
		return nil, setup, "", fmt.Errorf("failed to wait for StackTemplate %s to be Ready (conditions %v): %w", tmpl.Name, tmpl.Status.Conditions, err)
	}
	setup.ready = time.Since(t0)
	b.say("templates: StackTemplate %s Ready after %s (CustomResourceDefinition Established after %s)", tmpl.Name, secs(setup.ready), secs(setup.established))

	dc, err := dynamic.NewForConfig(b.cluster.cfg)
	if err != nil {
		return nil, setup, "", fmt.Errorf("failed to create dynamic client: %w", err)
	}
	stopWatch, err := b.track.watchInstances(ctx, templateGVR.GroupVersion().WithKind(templateKind))
	if err != nil {
		return nil, setup, "", err
	}
	defer stopWatch()

	// The API server's first write of a new kind waits about 2 s (seen on every run), which
	// a tenant creating an instance any time later never sees: a dry run pays it here.
	tenant := tenantNamespaces()[0]
	var refused error
	err = pollUntil(ctx, time.Minute, func() (bool, error) {
		probe := benchInstance(tenant, "probe")
		_, refused = dc.Resource(templateGVR).Namespace(tenant).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return refused == nil, nil
	})
	if err != nil {
		return nil, setup, "", fmt.Errorf("failed to have a dry-run instance accepted: %w", errors.Join(err, refused))
	}
	setup.accepted = time.Since(t0)

	a = &armResult{}
	a.before = b.snap(ctx)
	peak := b.sampleRSS(ctx)
	defer peak()
	start := time.Now()
	b.say("templates: template arm: creating %d instances over %d namespaces (timeout %s)", len(apps), templateTenants, timeout.Round(time.Second))
	err = b.forAll(ctx, "create", apps, func(k string) error {
		ns, name, _ := strings.Cut(k, "/")
		_, err := dc.Resource(templateGVR).Namespace(ns).Create(ctx, benchInstance(ns, name), metav1.CreateOptions{})
		return err
	})
	a.creation = time.Since(start)
	if err != nil {
		return nil, setup, "", err
	}
	progress := func(ready int) {
		b.say("templates: template arm: %d/%d instances Ready after %s; Updates: %s; manager %s", ready, len(apps),
			secs(time.Since(start)), mapString(b.track.phases(nsPlatform)), procLine(b.mgr.pid()))
	}
	a.ready = b.track.waitInstances(ctx, apps, timeout, 30*time.Second, progress)
	a.wall = time.Since(start)
	a.after = b.snap(ctx)
	a.peakRSS = peak()
	if ctx.Err() != nil {
		return nil, setup, "", ctx.Err()
	}
	var last time.Time
	for _, k := range apps {
		if at, ok := b.track.instanceReadyAt(k); ok {
			a.readyTimes = append(a.readyTimes, at.Sub(start))
			last = maxTime(last, at)
		}
	}
	if a.ready == len(apps) {
		a.wall = last.Sub(start)
	}
	a.runPhases = map[string]int{}
	for _, u := range b.track.updatesIn(nsPlatform, start, time.Now()) {
		a.runs++
		a.runPhases[phaseName(u.phase)]++
	}
	lag, err = b.instanceLag(ctx)
	if err != nil {
		return nil, setup, "", err
	}
	b.say("templates: template arm: %d/%d instances Ready after %s", a.ready, len(apps), secs(a.wall))
	return a, setup, lag, nil
}

// instanceLag is how long after its Stack an instance was seen Ready (the status mirroring
// the template arm adds), p50 / max, over the instances whose Stack and self were both seen
// Ready.
func (b *bench) instanceLag(ctx context.Context) (string, error) {
	var list pulumiv1.StackList
	if err := b.cluster.client.List(ctx, &list, client.InNamespace(nsPlatform), client.MatchingLabels{v1alpha1.TemplateLabel: templateName}); err != nil {
		return "", fmt.Errorf("failed to list the instances' Stacks: %w", err)
	}
	var lags []time.Duration
	for _, st := range list.Items {
		stackAt, ok := b.track.readyAt(st.Namespace, st.Name, "")
		if !ok {
			continue
		}
		if at, ok := b.track.instanceReadyAt(st.Annotations[v1alpha1.InstanceAnnotation]); ok {
			lags = append(lags, at.Sub(stackAt))
		}
	}
	if len(lags) == 0 {
		return "-", nil
	}
	s := Summarize(lags)
	return fmt.Sprintf("%s / %s (%d instances)", secs(s.P50), secs(s.Max), len(lags)), nil
}
