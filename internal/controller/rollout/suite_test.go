package rollout_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/rollout"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/urlallow"
)

// One real manager running the StackRollout controller alone serves every test of the
// package; each test works in its own namespace. No Stack controller runs: the tests write
// the Stacks' status as it would (what their source offers, what they deployed, how they
// failed) and read the rollout's status to learn which Stacks it lets deploy.
var (
	env *kubetest.Env
	// recorder receives every event the package's controller emits.
	recorder *kubetest.Recorder[*v1alpha1.StackRollout]
	// prom serves the Prometheus servers of the tests, each under a path of its own
	// (servePrometheus): the manager's allow-list (--metric-gate-urls) is this server's
	// /allowed, so a test's server under /denied is one it may not query.
	prom    *httptest.Server
	promMux = http.NewServeMux()
)

func TestMain(m *testing.M) { kubetest.Main(m, &env, kubetest.Manager(setupManager)) }

func setupManager(ctx context.Context, e *kubetest.Env, _ string) (ctrl.Manager, error) {
	// The manager's cache sees only the Jobs Stackwright labels as its own (as
	// internal/manager configures it): a gate Job the rollout could not find there would be
	// created again and again.
	mgr, err := e.NewManager(ctrl.Options{Cache: kubetest.ManagerCache()})
	if err != nil {
		return nil, err
	}
	recorder = kubetest.NewRecorder(e.Client, announced)
	prom = httptest.NewServer(promMux)
	go func() {
		<-ctx.Done()
		prom.Close()
	}()
	allowed, err := urlallow.Parse([]string{prom.URL + "/allowed"})
	if err != nil {
		return nil, err
	}
	r := &rollout.Reconciler{Client: mgr.GetClient(), Recorder: recorder, MetricGateURLs: allowed}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
		return nil, fmt.Errorf("failed to set up StackRollout controller: %w", err)
	}
	return mgr, nil
}

// servePrometheus serves h as the test's Prometheus and returns its URL: under /allowed,
// which the manager may query, or under /denied, which it may not.
func servePrometheus(t *testing.T, allowed bool, h http.Handler) string {
	t.Helper()
	dir := "/denied/"
	if allowed {
		dir = "/allowed/"
	}
	path := dir + strings.NewReplacer("/", "-", "#", "-").Replace(t.Name())
	promMux.Handle(path+"/", http.StripPrefix(path, h))
	return prom.URL + path
}

// The facts each event announces, read from its message.
var (
	startedRe   = regexp.MustCompile(`^rolling out (\S+) \(from `)
	waveStartRe = regexp.MustCompile(`^wave (\S+) \(\d+ Stack\(s\)\) starts updating to (\S+)$`)
	waveReadyRe = regexp.MustCompile(`^wave (\S+): all \d+ Stack\(s\) Ready at (\S+)$`)
	gateRe      = regexp.MustCompile(`^gate Job (\S+) started for wave (\S+) `)
	passedRe    = regexp.MustCompile(`^wave (\S+) passed$`)
	awaitRe     = regexp.MustCompile(`^wave (\S+) passed its gates and awaits promotion`)
	promotedRe  = regexp.MustCompile(`^wave (\S+) promoted \(\S+=(\S+)\)$`)
	abortedRe   = regexp.MustCompile(`^revision (\S+) aborted at wave `)
	succeededRe = regexp.MustCompile(`^revision (\S+) reached every wave `)
	previewedRe = regexp.MustCompile(`^wave (\S+): the previews of `)
	supersedeRe = regexp.MustCompile(`^revision \S+ superseded by (\S+) at wave `)
	ignoredRe   = regexp.MustCompile(`^(abort|resume|promote|pause) "([^"]+)" ignored`)
)

