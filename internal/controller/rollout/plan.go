package rollout

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/source/git"
)

// otherWave names the last wave of a byLabel rollout: the Stacks without a listed value.
const otherWave = "(other)"

// planWaves divides stacks into the spec's waves, each listing its Stacks by name. Empty
// waves are dropped: they would only wait on nothing.
func planWaves(spec *v1alpha1.StackRolloutSpec, stacks []pulumiv1.Stack) []v1alpha1.RolloutWaveStatus {
	names := make([]string, 0, len(stacks))
	for i := range stacks {
		names = append(names, stacks[i].Name)
	}
	sort.Strings(names)
	var waves []v1alpha1.RolloutWaveStatus
	add := func(name string, members []string) {
		if len(members) > 0 {
			waves = append(waves, v1alpha1.RolloutWaveStatus{Name: name, Stacks: members, State: v1alpha1.WavePending})
		}
	}
	if bl := spec.Waves.ByLabel; bl != nil {
		byValue := map[string][]string{}
		labels := map[string]map[string]string{}
		for i := range stacks {
			labels[stacks[i].Name] = stacks[i].Labels
		}
		var other []string
		for _, n := range names {
			v, ok := labels[n][bl.Key]
			if ok && slices.Contains(bl.Values, v) {
				byValue[v] = append(byValue[v], n)
			} else {
				other = append(other, n)
			}
		}
		for _, v := range bl.Values {
			add(v, byValue[v])
			delete(byValue, v) // a value listed twice makes one wave
		}
		add(otherWave, other)
		return waves
	}
	from := 0
	for i, step := range spec.Waves.Steps {
		upTo := min(max(stepCount(step.Stacks, len(names)), from), len(names))
		add(fmt.Sprintf("step-%d", i), names[from:upTo])
		from = upTo
	}
	add(fmt.Sprintf("step-%d", len(spec.Waves.Steps)), names[from:])
	return waves
}

// stepCount is how many of n Stacks a step's cumulative count or percentage covers: a
// percentage rounds up, so that 1% of a small fleet is one Stack, not none.
func stepCount(v intstr.IntOrString, n int) int {
	c, err := intstr.GetScaledValueFromIntOrPercent(&v, n, true)
	if err != nil || c < 0 {
		return 0
	}
	return c
}

// sourceKey identifies the source a Stack deploys from: Stacks of one rollout must share
// it, because a revision is a revision of one source.
func sourceKey(spec *pulumiv1.StackSpec) string {
	switch {
	case spec.ProgramRef != nil:
		return "Program/" + spec.ProgramRef.Name
	case spec.FluxSource != nil:
		return fmt.Sprintf("%s/%s", spec.FluxSource.SourceRef.Kind, spec.FluxSource.SourceRef.Name)
	case spec.ProjectRepo != "":
		ref := spec.Branch
		if spec.Commit != "" {
			ref = spec.Commit
		}
		return "git/" + git.RepoKey(spec.ProjectRepo) + "@" + ref
	}
	return string(spec.SourceKind())
}

// verdict is how a Stack of an open wave stands toward the target revision.
type verdict int

const (
	pending verdict = iota
	done
	failed
)

// judgeFunc tells how a Stack stands toward a revision: done, failed (with the reason and
// a message) or pending.
type judgeFunc func(stack *pulumiv1.Stack, target *v1alpha1.RolloutRevision, since *metav1.Time) (verdict, string, string)

// judge tells whether stack is Ready at the target, failed it, or is still on its way.
// Failures that finished before since (the last resume) are forgiven: the Stack gets a new
// try. Failures the Stack retries by itself (conflicts, lost runners, transient errors)
// are not failures of the revision.
func judge(stack *pulumiv1.Stack, target *v1alpha1.RolloutRevision, since *metav1.Time) (verdict, string, string) {
	if c := conditions.Get(stack, pulumiv1.ConditionStalled); c != nil && c.Status == "True" && !forgiven(since, c.LastTransitionTime.Time) {
		return failed, v1alpha1.ReasonStackStalled, fmt.Sprintf("Stack %s is Stalled (%s): %s", stack.Name, c.Reason, c.Message)
	}
	lu := stack.Status.LastUpdate
	sw := stack.Status.Stackwright
	if lu != nil && lu.State == pulumiv1.UpdateStateFailed && lu.LastAttemptedCommit == target.Revision &&
		sw != nil && sw.LastFailureReason == v1alpha1.ReasonPermanentFailure && (lu.LastResyncTime == nil || !forgiven(since, lu.LastResyncTime.Time)) {
		return failed, v1alpha1.ReasonStackUpdateFailed, fmt.Sprintf("Stack %s failed to update to %s: %s", stack.Name, target.Revision, lu.Message)
	}
	// A person who resumes a rollout halted by a warning has read it.
	if sw != nil && since == nil && sw.Approval != nil && sw.Approval.DesiredStateKey == sw.DesiredStateKey && len(sw.Approval.Violations) > 0 && sw.Approval.Revision == target.Revision {
		v := sw.Approval.Violations[0]
		return failed, v1alpha1.ReasonPolicyWarning, fmt.Sprintf("Stack %s: policy %s warns about %s: %s", stack.Name, v.Policy, target.Revision, v.Message)
	}
	if conditions.IsTrue(stack, pulumiv1.ConditionReady) && lu != nil && lu.LastSuccessfulCommit == target.Revision {
		return done, "", ""
	}
	return pending, "", ""
}

// forgiven reports whether something that happened at t came before the resume at since.
func forgiven(since *metav1.Time, t time.Time) bool {
	return since != nil && !t.After(since.Time)
}

