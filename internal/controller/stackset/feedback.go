package stackset

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/forge"
)

// EventFeedbackFailed is recorded on a pull request's Stack when its feedback did not
// reach the forge; it is retried 30 s later, or when the forge says.
const EventFeedbackFailed = "FeedbackFailed"

// Feedback bounds.
const (
	defaultStatusContext = "stackwright"
	// feedbackRetry is how soon feedback that did not reach the forge is tried again,
	// unless the forge said when.
	feedbackRetry = 30 * time.Second
	// maxMessageBytes is the most of an Update's message a comment quotes.
	maxMessageBytes = 4000
)

// feedback tells the forge what became of each pull request's Stack: a commit status on
// its head and one comment, edited in place, each time the Stack's verdict on the head
// changes; and, once a closed pull request's Stack is gone, that it is. What did not reach
// the forge is retried (30 s later, or when the forge says) and shown on the Stack (an
// event) and in the set's status, without failing anything.
func (r *Reconciler) feedback(ctx context.Context, s *scope) (bool, error) {
	set := s.set
	g := set.Spec.Generator.PullRequests
	if g == nil || s.forge == nil {
		set.Status.PullRequests = nil
		return true, nil
	}
	fb := feedbackOptions(g.Feedback)
	prev := map[int32]v1alpha1.PullRequestStatus{}
	for _, p := range set.Status.PullRequests {
		prev[p.Number] = p
	}
	stacks := map[string]*pulumiv1.Stack{}
	for i := range s.stacks {
		stacks[s.stacks[i].Annotations[v1alpha1.StackSetElementAnnotation]] = &s.stacks[i]
	}
	var next []v1alpha1.PullRequestStatus
	var retry time.Duration
	failed := func(st *pulumiv1.Stack, entry *v1alpha1.PullRequestStatus, err error) {
		entry.Error = err.Error()
		retry = max(retry, cmp.Or(forge.RetryAfter(err), feedbackRetry))
		if st != nil {
			s.events.Add(st, corev1.EventTypeWarning, EventFeedbackFailed, "Pull request #%d: %s", entry.Number, err)
		}
	}
	for _, e := range s.elems {
		pr := s.prs[e.id]
		w := s.want[elementKey(e.id)]
		if w == nil {
			continue
		}
		number := int32(pr.Number) //nolint:gosec // a forge's pull request numbers fit
		entry := prev[number]
		if entry.Stack != w.Name {
			entry = v1alpha1.PullRequestStatus{Number: number, Stack: w.Name}
		}
		entry.HeadSHA = pr.HeadSHA
		v := verdictOf(stacks[e.id], pr.HeadSHA)
		if key := v.key(); key != entry.Reported {
			if err := r.tell(ctx, s, fb, pr, w.Name, v); err != nil {
				failed(stacks[e.id], &entry, err)
			} else {
				entry.Reported, entry.Error = key, ""
			}
		}
		next = append(next, entry)
	}
	// Pull requests closed (or no longer kept): once their Stack has left the set, say so.
	kept := map[int32]bool{}
	for _, e := range next {
		kept[e.Number] = true
	}
	for _, number := range slices.Sorted(maps.Keys(prev)) {
		entry := prev[number]
		if kept[number] {
			continue
		}
		id := strconv.Itoa(int(number))
		expired := slices.ContainsFunc(set.Status.Expired, func(x v1alpha1.ExpiredElement) bool { return x.Element == id })
		if st := stacks[id]; expired || (st != nil && st.DeletionTimestamp.IsZero()) {
			// Its Stack expired (a push brings it back), or its removal is held
			// (maxRemovals) or has not happened yet.
			next = append(next, entry)
			continue
		}
		why := "the pull request is closed"
		if _, open := s.prs[id]; open {
			why = "the pull request no longer matches the set's filters"
		}
		if fb.comment {
			if err := s.forge.UpsertComment(ctx, int(number), marker(set, entry.Stack), closedComment(set, entry.Stack, why)); err != nil {
				failed(nil, &entry, err)
				next = append(next, entry)
			}
		}
	}
	slices.SortFunc(next, func(a, b v1alpha1.PullRequestStatus) int { return cmp.Compare(a.Number, b.Number) })
	set.Status.PullRequests = next
	if retry > 0 {
		s.requeue.After(retry)
	}
	return true, nil
}