// announced says what e announces that the stored status of ro does not show, nil when it
// shows all of it. A rollout's target can complete in the reconcile that announces its
// waves, so a fact about the target also holds once that target is the stable revision.
// (A wave's name is taken to be the target's.)
func announced(e kubetest.Event, _, ro *v1alpha1.StackRollout) error {
	st := &ro.Status
	match := func(re *regexp.Regexp) []string {
		if m := re.FindStringSubmatch(e.Message); m != nil {
			return m
		}
		return []string{"", "?", "?"}
	}
	isTarget := func(rev string) bool { return st.Target != nil && st.Target.Revision == rev }
	isStable := func(rev string) bool { return st.Stable != nil && st.Stable.Revision == rev }
	wave := func(name string) v1alpha1.RolloutWaveStatus {
		for _, w := range st.Waves {
			if w.Name == name {
				return w
			}
		}
		return v1alpha1.RolloutWaveStatus{}
	}
	var ok bool
	switch e.Reason {
	case rollout.EventRolloutStarted:
		rev := match(startedRe)[1]
		ok = st.StartTime != nil && (isTarget(rev) || isStable(rev))
	case rollout.EventWaveStarted:
		m := match(waveStartRe)
		ok = isStable(m[2]) || (isTarget(m[2]) && wave(m[1]).State != v1alpha1.WavePending && wave(m[1]).State != "")
	case rollout.EventWaveReady:
		m := match(waveReadyRe)
		ok = isStable(m[2]) || (isTarget(m[2]) && wave(m[1]).ReadyTime != nil)
	case rollout.EventGateStarted:
		m := match(gateRe)
		ok = wave(m[2]).GateJob == m[1]
	case rollout.EventWavePassed:
		ok = wave(match(passedRe)[1]).State == v1alpha1.WaveDone
	case rollout.EventAwaitPromotion:
		s := wave(match(awaitRe)[1]).State
		ok = s == v1alpha1.WaveAwaitingPromotion || s == v1alpha1.WaveDone
	case rollout.EventPromoted:
		m := match(promotedRe)
		ok = st.HandledPromote == m[2] && wave(m[1]).State == v1alpha1.WaveDone
	case rollout.EventRolloutHalted:
		c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionHalted)
		ok = st.Phase == v1alpha1.RolloutHalted && c != nil && c.Status == metav1.ConditionTrue && c.Message == e.Message
	case rollout.EventRolloutResumed:
		ok = st.ResumeTime != nil && st.HandledResume == ro.Annotations[v1alpha1.RolloutResumeAnnotation]
	case rollout.EventRolloutAborted:
		ok = st.Aborted != nil && st.Aborted.Revision == match(abortedRe)[1] &&
			(st.HandledAbort == ro.Annotations[v1alpha1.RolloutAbortAnnotation] || st.PacedAbort)
	case rollout.EventRolloutSucceeded:
		// A revision queued behind it starts in the same reconcile, and clears the
		// completion time.
		ok = isStable(match(succeededRe)[1]) && (st.CompletionTime != nil || st.Target != nil)
	case rollout.EventWavePreviewed:
		s := wave(match(previewedRe)[1]).State
		ok = s != v1alpha1.WavePreviewing && s != v1alpha1.WavePending
	case rollout.EventSuperseded:
		rev := match(supersedeRe)[1]
		ok = isTarget(rev) || isStable(rev)
	case rollout.EventRolloutPaused:
		ok = apimeta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionPaused)
	case rollout.EventRolloutUnpaused:
		ok = !apimeta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionPaused)
	case rollout.EventMetricGateURLNotAllowed:
		c := apimeta.FindStatusCondition(st.Conditions, pulumiv1.ConditionStalled)
		ok = c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonMetricGateURLNotAllowed && c.Message == e.Message
	case rollout.EventRequestIgnored:
		m := match(ignoredRe)
		handled := map[string]string{"abort": st.HandledAbort, "resume": st.HandledResume, "promote": st.HandledPromote, "pause": st.HandledPause}
		ok = handled[m[1]] == m[2]
	default:
		return errors.New("a reason this test does not know: say what its status shows")
	}
	if !ok {
		return fmt.Errorf("%q emitted before its status was written (phase %s, wave %s)", e.Message, st.Phase, st.WaveName)
	}
	return nil
}

