package manager_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// fleet is a test's Stacks by ring, each writing <root>/<dir>/<stack>.txt.
type fleet struct {
	ns      string
	rings   [][]string
	roots   map[string]string
	program *pulumiv1.Program
}

func (f *fleet) all() []string {
	var out []string
	for _, r := range f.rings {
		out = append(out, r...)
	}
	return out
}

// fileResources write content to dir/<stack>.txt.
func fileResources(dir, content string) map[string]pulumiv1.Resource {
	path := "${pulumi.stack}.txt"
	if dir != "" {
		path = dir + "/" + path
	}
	return map[string]pulumiv1.Resource{"f": {Type: "stackwright-testing:index:File", Properties: map[string]apiextensionsv1.JSON{
		"path": {Raw: []byte(fmt.Sprintf("%q", path))}, "content": {Raw: []byte(fmt.Sprintf("%q", content))},
	}}}
}

// setVersion makes the shared Program write content to dir/<stack>.txt.
func (f *fleet) setVersion(t *testing.T, dir, content string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(f.program), f.program); err != nil {
			return err
		}
		f.program.Program.Resources = fileResources(dir, content)
		return env.Client.Update(t.Context(), f.program)
	}).Should(Succeed())
}

// content is what the Stack's File resource wrote at dir/<stack>.txt, "" if nothing.
func (f *fleet) content(stack, dir string) string {
	b, err := os.ReadFile(filepath.Join(f.roots[stack], dir, stack+".txt"))
	if err != nil {
		return ""
	}
	return string(b)
}

// newFleet creates the Program (v1: <stack>.txt holding "v1") and one Stack per name in
// rings, labelled app=fleet and ring=<index>. The Stack named bad gets a root where the
// directory "sub" cannot be made.
func newFleet(t *testing.T, ns string, rings [][]string, bad string) *fleet {
	t.Helper()
	g := NewWithT(t)
	f := &fleet{ns: ns, rings: rings, roots: map[string]string{}}
	f.program = &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"}}
	f.program.Program.Resources = fileResources("", "v1")
	g.Expect(env.Client.Create(t.Context(), f.program)).To(Succeed())
	root := t.TempDir()
	badRoot := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(badRoot, "sub"), []byte("a file where a directory is wanted"), 0o644)).To(Succeed())
	for ring, names := range rings {
		for _, n := range names {
			f.roots[n] = root
			if n == bad {
				f.roots[n] = badRoot
			}
			st := &pulumiv1.Stack{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n, Labels: map[string]string{"app": "fleet", "ring": fmt.Sprint(ring)}},
				Spec: pulumiv1.StackSpec{
					Stack: n, ProgramRef: &pulumiv1.ProgramReference{Name: "shared"},
					EnvRefs: map[string]pulumiv1.ResourceRef{"STACKWRIGHT_TESTING_ROOT": literalRef(f.roots[n])},
				},
			}
			g.Expect(env.Client.Create(t.Context(), st)).To(Succeed())
		}
	}
	return f
}

// waitAt waits until each named Stack is Ready with revision deployed.
func waitAt(t *testing.T, ns, revision string, names ...string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		for _, n := range names {
			st := &pulumiv1.Stack{}
			g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: n}, st)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "Stack %s: %v", n, st.Status.Conditions)
			g.Expect(st.Status.LastUpdate).NotTo(BeNil())
			g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal(revision), "Stack %s", n)
		}
	}).WithTimeout(4*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "%v at %s", names, revision)
}

// getRollout reads the rollout.
func getRollout(g Gomega, ro *v1alpha1.StackRollout) *v1alpha1.StackRollout {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
	return ro
}

// annotateRollout sets a request annotation to a new value.
func annotateRollout(t *testing.T, ro *v1alpha1.StackRollout, key string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := &v1alpha1.StackRollout{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ro), cur); err != nil {
			return err
		}
		p := client.MergeFrom(cur.DeepCopy())
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[key] = time.Now().UTC().Format(time.RFC3339Nano)
		return env.Client.Patch(t.Context(), cur, p)
	}).Should(Succeed())
}

// runnerSampler counts, every 50ms, the unfinished ups of the namespace's Stacks to one
// of the revisions rolled out (a runner is running or about to), and remembers the most
// seen at once. Resyncs and an abort's return to the stable revision are not the
// rollout's runners.
type runnerSampler struct {
	max  atomic.Int32
	stop chan struct{}
	wg   sync.WaitGroup
}

