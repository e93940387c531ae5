package main

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/bench"
	"github.com/stackwright/stackwright/internal/executor/job"
)

// Milestones of one Update, as the benchmark's watches first see them: every one through
// the same API server's watches, so their differences are precise to milliseconds.
const (
	msApplied        = "applied"
	msUpdateCreated  = "Update created"
	msJobCreated     = "Job created"
	msRunnerStarted  = "runner container running"
	msUpdateFinished = "Update finished"
)

var phases = [][2]string{
	{msApplied, msUpdateCreated},
	{msUpdateCreated, msJobCreated},
	{msJobCreated, msRunnerStarted},
	{msRunnerStarted, msUpdateFinished},
}

// timeline records when each Update's milestones are first seen, keyed by Update name.
type timeline struct{ *bench.Timeline }

func newTimeline() *timeline { return &timeline{bench.NewTimeline()} }

// applied records when the change that made update was applied (known only once the
// Update is).
func (t *timeline) applied(update string, at time.Time) { t.Mark(update, msApplied, at) }

func (t *timeline) watch(ctx context.Context, c client.WithWatch, namespace string) {
	bench.FollowAll(ctx, c, namespace, t.observe, &v1alpha1.UpdateList{}, &batchv1.JobList{}, &corev1.PodList{})
}

func (t *timeline) observe(obj client.Object, now time.Time) {
	switch o := obj.(type) {
	case *v1alpha1.Update:
		t.Mark(o.Name, msUpdateCreated, now)
		if o.Status.Finished() {
			t.Mark(o.Name, msUpdateFinished, now)
		}
	case *batchv1.Job:
		t.Mark(o.Labels[job.LabelUpdate], msJobCreated, now)
	case *corev1.Pod:
		for _, cs := range o.Status.ContainerStatuses {
			if cs.State.Running != nil || cs.State.Terminated != nil {
				t.Mark(o.Labels[job.LabelUpdate], msRunnerStarted, now)
			}
		}
	}
}

// spans returns, for each phase, its durations over the given Updates.
func (t *timeline) spans(runs []string) map[[2]string][]time.Duration { return t.Spans(runs, phases) }