// fleet is one test's Stacks, by ring, and its rollout. It plays the Stack controller:
// the Stacks' status says what it would.
type fleet struct {
	*kubetest.Scenario
	t     *testing.T
	g     Gomega
	rings [][]string
	ro    *v1alpha1.StackRollout
}

// newFleet creates one Stack per name in rings, labelled app=fleet and ring=<index>, on one
// Program, each Ready at generation/1, and the rollout named fleet of spec (selecting
// app=fleet unless spec selects otherwise).
func newFleet(t *testing.T, rings [][]string, spec v1alpha1.StackRolloutSpec) *fleet {
	t.Helper()
	f := newStacks(t, rings)
	if spec.Selector.MatchLabels == nil && spec.Selector.MatchExpressions == nil {
		spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "fleet"}}
	}
	f.createRollout(spec)
	return f
}

// newStacks creates the Stacks of newFleet, without a rollout.
func newStacks(t *testing.T, rings [][]string) *fleet {
	t.Helper()
	f := &fleet{Scenario: env.Scenario(t), t: t, g: NewWithT(t), rings: rings}
	recorder.CheckOnCleanup(t, f.Namespace)
	for ring, names := range rings {
		for _, n := range names {
			f.Create(&pulumiv1.Stack{
				ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"app": "fleet", "ring": fmt.Sprint(ring)}},
				Spec:       pulumiv1.StackSpec{Stack: n, ProgramRef: &pulumiv1.ProgramReference{Name: "shared"}},
			})
		}
	}
	f.deploy("generation/1", f.all()...)
	return f
}

// createRollout creates the rollout named fleet.
func (f *fleet) createRollout(spec v1alpha1.StackRolloutSpec) {
	f.t.Helper()
	f.ro = &v1alpha1.StackRollout{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}, Spec: spec}
	f.Create(f.ro)
}

func (f *fleet) all() []string {
	var out []string
	for _, r := range f.rings {
		out = append(out, r...)
	}
	return out
}

