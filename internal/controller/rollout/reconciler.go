package rollout

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/metrics"
)

// FieldManager owns what this controller writes: the rollouts' status, their gate Jobs and
// the reconcile requests a resume sets on failed Stacks.
const FieldManager = "stackwright-rollout-controller"

// Events recorded on StackRollouts.
const (
	EventRolloutStarted   = "RolloutStarted"
	EventWaveStarted      = "WaveStarted"
	EventWaveReady        = "WaveReady"
	EventGateStarted      = "GateStarted"
	EventWavePassed       = "WavePassed"
	EventAwaitPromotion   = "AwaitingPromotion"
	EventPromoted         = "Promoted"
	EventRolloutHalted    = "RolloutHalted"
	EventRolloutResumed   = "RolloutResumed"
	EventRolloutAborted   = "RolloutAborted"
	EventRolloutSucceeded = "RolloutSucceeded"
	EventRequestIgnored   = "RequestIgnored"
	eventAction           = "Rollout"
)

// maxNamed bounds how many Stacks a condition message names.
const maxNamed = 10

// +kubebuilder:rbac:groups=stackwright.dev,resources=stackrollouts,verbs=get;list;watch
// +kubebuilder:rbac:groups=stackwright.dev,resources=stackrollouts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=get;list;watch;patch

// Reconciler moves each StackRollout's target revision through its waves.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Now is the clock; tests replace it.
	Now func() time.Time
}