// feedbackOpts is a generator's feedback with its defaults.
type feedbackOpts struct {
	comment, status bool
	context, url    string
}

func feedbackOptions(f *v1alpha1.PullRequestFeedback) feedbackOpts {
	o := feedbackOpts{comment: true, status: true, context: defaultStatusContext}
	if f == nil {
		return o
	}
	if f.Comment != nil {
		o.comment = *f.Comment
	}
	if f.Status != nil {
		o.status = *f.Status
	}
	o.context = cmp.Or(f.Context, o.context)
	o.url = f.URL
	return o
}

// verdict is what a pull request's Stack says of the pull request's head now.
type verdict struct {
	state forge.State
	sha   string
	// update is the Update that ran (or runs) for the head, "" when none has yet.
	update string
	// op is the Update's type (preview, up).
	op string
	// message is the Update's message, or why the Stack cannot run.
	message string
}

// verdictOf reads st's status for head: its last run of head, once finished; a stall of
// its current generation; otherwise pending, with the Update in flight if it is head's.
func verdictOf(st *pulumiv1.Stack, head string) verdict {
	v := verdict{state: forge.StatePending, sha: head}
	if st == nil {
		return v
	}
	if lu := st.Status.LastUpdate; lu != nil && lu.LastAttemptedCommit == head && ownOp(lu.Type) {
		v.update, v.op, v.message = lu.Name, lu.Type, lu.Message
		v.state = forge.StateFailure
		if lu.State == pulumiv1.UpdateStateSucceeded {
			v.state = forge.StateSuccess
		}
		return v
	}
	if c := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == st.Generation {
		v.state, v.message = forge.StateFailure, c.Message
		return v
	}
	if cu := st.Status.CurrentUpdate; cu != nil && cu.Commit == head && ownOp(cu.Type) {
		v.update = cu.Name
	}
	return v
}

// ownOp reports whether an Update of type t speaks of the program at a commit: its update
// or preview, not a drift check, refresh or destroy.
func ownOp(t string) bool {
	return t == "" || t == string(v1alpha1.UpdateTypeUp) || t == string(v1alpha1.UpdateTypePreview)
}

// key is what the forge is told, as the set's status records it: a change of it is news.
// A pending head is one piece of news, whether its Update has started or not.
func (v verdict) key() string {
	if v.state == forge.StatePending {
		return fmt.Sprintf("%s of %s", v.state, short(v.sha))
	}
	return fmt.Sprintf("%s of %s by %s", v.state, short(v.sha), cmp.Or(v.update, "-"))
}

func short(sha string) string { return sha[:min(len(sha), 12)] }

// tell gives the forge v: the commit status, then the comment.
func (r *Reconciler) tell(ctx context.Context, s *scope, fb feedbackOpts, pr forge.PullRequest, stack string, v verdict) error {
	set := s.set
	link := feedbackLink(fb.url, set.Namespace, stack, v.update)
	var u *v1alpha1.Update
	if v.update != "" && v.state != forge.StatePending {
		// From the API server: the manager's cache of Updates leaves their steps out.
		u = &v1alpha1.Update{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: set.Namespace, Name: v.update}, u); err != nil {
			// The Stack's record is enough without the Update's steps.
			u = nil
		}
	}
	if fb.status {
		st := forge.Status{State: v.state, Context: fb.context + "/" + stack, Description: describe(v, u), TargetURL: link}
		if err := s.forge.SetStatus(ctx, pr.HeadSHA, st); err != nil {
			return fmt.Errorf("failed to set the commit status: %w", err)
		}
	}
	if fb.comment {
		if err := s.forge.UpsertComment(ctx, pr.Number, marker(set, stack), comment(set, stack, v, u, link)); err != nil {
			return fmt.Errorf("failed to write the comment: %w", err)
		}
	}
	return nil
}

// marker is the hidden line that finds a Stack's comment again.
func marker(set *v1alpha1.StackSet, stack string) string {
	return "<!-- stackwright:feedback " + set.Namespace + "/" + stack + " -->"
}

func feedbackLink(tmpl, namespace, stack, update string) string {
	if tmpl == "" {
		return ""
	}
	return strings.NewReplacer("{{namespace}}", namespace, "{{stack}}", stack, "{{update}}", update).Replace(tmpl)
}