// digest is the artifact digest of revision.
func digest(revision string) string {
	sum := sha256.Sum256([]byte(revision))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// setStatus applies mutate to each named Stack's status, as the Stack controller writes it.
func (f *fleet) setStatus(mutate func(st *pulumiv1.Stack), names ...string) {
	f.t.Helper()
	for _, n := range names {
		f.g.Eventually(func() error { return patchStatus(f.t.Context(), f.Namespace, n, mutate) }).Should(Succeed(), "status of Stack %s", n)
	}
}

// patchStatus applies mutate to the Stack's status, unless it changed meanwhile.
func patchStatus(ctx context.Context, ns, name string, mutate func(st *pulumiv1.Stack)) error {
	st := &pulumiv1.Stack{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, st); err != nil {
		return err
	}
	base := st.DeepCopy()
	if st.Status.Stackwright == nil {
		st.Status.Stackwright = &pulumiv1.StackwrightStatus{}
	}
	mutate(st)
	return env.Client.Status().Patch(ctx, st, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

func setCondition(st *pulumiv1.Stack, typ string, status metav1.ConditionStatus, reason string) {
	apimeta.SetStatusCondition(&st.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason, ObservedGeneration: st.Generation})
}

// deployed says that the Stack deployed revision and is Ready.
func deployed(revision string) func(st *pulumiv1.Stack) {
	return func(st *pulumiv1.Stack) {
		now := metav1.Now()
		st.Status.LastUpdate = &pulumiv1.StackUpdateState{
			Name: st.Name + "-up", Type: string(v1alpha1.UpdateTypeUp), State: pulumiv1.UpdateStateSucceeded,
			LastAttemptedCommit: revision, LastSuccessfulCommit: revision, LastResyncTime: &now,
		}
		st.Status.Stackwright.LastArtifact = &pulumiv1.ArtifactRef{Revision: revision, Digest: digest(revision)}
		st.Status.Stackwright.LastFailureReason = ""
		setCondition(st, pulumiv1.ConditionReady, metav1.ConditionTrue, pulumiv1.ReasonProcessingCompleted)
		apimeta.RemoveStatusCondition(&st.Status.Conditions, pulumiv1.ConditionStalled)
	}
}

// deploy records that the named Stacks deployed revision and are Ready.
func (f *fleet) deploy(revision string, names ...string) {
	f.t.Helper()
	f.setStatus(deployed(revision), names...)
}

// fail records that the Stack's update to revision failed for good.
func (f *fleet) fail(revision, name string) {
	f.t.Helper()
	f.setStatus(func(st *pulumiv1.Stack) {
		now := metav1.Now()
		last := ""
		if st.Status.LastUpdate != nil {
			last = st.Status.LastUpdate.LastSuccessfulCommit
		}
		st.Status.LastUpdate = &pulumiv1.StackUpdateState{
			Name: st.Name + "-up", Type: string(v1alpha1.UpdateTypeUp), State: pulumiv1.UpdateStateFailed,
			LastAttemptedCommit: revision, LastSuccessfulCommit: last, LastResyncTime: &now,
			Message: "failed to create directory sub: not a directory",
		}
		st.Status.Stackwright.LastFailureReason = v1alpha1.ReasonPermanentFailure
		setCondition(st, pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyInProgress)
	}, name)
}

// offer records that the named Stacks' source offers revision (the Stack controller
// reports it once a rollout selects the Stack); no names means every Stack.
func (f *fleet) offer(revision string, names ...string) {
	f.t.Helper()
	if len(names) == 0 {
		names = f.all()
	}
	f.setStatus(func(st *pulumiv1.Stack) {
		st.Status.Stackwright.Rollout = &pulumiv1.StackRolloutState{Name: f.ro.Name, Available: &pulumiv1.ArtifactRef{Revision: revision, Digest: digest(revision)}}
	}, names...)
}

// rollout reads the rollout.
func (f *fleet) rollout(g Gomega) *v1alpha1.StackRollout {
	ro := &v1alpha1.StackRollout{ObjectMeta: metav1.ObjectMeta{Name: f.ro.Name}}
	g.Expect(f.Get(ro)).To(Succeed())
	return ro
}

// opened lists the named Stacks the rollout lets deploy its target.
func opened(ro *v1alpha1.StackRollout, names ...string) []string {
	var out []string
	for _, n := range names {
		if ro.Opens(n) {
			out = append(out, n)
		}
	}
	return out
}

// annotate sets a request annotation of the rollout to a new value, and returns it.
func (f *fleet) annotate(key string) string {
	f.t.Helper()
	v := time.Now().UTC().Format(time.RFC3339Nano)
	f.g.Eventually(func() error {
		cur := &v1alpha1.StackRollout{ObjectMeta: metav1.ObjectMeta{Name: f.ro.Name}}
		if err := f.Get(cur); err != nil {
			return err
		}
		p := client.MergeFrom(cur.DeepCopy())
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[key] = v
		return env.Client.Patch(f.t.Context(), cur, p)
	}).Should(Succeed())
	return v
}

// setPaused sets the rollout's spec.paused, as a GitOps tool applying it would.
func (f *fleet) setPaused(paused bool) {
	f.t.Helper()
	ro := f.rollout(f.g)
	f.Patch(ro, func() { ro.Spec.Paused = paused })
}

// waitCondition waits until the rollout's condition typ is status with reason, and returns
// the rollout as then read.
func (f *fleet) waitCondition(typ string, status metav1.ConditionStatus, reason string) *v1alpha1.StackRollout {
	f.t.Helper()
	ro := &v1alpha1.StackRollout{ObjectMeta: metav1.ObjectMeta{Name: f.ro.Name}}
	f.WaitCondition(ro, typ, status, reason)
	return ro
}

// gateCronJob creates the CronJob a rollout's gate is made from, labelled (or not) as
// its author's consent.
func (f *fleet) gateCronJob(name string, consent bool) {
	f.t.Helper()
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Spec: batchv1.CronJobSpec{Schedule: "@yearly", Suspend: ptrTo(true), JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "smoke", Image: "example.invalid/smoke:1"}}}},
		}}},
	}
	if consent {
		cj.Labels[v1alpha1.RolloutGateLabel] = "true"
	}
	f.Create(cj)
}