func sampleRunners(ctx context.Context, ns string, revisions ...string) *runnerSampler {
	s := &runnerSampler{stop: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			var list v1alpha1.UpdateList
			if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
				continue
			}
			n := int32(0)
			for _, u := range list.Items {
				if !u.Status.Finished() && u.Spec.Type == v1alpha1.UpdateTypeUp && slices.Contains(revisions, u.Spec.Revision) {
					n++
				}
			}
			if n > s.max.Load() {
				s.max.Store(n)
			}
		}
	}()
	return s
}

func (s *runnerSampler) done() int32 {
	close(s.stop)
	s.wg.Wait()
	return s.max.Load()
}

// completeJob does what the Job controller (absent from envtest) does when a gate Job's
// Pod exits: it records the Job's success or failure.
func completeJob(t *testing.T, ns, name string, ok bool) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		j := &batchv1.Job{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
			return err
		}
		now := metav1.Now()
		j.Status.StartTime = &now
		if ok {
			j.Status.Succeeded = 1
			j.Status.CompletionTime = &now
			j.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			}
		} else {
			j.Status.Failed = 1
			j.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
				{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "smoke test exited 1", LastTransitionTime: now, LastProbeTime: now},
			}
		}
		return env.Client.Status().Update(t.Context(), j)
	}).Should(Succeed(), "gate Job %s completes", name)
}

// firstUpStart is when the first up of the Stacks at revision was created.
func firstUpStart(g Gomega, ns, revision string, names ...string) time.Time {
	var list v1alpha1.UpdateList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var first time.Time
	in := map[string]bool{}
	for _, n := range names {
		in[n] = true
	}
	for _, u := range list.Items {
		if in[u.Spec.StackName] && u.Spec.Revision == revision && u.Spec.Type == v1alpha1.UpdateTypeUp &&
			(first.IsZero() || u.CreationTimestamp.Time.Before(first)) {
			first = u.CreationTimestamp.Time
		}
	}
	return first
}

// ups counts the ups of the Stack at revision.
func ups(g Gomega, ns, stack, revision string) int {
	var list v1alpha1.UpdateList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.StackLabel: stack})).To(Succeed())
	n := 0
	for _, u := range list.Items {
		if u.Spec.Revision == revision && u.Spec.Type == v1alpha1.UpdateTypeUp {
			n++
		}
	}
	return n
}