var stateWords = map[forge.State]string{forge.StatePending: "running", forge.StateSuccess: "succeeded", forge.StateFailure: "failed"}

// describe is the commit status's one line.
func describe(v verdict, u *v1alpha1.Update) string {
	op := cmp.Or(v.op, "update")
	switch {
	case v.state == forge.StatePending:
		return "Stackwright: " + op + " of " + short(v.sha) + " pending"
	case u != nil && v.state == forge.StateSuccess:
		return "Stackwright: " + op + " succeeded: " + changeSummary(u.Status.Changes)
	default:
		return "Stackwright: " + op + " " + stateWords[v.state]
	}
}

// changeOps are the operations a comment counts, in its columns' order.
var changeOps = []string{"create", "update", "replace", "delete"}

// changeSummary counts an Update's changes: "1 to create, 2 to update, 3 unchanged".
func changeSummary(changes map[string]int64) string {
	var parts []string
	for _, op := range changeOps {
		if n := changes[op]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d to %s", n, op))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "no changes")
	}
	if n := changes["same"]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d unchanged", n))
	}
	return strings.Join(parts, ", ")
}

// comment is a Stack's comment on its pull request: the verdict, the changes by resource
// type (from the Update's steps), and a failure's message. It quotes only what the
// Update's and the Stack's status hold, which never hold a secret's value.
func comment(set *v1alpha1.StackSet, stack string, v verdict, u *v1alpha1.Update, link string) string {
	var b strings.Builder
	op := cmp.Or(v.op, "update")
	icon := map[forge.State]string{forge.StatePending: "⏳", forge.StateSuccess: "✅", forge.StateFailure: "❌"}[v.state]
	fmt.Fprintf(&b, "%s\n%s **Stackwright** %s of `%s` **%s** · Stack `%s/%s`", marker(set, stack), icon, op, short(v.sha), stateWords[v.state], set.Namespace, stack)
	if v.update != "" {
		fmt.Fprintf(&b, " · Update `%s`", v.update)
	}
	if link != "" {
		fmt.Fprintf(&b, " · [details](%s)", link)
	}
	b.WriteString("\n")
	if u != nil && len(u.Status.Changes) > 0 {
		b.WriteString("\n" + changeTable(u) + "\n" + changeSummary(u.Status.Changes) + "\n")
	}
	if v.state == forge.StateFailure && v.message != "" {
		b.WriteString("\n" + fenced(v.message) + "\n")
	}
	return b.String()
}

// changeTable counts an Update's steps by resource type and operation.
func changeTable(u *v1alpha1.Update) string {
	counts := map[string]map[string]int{}
	for _, st := range u.Status.Steps {
		// Providers are not counted in the engine's summary either.
		if !slices.Contains(changeOps, st.Op) || strings.HasPrefix(st.Type, "pulumi:providers:") {
			continue
		}
		typ := strings.ReplaceAll(cmp.Or(st.Type, "(unknown)"), "`", "")
		if counts[typ] == nil {
			counts[typ] = map[string]int{}
		}
		counts[typ][st.Op]++
	}
	if len(counts) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| Resource type | create | update | replace | delete |\n| --- | --- | --- | --- | --- |\n")
	for _, typ := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, "| `%s` |", typ)
		for _, op := range changeOps {
			fmt.Fprintf(&b, " %d |", counts[typ][op])
		}
		b.WriteString("\n")
	}
	if u.Status.StepsOmitted > 0 {
		fmt.Fprintf(&b, "\n%d more steps are not listed.\n", u.Status.StepsOmitted)
	}
	return b.String()
}

// fenced quotes s in a code block no backtick run in s can close.
func fenced(s string) string {
	if len(s) > maxMessageBytes {
		s = s[:maxMessageBytes] + "…"
	}
	fence := "```"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	return fence + "\n" + s + "\n" + fence
}

// closedComment is the last word of a pull request's Stack, gone from the set for why.
func closedComment(set *v1alpha1.StackSet, stack, why string) string {
	what := "kept, released from the set (deletionPolicy Orphan)"
	if set.Spec.DeletionPolicy == v1alpha1.StackSetDestroy {
		what = "destroyed and deleted (deletionPolicy Destroy)"
	}
	return fmt.Sprintf("%s\n🧹 **Stackwright** · Stack `%s/%s`: %s; its Stack is %s.\n", marker(set, stack), set.Namespace, stack, why, what)
}