// unfinished counts the Stacks of stacks not done yet.
func unfinished(stacks []string, isDone func(string) bool) int32 {
	n := int32(0)
	for _, name := range stacks {
		if !isDone(name) {
			n++
		}
	}
	return n
}

// release lets more of stacks go, in the order listed, until limit of those let go
// (*released, the first ones) are unfinished; 0 lets none go. It releases a wave's Stacks to
// the target (limit: the wave's maxParallel), and an automatic abort's Stacks back to the
// stable revision. *released never shrinks: a Stack once let go keeps going.
func release(stacks []string, released *int32, isDone func(string) bool, limit int32) {
	running := unfinished(stacks[:*released], isDone)
	for int(*released) < len(stacks) && running < limit {
		if !isDone(stacks[*released]) {
			running++
		}
		*released++
	}
}

// mixedSources says why the Stacks cannot share revisions, "" when they can.
func mixedSources(stacks []pulumiv1.Stack) string {
	first := map[string]string{}
	var keys []string
	for i := range stacks {
		k := sourceKey(&stacks[i].Spec)
		if _, ok := first[k]; !ok {
			first[k] = stacks[i].Name
			keys = append(keys, k)
		}
	}
	if len(keys) < 2 {
		return ""
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s (e.g. Stack %s)", k, first[k]))
	}
	return "the selected Stacks deploy from more than one source, so no revision is common to them: " + strings.Join(parts, ", ") +
		"; select the Stacks of one source, one rollout per source"
}

// count refreshes the Updated figures of every wave.
func count(st *v1alpha1.StackRolloutStatus, isDone func(string) bool) {
	st.Stacks, st.Updated = 0, 0
	for i := range st.Waves {
		w := &st.Waves[i]
		w.Updated = 0
		for _, n := range w.Stacks {
			if isDone(n) {
				w.Updated++
			}
		}
		st.Stacks += int32(len(w.Stacks))
		st.Updated += w.Updated
	}
}

// faultsOf lists the failures of the open Stacks, and the reason of the first; it adds
// their names to the failed ones.
func faultsOf(st *v1alpha1.StackRolloutStatus, stacks map[string]*pulumiv1.Stack, judge judgeFunc) (string, []string) {
	var reason string
	var faults []string
	for i := 0; i <= int(st.Wave) && i < len(st.Waves); i++ {
		w := st.Waves[i]
		for j, n := range w.Stacks {
			if i == int(st.Wave) && j >= int(w.Released) {
				break
			}
			stack, ok := stacks[n]
			if !ok {
				continue
			}
			if v, why, msg := judge(stack, st.Target, st.ResumeTime); v == failed {
				if reason == "" {
					reason = why
				}
				faults = append(faults, msg)
				st.FailedStacks = appendUnique(st.FailedStacks, n)
			}
		}
	}
	return reason, faults
}

func appendUnique(list []string, n string) []string {
	for _, x := range list {
		if x == n {
			return list
		}
	}
	return append(list, n)
}

// available is the revision the Stacks report their source offers; when they disagree
// (a new revision reaches them one by one), the one most of them report.
func available(rollout string, stacks []pulumiv1.Stack) *v1alpha1.RolloutRevision {
	return most(stacks, func(st *pulumiv1.Stack) *pulumiv1.ArtifactRef {
		if sw := st.Status.Stackwright; sw != nil && sw.Rollout != nil && sw.Rollout.Name == rollout {
			return sw.Rollout.Available
		}
		return nil
	})
}

// mostDeployed is the artifact most Stacks deployed last: the stable revision of a rollout
// that has none recorded yet.
func mostDeployed(stacks []pulumiv1.Stack) *v1alpha1.RolloutRevision {
	return most(stacks, func(st *pulumiv1.Stack) *pulumiv1.ArtifactRef {
		if sw := st.Status.Stackwright; sw != nil && st.Status.LastUpdate != nil && st.Status.LastUpdate.LastSuccessfulCommit != "" &&
			sw.LastArtifact != nil && sw.LastArtifact.Revision == st.Status.LastUpdate.LastSuccessfulCommit {
			return sw.LastArtifact
		}
		return nil
	})
}

// most returns the revision pick gives for the most Stacks (the first in name order on a
// tie), nil when it gives none.
func most(stacks []pulumiv1.Stack, pick func(*pulumiv1.Stack) *pulumiv1.ArtifactRef) *v1alpha1.RolloutRevision {
	sorted := make([]*pulumiv1.Stack, 0, len(stacks))
	for i := range stacks {
		sorted = append(sorted, &stacks[i])
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	counts := map[v1alpha1.RolloutRevision]int{}
	var best *v1alpha1.RolloutRevision
	for _, st := range sorted {
		a := pick(st)
		if a == nil || a.Revision == "" || a.Digest == "" {
			continue
		}
		rev := v1alpha1.RolloutRevision{Revision: a.Revision, Digest: a.Digest}
		counts[rev]++
		if best == nil || counts[rev] > counts[*best] {
			best = &rev
		}
	}
	return best
}

// notAt lists the Stacks not Ready at rev, as judge tells.
func notAt(stacks []pulumiv1.Stack, rev *v1alpha1.RolloutRevision, judge judgeFunc) []string {
	if rev == nil {
		return nil
	}
	var out []string
	for i := range stacks {
		if v, _, _ := judge(&stacks[i], rev, nil); v != done {
			out = append(out, stacks[i].Name)
		}
	}
	sort.Strings(out)
	return out
}