// Reconcile implements reconcile.Reconciler: get, defer the status patch, then one step of
// the rollout's state machine. Deleting a rollout needs no finalizer: its Stacks simply
// deploy what their source offers again, as without a rollout.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	ro := &v1alpha1.StackRollout{}
	if err := r.Client.Get(ctx, req.NamespacedName, ro); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.ForgetRollout(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ro.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	p := patch.New(r.Client, ro, "StackRollout", FieldManager)
	defer func() {
		conditions.Finalize(ro, &ro.Status.ObservedGeneration)
		if err := p.Status(ctx, ro); err != nil {
			retErr = errors.Join(retErr, err)
		}
		metrics.ObserveRollout(ro.Namespace, ro.Name, string(ro.Status.Phase), int(ro.Status.Wave), ro.Status.Phase == v1alpha1.RolloutHalted)
		ctrl.LoggerFrom(ctx).Info("Reconciled StackRollout", "duration", time.Since(start).Round(time.Millisecond),
			"phase", ro.Status.Phase, "wave", ro.Status.WaveName, "updated", ro.Status.Updated, "stacks", ro.Status.Stacks, "requeueAfter", result.RequeueAfter)
	}()
	stacks, err := r.selected(ctx, ro)
	if err != nil {
		conditions.MarkStalled(ro, pulumiv1.ReasonSpecInvalid, err.Error())
		return ctrl.Result{}, nil
	}
	if msg := mixedSources(stacks); msg != "" {
		conditions.MarkStalled(ro, v1alpha1.ReasonMixedSources, msg)
		return ctrl.Result{}, nil
	}
	s := &state{ro: ro, stacks: map[string]*pulumiv1.Stack{}, now: r.now()}
	for i := range stacks {
		s.stacks[stacks[i].Name] = &stacks[i]
		s.list = append(s.list, stacks[i])
	}
	if ro.Status.Phase == "" {
		ro.Status.Phase = v1alpha1.RolloutIdle
	}
	if err := r.handleRequests(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if ro.Status.Target == nil {
		r.idle(s)
	}
	if ro.Status.Target != nil {
		if err := r.progress(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: s.requeue}, nil
}

// state is what one reconcile of a rollout knows.
type state struct {
	ro      *v1alpha1.StackRollout
	stacks  map[string]*pulumiv1.Stack
	list    []pulumiv1.Stack
	now     time.Time
	requeue time.Duration
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// selected lists the rollout's Stacks, by its selector, in its namespace.
func (r *Reconciler) selected(ctx context.Context, ro *v1alpha1.StackRollout) ([]pulumiv1.Stack, error) {
	sel, err := metav1.LabelSelectorAsSelector(&ro.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("spec.selector is invalid: %w", err)
	}
	if sel.Empty() {
		return nil, errors.New("spec.selector selects every Stack of the namespace: give it a label to match")
	}
	var list pulumiv1.StackList
	// The cache's own objects, not copies: a rollout is reconciled on every change of
	// any of its Stacks, and copying the whole fleet each time made that quadratic. They
	// are only read (retry copies the one it patches).
	if err := r.Client.List(ctx, &list, client.InNamespace(ro.Namespace), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("failed to list Stacks: %w", err)
	}
	out := list.Items[:0]
	for _, st := range list.Items {
		if st.DeletionTimestamp.IsZero() {
			out = append(out, st)
		}
	}
	return out, nil
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

// request returns the value of an annotation not acted on yet, "" if none.
func request(ro *v1alpha1.StackRollout, annotation, handled string) string {
	if v := ro.Annotations[annotation]; v != "" && v != handled {
		return v
	}
	return ""
}

// handleRequests acts on new abort and resume requests, and refuses (once) a promotion
// while no wave awaits one.
func (r *Reconciler) handleRequests(ctx context.Context, s *state) error {
	ro, st := s.ro, &s.ro.Status
	active := st.Target != nil && (st.Phase == v1alpha1.RolloutProgressing || st.Phase == v1alpha1.RolloutHalted)
	if v := request(ro, v1alpha1.RolloutAbortAnnotation, st.HandledAbort); v != "" {
		st.HandledAbort = v
		if active {
			r.event(ro, corev1.EventTypeWarning, EventRolloutAborted, "revision %s aborted at wave %s: the Stacks of the opened waves deploy %s again", st.Target.Revision, st.WaveName, revisionOf(st.Stable))
			st.Aborted, st.Target = st.Target, nil
			st.Phase, st.FailedStacks = v1alpha1.RolloutAborted, nil
			conditions.Remove(ro, v1alpha1.ConditionHalted)
		} else {
			r.event(ro, corev1.EventTypeNormal, EventRequestIgnored, "abort %q ignored: no revision is being rolled out (phase %s)", v, st.Phase)
		}
	}
	if v := request(ro, v1alpha1.RolloutResumeAnnotation, st.HandledResume); v != "" {
		st.HandledResume = v
		if st.Phase == v1alpha1.RolloutHalted {
			if err := r.retry(ctx, s, st.FailedStacks); err != nil {
				st.HandledResume = ""
				return err
			}
			now := metav1.NewTime(s.now)
			st.Phase, st.ResumeTime, st.FailedStacks = v1alpha1.RolloutProgressing, &now, nil
			conditions.Remove(ro, v1alpha1.ConditionHalted)
			r.event(ro, corev1.EventTypeNormal, EventRolloutResumed, "resumed at wave %s: failures before now are forgiven and the failed Stacks are retried", st.WaveName)
		} else {
			r.event(ro, corev1.EventTypeNormal, EventRequestIgnored, "resume %q ignored: the rollout is not halted (phase %s)", v, st.Phase)
		}
	}
	if v := request(ro, v1alpha1.RolloutPromoteAnnotation, st.HandledPromote); v != "" && !awaitingPromotion(ro) {
		st.HandledPromote = v
		r.event(ro, corev1.EventTypeNormal, EventRequestIgnored, "promote %q ignored: no wave awaits promotion (phase %s)", v, st.Phase)
	}
	return nil
}

func awaitingPromotion(ro *v1alpha1.StackRollout) bool {
	st := &ro.Status
	return st.Target != nil && st.Phase == v1alpha1.RolloutProgressing && int(st.Wave) < len(st.Waves) &&
		st.Waves[st.Wave].State == v1alpha1.WaveAwaitingPromotion
}

// retry asks each failed Stack for a new try now, with PKO's reconcile-request annotation,
// rather than at the end of its backoff (or never, if it stalled).
func (r *Reconciler) retry(ctx context.Context, s *state, names []string) error {
	value := s.now.UTC().Format(time.RFC3339Nano)
	for _, n := range names {
		cached, ok := s.stacks[n]
		if !ok {
			continue
		}
		st := cached.DeepCopy()
		p := client.MergeFrom(cached)
		if st.Annotations == nil {
			st.Annotations = map[string]string{}
		}
		st.Annotations[pulumiv1.ReconcileRequestAnnotation] = value
		if err := r.Client.Patch(ctx, st, p, client.FieldOwner(FieldManager)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to request a retry of Stack %s: %w", n, err)
		}
	}
	return nil
}

// idle starts the revision the Stacks' source offers when it is new, or says that there is
// nothing to roll out.
func (r *Reconciler) idle(s *state) {
	ro, st := s.ro, &s.ro.Status
	if st.Stable == nil {
		st.Stable = mostDeployed(s.list)
	}
	avail := available(ro.Name, s.list)
	if avail != nil && (st.Stable == nil || avail.Revision != st.Stable.Revision) && (st.Aborted == nil || avail.Revision != st.Aborted.Revision) {
		r.start(s, avail)
		return
	}
	switch {
	case st.Phase == v1alpha1.RolloutAborted:
		if behind := notAt(s.list, st.Stable); len(behind) > 0 {
			conditions.MarkReconciling(ro, v1alpha1.ReasonRollingBack, fmt.Sprintf("revision %s was aborted; %d Stack(s) are deploying %s again: %s",
				revisionOf(st.Aborted), len(behind), revisionOf(st.Stable), names(behind)))
			return
		}
		if st.Stable == nil {
			conditions.MarkReady(ro, v1alpha1.ReasonRolloutAborted, fmt.Sprintf("revision %s was aborted; no revision ever reached every wave, so there is none to return to and the Stacks keep what they have; a newer revision starts a new rollout",
				revisionOf(st.Aborted)))
			return
		}
		conditions.MarkReady(ro, v1alpha1.ReasonRolloutAborted, fmt.Sprintf("revision %s was aborted and every Stack has %s; a newer revision starts a new rollout",
			revisionOf(st.Aborted), revisionOf(st.Stable)))
	case avail == nil && len(s.list) > 0:
		conditions.MarkReconciling(ro, v1alpha1.ReasonRolloutWaiting, "waiting for the selected Stacks to report the revision their source offers")
	default:
		st.Phase = v1alpha1.RolloutIdle
		if behind := notAt(s.list, st.Stable); len(behind) > 0 {
			conditions.MarkReconciling(ro, v1alpha1.ReasonConverging, fmt.Sprintf("%d Stack(s) are deploying the stable revision %s: %s",
				len(behind), revisionOf(st.Stable), names(behind)))
			return
		}
		conditions.MarkReady(ro, v1alpha1.ReasonRolledOut, fmt.Sprintf("%d Stack(s) at %s; no newer revision is offered", len(s.list), revisionOf(st.Stable)))
	}
}

// start begins the rollout of target: the waves are planned from the Stacks selected now.
func (r *Reconciler) start(s *state, target *v1alpha1.RolloutRevision) {
	ro, st := s.ro, &s.ro.Status
	now := metav1.NewTime(s.now)
	st.Target, st.Phase = target, v1alpha1.RolloutProgressing
	st.Waves, st.Wave = planWaves(&ro.Spec, s.list), 0
	st.StartTime, st.CompletionTime, st.ResumeTime, st.FailedStacks = &now, nil, nil, nil
	conditions.Remove(ro, v1alpha1.ConditionHalted)
	waveNames := make([]string, 0, len(st.Waves))
	for _, w := range st.Waves {
		waveNames = append(waveNames, fmt.Sprintf("%s (%d)", w.Name, len(w.Stacks)))
	}
	r.event(ro, corev1.EventTypeNormal, EventRolloutStarted, "rolling out %s (from %s) in %d wave(s): %s", target.Revision, revisionOf(st.Stable), len(st.Waves), strings.Join(waveNames, ", "))
	if len(st.Waves) > 0 {
		st.WaveName = st.Waves[0].Name
		st.Waves[0].State = v1alpha1.WaveUpdating
	}
}

// progress moves the target through the waves as far as it can go now.
func (r *Reconciler) progress(ctx context.Context, s *state) error {
	ro, st := s.ro, &s.ro.Status
	isDone := func(n string) bool {
		stack, ok := s.stacks[n]
		if !ok {
			// Deleted or no longer selected: nothing to wait for.
			return true
		}
		v, _, _ := judge(stack, st.Target, st.ResumeTime)
		return v == done
	}
	for {
		if int(st.Wave) >= len(st.Waves) {
			if r.complete(s); st.Target == nil {
				return nil
			}
			continue
		}
		w := &st.Waves[st.Wave]
		st.WaveName = w.Name
		count(s, isDone)
		if st.Phase == v1alpha1.RolloutHalted {
			return nil
		}
		if reason, faults := faultsOf(s); len(faults) > 0 {
			r.halt(s, reason, faults)
			return nil
		}
		release(w, isDone, ro.Spec.MaxParallel)
		if int(w.Updated) < len(w.Stacks) {
			// A wave that fell out of Ready bakes afresh once it is back.
			w.ReadyTime = nil
			w.State = v1alpha1.WaveUpdating
			conditions.MarkReconciling(ro, v1alpha1.ReasonWaveUpdating, fmt.Sprintf("wave %s (%d of %d): %d of %d Stack(s) at %s, %d released",
				w.Name, st.Wave+1, len(st.Waves), w.Updated, len(w.Stacks), st.Target.Revision, w.Released))
			return nil
		}
		if w.ReadyTime == nil {
			t := metav1.NewTime(s.now)
			w.ReadyTime = &t
			r.event(ro, corev1.EventTypeNormal, EventWaveReady, "wave %s: all %d Stack(s) Ready at %s", w.Name, len(w.Stacks), st.Target.Revision)
		}
		if left := bakeTime(ro) - s.now.Sub(w.ReadyTime.Time); left > 0 {
			w.State = v1alpha1.WaveBaking
			conditions.MarkReconciling(ro, v1alpha1.ReasonWaveBaking, fmt.Sprintf("wave %s is Ready at %s and bakes for %s more", w.Name, st.Target.Revision, left.Round(time.Second)))
			s.requeue = left
			return nil
		}
		last := int(st.Wave) == len(st.Waves)-1
		if !last && ro.Spec.Gates.JobFrom != nil {
			passed, failure, err := r.gate(ctx, s)
			if err != nil {
				return err
			}
			if failure != "" {
				w.State = v1alpha1.WaveFailed
				r.halt(s, v1alpha1.ReasonGateFailed, []string{failure})
				return nil
			}
			if !passed {
				w.State = v1alpha1.WaveGating
				conditions.MarkReconciling(ro, v1alpha1.ReasonWaveGating, fmt.Sprintf("wave %s is Ready at %s; its gate Job %s runs", w.Name, st.Target.Revision, w.GateJob))
				return nil
			}
		}
		if !last && ro.Spec.Gates.Approval == v1alpha1.RolloutApprovalManual {
			if w.State != v1alpha1.WaveAwaitingPromotion {
				w.State = v1alpha1.WaveAwaitingPromotion
				r.event(ro, corev1.EventTypeNormal, EventAwaitPromotion, "wave %s passed its gates and awaits promotion: kubectl stackwright rollout promote %s", w.Name, ro.Name)
			}
			v := request(ro, v1alpha1.RolloutPromoteAnnotation, st.HandledPromote)
			if v == "" {
				conditions.MarkReconciling(ro, v1alpha1.ReasonAwaitingPromotion, fmt.Sprintf(
					"wave %s passed its gates; promote it with `kubectl stackwright rollout promote %s` or `kubectl annotate stackrollout %s %s=$(date +%%s) --overwrite`",
					w.Name, ro.Name, ro.Name, v1alpha1.RolloutPromoteAnnotation))
				return nil
			}
			st.HandledPromote = v
			r.event(ro, corev1.EventTypeNormal, EventPromoted, "wave %s promoted (%s=%s)", w.Name, v1alpha1.RolloutPromoteAnnotation, v)
		}
		w.State = v1alpha1.WaveDone
		if last {
			if r.complete(s); st.Target == nil {
				return nil
			}
			continue
		}
		r.event(ro, corev1.EventTypeNormal, EventWavePassed, "wave %s passed", w.Name)
		st.Wave++
		next := &st.Waves[st.Wave]
		next.State = v1alpha1.WaveUpdating
		r.event(ro, corev1.EventTypeNormal, EventWaveStarted, "wave %s (%d Stack(s)) starts updating to %s", next.Name, len(next.Stacks), st.Target.Revision)
	}
}

// count refreshes the Updated figures of every wave.
func count(s *state, isDone func(string) bool) {
	st := &s.ro.Status
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

// faultsOf lists the failures of the open Stacks, and the reason of the first.
func faultsOf(s *state) (string, []string) {
	st := &s.ro.Status
	var reason string
	var faults []string
	for i := 0; i <= int(st.Wave) && i < len(st.Waves); i++ {
		w := st.Waves[i]
		for j, n := range w.Stacks {
			if i == int(st.Wave) && j >= int(w.Released) {
				break
			}
			stack, ok := s.stacks[n]
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

// halt stops the rollout where it is: later waves keep what they have.
func (r *Reconciler) halt(s *state, reason string, faults []string) {
	ro, st := s.ro, &s.ro.Status
	st.Phase = v1alpha1.RolloutHalted
	st.Waves[st.Wave].State = v1alpha1.WaveFailed
	msg := fmt.Sprintf("wave %s failed at %s: %s; later waves keep their revision. Fix it and resume (`kubectl stackwright rollout resume %s`), or abort (`kubectl stackwright rollout abort %s`: the opened waves deploy %s again)",
		st.WaveName, st.Target.Revision, strings.Join(firstN(faults, maxNamed), "; "), ro.Name, ro.Name, revisionOf(st.Stable))
	conditions.Set(ro, v1alpha1.ConditionHalted, metav1.ConditionTrue, reason, msg)
	conditions.MarkStalled(ro, reason, msg)
	r.event(ro, corev1.EventTypeWarning, EventRolloutHalted, "%s", msg)
}

// complete makes the target the stable revision (every wave has it), and starts the
// revision that arrived meanwhile, if any.
func (r *Reconciler) complete(s *state) {
	ro, st := s.ro, &s.ro.Status
	now := metav1.NewTime(s.now)
	r.event(ro, corev1.EventTypeNormal, EventRolloutSucceeded, "revision %s reached every wave (%d Stack(s)) in %s", st.Target.Revision, st.Stacks, s.now.Sub(st.StartTime.Time).Round(time.Second))
	st.Stable, st.Target = st.Target, nil
	st.Phase, st.CompletionTime = v1alpha1.RolloutIdle, &now
	// A revision that arrived meanwhile waited behind this one: it starts now.
	r.idle(s)
}

func bakeTime(ro *v1alpha1.StackRollout) time.Duration {
	if ro.Spec.BakeTime == nil {
		return 0
	}
	return ro.Spec.BakeTime.Duration
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

// notAt lists the Stacks not Ready at rev.
func notAt(stacks []pulumiv1.Stack, rev *v1alpha1.RolloutRevision) []string {
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

func names(list []string) string {
	s := strings.Join(firstN(list, maxNamed), ", ")
	if len(list) > maxNamed {
		s += fmt.Sprintf(" and %d more", len(list)-maxNamed)
	}
	return s
}

func firstN(list []string, n int) []string {
	if len(list) > n {
		return list[:n]
	}
	return list
}

func revisionOf(r *v1alpha1.RolloutRevision) string {
	if r == nil {
		return "(none)"
	}
	return r.Revision
}

func (r *Reconciler) event(ro *v1alpha1.StackRollout, typ, reason, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(ro, nil, typ, reason, eventAction, note, args...)
	}
}