// completeJob does what the Job controller (absent from envtest) does when a gate Job's
// Pod exits: it records the Job's success or failure.
func (f *fleet) completeJob(name string, ok bool) {
	f.t.Helper()
	f.g.Eventually(func() error {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := f.Get(j); err != nil {
			return err
		}
		completeJobStatus(j, ok)
		return env.Client.Status().Update(f.t.Context(), j)
	}).Should(Succeed(), "gate Job %s completes", name)
}

func completeJobStatus(j *batchv1.Job, ok bool) {
	now := metav1.Now()
	j.Status.StartTime = &now
	if ok {
		j.Status.Succeeded = 1
		j.Status.CompletionTime = &now
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		}
		return
	}
	j.Status.Failed = 1
	j.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "smoke test exited 1", LastTransitionTime: now, LastProbeTime: now},
	}
}

// jobDone reports whether the gate Job finished, and whether it passed.
func jobDone(j *batchv1.Job) (done, passed bool) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, true
		case batchv1.JobFailed:
			return true, false
		}
	}
	return false, false
}

// autoPassGates completes every gate Job of the namespace as soon as it appears, until the
// returned function is called.
func (f *fleet) autoPassGates() (stop func()) {
	ctx, cancel := context.WithCancel(f.t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var jobs batchv1.JobList
			if err := env.Client.List(ctx, &jobs, client.InNamespace(f.Namespace), client.HasLabels{v1alpha1.RolloutLabel}); err == nil {
				for i := range jobs.Items {
					if j := &jobs.Items[i]; len(j.Status.Conditions) == 0 {
						completeJobStatus(j, true)
						_ = env.Client.Status().Update(ctx, j) // the next round retries
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

// stackController deploys revision on each Stack soon after the rollout opens it, as the
// Stack controller would, until the returned function is called; that function reports the
// most Stacks seen opened and not yet deployed at once, in all and per wave, and any Stack
// opened before the previous wave's gate Job had passed.
func (f *fleet) stackController(revision string) (stop func() (mostUnfinished int, early []string, mostOfWave map[string]int)) {
	ctx, cancel := context.WithCancel(f.t.Context())
	var most int
	var early []string
	mostOfWave := map[string]int{}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		done := map[string]bool{}
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			ro := &v1alpha1.StackRollout{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.ro.Name}, ro); err != nil || ro.Status.Target == nil || ro.Status.Target.Revision != revision {
				continue
			}
			var open []string
			for i, w := range ro.Status.Waves {
				inWave := 0
				for _, n := range opened(ro, w.Stacks...) {
					if done[n] {
						continue
					}
					inWave++
					mostOfWave[w.Name] = max(mostOfWave[w.Name], inWave)
					open = append(open, n)
					if i > 0 && !gatePassed(ctx, f.Namespace, ro.Status.Waves[i-1].GateJob) && !slices.Contains(early, n) {
						early = append(early, n)
					}
				}
			}
			most = max(most, len(open))
			// One Stack per round, so that a wave's Stacks are seen unfinished together.
			if len(open) > 0 && patchStatus(ctx, f.Namespace, open[0], deployed(revision)) == nil {
				done[open[0]] = true
			}
		}
	}()
	return func() (int, []string, map[string]int) { cancel(); <-stopped; return most, early, mostOfWave }
}

func gatePassed(ctx context.Context, ns, job string) bool {
	j := &batchv1.Job{}
	if job == "" || env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job}, j) != nil {
		return false
	}
	_, passed := jobDone(j)
	return passed
}

func ptrTo[T any](v T) *T { return &v }

// jsonValue is v as a JSON value.
func jsonValue(v string) apiextensionsv1.JSON {
	return apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", v))}
}