// Ten Stacks on one Program in rings 0/1/2 of sizes 1/3/6. A new revision reaches ring 0
// alone; ring 1 starts only after ring 0 is Ready, baked and its gate Job succeeded; never
// more than maxParallel runners at once. The new revision fails on one ring-1 Stack: the
// rollout halts naming it, ring 2 keeps the old revision (its files say so) even through a
// forced resync; abort brings rings 0 and 1 back; a fixed revision then reaches every ring.
func TestManager_StackRollout_WavesGatesHaltAbortAndFix(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	startManager(t, env.Config, testOptions(t))
	ns := env.Namespace(t)
	f := newFleet(t, ns, [][]string{{"r0-a"}, {"r1-a", "r1-b", "r1-c"}, {"r2-a", "r2-b", "r2-c", "r2-d", "r2-e", "r2-f"}}, "r1-b")
	waitAt(t, ns, "generation/1", f.all()...)

	cron := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "smoke", Labels: map[string]string{v1alpha1.RolloutGateLabel: "true"}},
		Spec: batchv1.CronJobSpec{Schedule: "@yearly", Suspend: ptrTo(true), JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "smoke", Image: "example.invalid/smoke:1"}}}},
		}}},
	}
	g.Expect(env.Client.Create(ctx, cron)).To(Succeed())
	const bake = 3 * time.Second
	ro := &v1alpha1.StackRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: v1alpha1.StackRolloutSpec{
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"app": "fleet"}},
			Waves:       v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1", "2"}}},
			MaxParallel: 2,
			BakeTime:    &metav1.Duration{Duration: bake},
			Gates:       v1alpha1.RolloutGates{JobFrom: &corev1.LocalObjectReference{Name: "smoke"}},
		},
	}
	g.Expect(env.Client.Create(ctx, ro)).To(Succeed())
	g.Eventually(func(g Gomega) {
		getRollout(g, ro)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutIdle))
		g.Expect(ro.Status.Stable).NotTo(BeNil())
		g.Expect(ro.Status.Stable.Revision).To(Equal("generation/1"))
		g.Expect(apimeta.IsStatusConditionTrue(ro.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "%v", ro.Status.Conditions)
	}).WithTimeout(time.Minute).Should(Succeed(), "a new rollout takes the deployed revision as stable")

	sampler := sampleRunners(ctx, ns, "generation/2", "generation/3")
	f.setVersion(t, "sub", "v2")
	waitAt(t, ns, "generation/2", "r0-a")
	g.Expect(f.content("r0-a", "sub")).To(Equal("v2"))

	// Ring 0 is Ready: after the bake, the gate Job runs; ring 1 waits for it.
	var gate string
	g.Eventually(func(g Gomega) {
		getRollout(g, ro)
		g.Expect(ro.Status.Waves).To(HaveLen(3))
		gate = ro.Status.Waves[0].GateJob
		g.Expect(gate).NotTo(BeEmpty())
		g.Expect(ro.Status.Waves[0].State).To(Equal(v1alpha1.WaveGating))
	}).WithTimeout(time.Minute).Should(Succeed(), "wave 0's gate Job starts")
	ring0Ready := ro.Status.Waves[0].ReadyTime.Time
	job := &batchv1.Job{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: gate}, job)).To(Succeed())
	envOf := map[string]string{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		envOf[e.Name] = e.Value
	}
	g.Expect(envOf).To(HaveKeyWithValue("STACKWRIGHT_REVISION", "generation/2"))
	g.Expect(envOf).To(HaveKeyWithValue("STACKWRIGHT_STACKS", "r0-a"))
	g.Expect(envOf).To(HaveKey("STACKWRIGHT_OUTPUTS"))
	g.Expect(metav1.IsControlledBy(job, ro)).To(BeTrue())
	g.Consistently(func(g Gomega) {
		g.Expect(firstUpStart(g, ns, "generation/2", f.rings[1]...)).To(BeZero(), "no ring-1 Stack starts before the gate passes")
	}).WithTimeout(2 * time.Second).Should(Succeed())
	gatePassed := time.Now()
	completeJob(t, ns, gate, true)

	// Ring 1: r1-b fails; the rollout halts naming it.
	g.Eventually(func(g Gomega) {
		getRollout(g, ro)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutHalted), "conditions: %v", ro.Status.Conditions)
		c := apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonStackUpdateFailed))
		g.Expect(c.Message).To(ContainSubstring("r1-b"))
		g.Expect(ro.Status.FailedStacks).To(Equal([]string{"r1-b"}))
	}).WithTimeout(4*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "the rollout halts on r1-b")
	ring1Start := firstUpStart(g, ns, "generation/2", f.rings[1]...)
	g.Expect(ring1Start).To(BeTemporally(">=", ring0Ready.Add(bake).Truncate(time.Second)), "ring 1 starts after ring 0 baked")
	g.Expect(ring1Start).To(BeTemporally(">=", gatePassed.Truncate(time.Second)), "ring 1 starts after the gate passed")

	// Ring 2 keeps v1, also through a forced resync.
	for _, n := range f.rings[2] {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, st)).To(Succeed())
		p := client.MergeFrom(st.DeepCopy())
		st.Annotations = map[string]string{pulumiv1.ReconcileRequestAnnotation: "resync-1"}
		g.Expect(env.Client.Patch(ctx, st, p)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, n := range f.rings[2] {
			st := &pulumiv1.Stack{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, st)).To(Succeed())
			g.Expect(st.Status.LastUpdate.ReconcileRequest).To(Equal("resync-1"), "Stack %s ran its resync", n)
			g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal("generation/1"))
			held := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionHeldBack)
			g.Expect(held).NotTo(BeNil())
			g.Expect(held.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(held.Reason).To(Equal(pulumiv1.ReasonWaveClosed))
			g.Expect(st.Status.Stackwright.Rollout.HeldAt).To(Equal("generation/1"))
		}
	}).WithTimeout(3*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "ring 2 resyncs at v1")
	for _, n := range f.rings[2] {
		g.Expect(f.content(n, "")).To(Equal("v1"), "Stack %s keeps v1's file", n)
		g.Expect(f.content(n, "sub")).To(BeEmpty(), "Stack %s never wrote v2's file", n)
		g.Expect(ups(g, ns, n, "generation/2")).To(BeZero(), "Stack %s never ran v2", n)
	}

	// Abort: rings 0 and 1 deploy v1 again.
	annotateRollout(t, ro, v1alpha1.RolloutAbortAnnotation)
	waitAt(t, ns, "generation/1", append(append([]string{}, f.rings[0]...), f.rings[1]...)...)
	g.Eventually(func(g Gomega) {
		getRollout(g, ro)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutAborted))
		g.Expect(ro.Status.Aborted.Revision).To(Equal("generation/2"))
		c := apimeta.FindStatusCondition(ro.Status.Conditions, pulumiv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%v", ro.Status.Conditions)
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonRolloutAborted))
	}).WithTimeout(time.Minute).Should(Succeed(), "the abort is rolled back")
	for _, n := range append(append([]string{}, f.rings[0]...), f.rings[1]...) {
		g.Expect(f.content(n, "")).To(Equal("v1"), "Stack %s has v1's file again", n)
		g.Expect(f.content(n, "sub")).To(BeEmpty(), "Stack %s no longer has v2's file", n)
	}

	// A fixed revision reaches every ring, each after the previous one's gate.
	stopGates := autoPassGates(t, ns)
	f.setVersion(t, "ok", "v3")
	waitAt(t, ns, "generation/3", f.all()...)
	stopGates()
	g.Eventually(func(g Gomega) {
		getRollout(g, ro)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutIdle))
		g.Expect(ro.Status.Stable.Revision).To(Equal("generation/3"))
		g.Expect(ro.Status.Target).To(BeNil())
	}).WithTimeout(time.Minute).Should(Succeed(), "the rollout completes")
	for _, n := range f.all() {
		g.Expect(f.content(n, "ok")).To(Equal("v3"), "Stack %s", n)
		g.Expect(ups(g, ns, n, "generation/3")).To(Equal(1), "Stack %s ran v3 once", n)
	}
	ring1Start = firstUpStart(g, ns, "generation/3", f.rings[1]...)
	ring2Start := firstUpStart(g, ns, "generation/3", f.rings[2]...)
	g.Expect(ring1Start).To(BeTemporally(">", firstUpStart(g, ns, "generation/3", f.rings[0]...)))
	g.Expect(ring2Start).To(BeTemporally(">", ring1Start))
	most := sampler.done()
	t.Logf("most runners of the rollout at once: %d", most)
	g.Expect(most).To(BeNumerically("<=", 2), "never more than maxParallel runners at once")
}

