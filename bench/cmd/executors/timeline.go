package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/bench"
)

// Milestones of one Stack's first run, as the benchmark's watches first see them. Every
// milestone is seen through the same API server watch, so the differences between them
// are precise to a few milliseconds (object timestamps have whole seconds only).
const (
	msApplied         = "applied"
	msUpdateCreated   = "Update created"
	msClaimed         = "Update claimed"
	msJobCreated      = "Job created"
	msPodCreated      = "Pod created"
	msPodScheduled    = "Pod scheduled"
	msRunnerStarted   = "runner container running"
	msUpdateFinished  = "Update finished"
	msStackReady      = "Stack Ready"
	msRunnerCompleted = "runner container terminated"
)

// phases are the spans reported, between consecutive milestones of a run; a span whose
// milestones an executor does not have (a local run has no Job) is left out.
var phases = [][2]string{
	{msApplied, msUpdateCreated},
	{msUpdateCreated, msClaimed},
	{msClaimed, msJobCreated},
	{msJobCreated, msPodCreated},
	{msPodCreated, msPodScheduled},
	{msPodScheduled, msRunnerStarted},
	{msRunnerStarted, msUpdateFinished},
	{msClaimed, msUpdateFinished},
	{msUpdateFinished, msStackReady},
	{msUpdateFinished, msRunnerCompleted},
	{msJobCreated, msRunnerStarted},
	{msApplied, msStackReady},
}

// timeline records when the milestones of each Stack's first Update are first seen.
type timeline struct {
	*bench.Timeline // Stack name → milestone → first seen
	mu              sync.Mutex
	first           map[string]string // Stack name → its first Update's name
}

func newTimeline() *timeline {
	return &timeline{Timeline: bench.NewTimeline(), first: map[string]string{}}
}

// watch follows the namespace's Stacks, Updates, Jobs and Pods until ctx ends.
func (t *timeline) watch(ctx context.Context, c client.WithWatch, ns string) {
	bench.FollowAll(ctx, c, ns, t.observe, &pulumiv1.StackList{}, &v1alpha1.UpdateList{}, &batchv1.JobList{}, &corev1.PodList{})
}

func (t *timeline) observe(obj client.Object, now time.Time) {
	switch o := obj.(type) {
	case *pulumiv1.Stack:
		if apimeta.IsStatusConditionTrue(o.Status.Conditions, pulumiv1.ConditionReady) {
			t.Mark(o.Name, msStackReady, now)
		}
	case *v1alpha1.Update:
		stack := o.Spec.StackName
		if !t.firstUpdate(stack, o.Name) {
			return
		}
		t.Mark(stack, msUpdateCreated, now)
		if o.Status.Phase != "" && o.Status.Phase != v1alpha1.UpdatePhasePending {
			t.Mark(stack, msClaimed, now)
		}
		if o.Status.Finished() {
			t.Mark(stack, msUpdateFinished, now)
		}
	case *batchv1.Job:
		t.Mark(o.Labels[v1alpha1.StackLabel], msJobCreated, now)
	case *corev1.Pod:
		stack := o.Labels[v1alpha1.StackLabel]
		t.Mark(stack, msPodCreated, now)
		if o.Spec.NodeName != "" {
			t.Mark(stack, msPodScheduled, now)
		}
		for _, cs := range o.Status.ContainerStatuses {
			if cs.State.Running != nil || cs.State.Terminated != nil {
				t.Mark(stack, msRunnerStarted, now)
			}
			if cs.State.Terminated != nil {
				t.Mark(stack, msRunnerCompleted, now)
			}
		}
	}
}

// firstUpdate reports whether update is the first Update seen of stack: a retry's
// milestones are not the first run's.
func (t *timeline) firstUpdate(stack, update string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if first, ok := t.first[stack]; ok {
		return first == update
	}
	t.first[stack] = update
	return true
}

// since is how long after start the last of the Stacks was seen Ready by the watch, which
// is precise where waitReady polls; polled is when waitReady saw them all, the answer
// when the watch missed one.
func (t *timeline) since(start, polled time.Time, stacks ...string) time.Duration {
	var last time.Time
	for _, s := range stacks {
		at, ok := t.At(s, msStackReady)
		if !ok || at.After(polled) {
			return polled.Sub(start)
		}
		if at.After(last) {
			last = at
		}
	}
	return last.Sub(start)
}

// spans returns, for each phase, its durations over the given Stacks.
func (t *timeline) spans(runs []string) map[[2]string][]time.Duration { return t.Spans(runs, phases) }

// renderPhases is a table of the phases' medians and p90s over each executor's single runs.
func renderPhases(rs []result) string {
	var b strings.Builder
	b.WriteString("| phase of a single run (first seen by a watch) |")
	for _, r := range rs {
		fmt.Fprintf(&b, " %s median | %s p90 |", r.executor, r.executor)
	}
	b.WriteString("\n| --- |")
	for range rs {
		b.WriteString(" --- | --- |")
	}
	b.WriteString("\n")
	for _, p := range phases {
		row := fmt.Sprintf("| %s → %s |", p[0], p[1])
		filled := false
		for _, r := range rs {
			ds := r.phases[p]
			if len(ds) == 0 {
				row += " - | - |"
				continue
			}
			filled = true
			s := bench.Summarize(ds)
			row += fmt.Sprintf(" %s | %s |", s.P50.Round(time.Millisecond), s.P90.Round(time.Millisecond))
		}
		if filled {
			b.WriteString(row + "\n")
		}
	}
	return b.String()
}