// autoPassGates completes every gate Job of the namespace as soon as it appears, until
// the returned function is called.
func autoPassGates(t *testing.T, ns string) func() {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var jobs batchv1.JobList
			if err := env.Client.List(ctx, &jobs, client.InNamespace(ns), client.HasLabels{v1alpha1.RolloutLabel}); err == nil {
				for _, j := range jobs.Items {
					if len(j.Status.Conditions) == 0 {
						completeJob(t, ns, j.Name, true)
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

func ptrTo[T any](v T) *T { return &v }

// Admission refuses waves that cannot be planned, and says why.
func TestStackRollout_Admission_Waves(t *testing.T) {
	ns := env.Namespace(t)
	step := func(v intstr.IntOrString) v1alpha1.RolloutStep { return v1alpha1.RolloutStep{Stacks: v} }
	byLabel := &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0"}}
	tests := []struct {
		name  string
		waves v1alpha1.RolloutWaves
		want  string
	}{
		{name: "CountsAndPercentages", waves: v1alpha1.RolloutWaves{Steps: []v1alpha1.RolloutStep{step(intstr.FromInt32(1)), step(intstr.FromString("25%")), step(intstr.FromString("100%"))}}},
		{name: "ByLabel", waves: v1alpha1.RolloutWaves{ByLabel: byLabel}},
		{name: "NotAPercentage", waves: v1alpha1.RolloutWaves{Steps: []v1alpha1.RolloutStep{step(intstr.FromString("half"))}}, want: "a count (0 or more) or a percentage"},
		{name: "AboveAHundredPercent", waves: v1alpha1.RolloutWaves{Steps: []v1alpha1.RolloutStep{step(intstr.FromString("150%"))}}, want: "a count (0 or more) or a percentage"},
		{name: "NegativeCount", waves: v1alpha1.RolloutWaves{Steps: []v1alpha1.RolloutStep{step(intstr.FromInt32(-1))}}, want: "a count (0 or more) or a percentage"},
		{name: "BothKinds", waves: v1alpha1.RolloutWaves{ByLabel: byLabel, Steps: []v1alpha1.RolloutStep{step(intstr.FromInt32(1))}}, want: "set exactly one of byLabel and steps"},
		{name: "Neither", waves: v1alpha1.RolloutWaves{}, want: "set exactly one of byLabel and steps"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro := &v1alpha1.StackRollout{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("r%d", i)},
				Spec:       v1alpha1.StackRolloutSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, Waves: tt.waves},
			}
			err := env.Client.Create(t.Context(), ro)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error saying %q", err, tt.want)
			}
		})
	}
}
