package kubectlplugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/kubectlplugin"
)

const targetSHA = "0123456789abcdef0123456789abcdef01234567"

// newRolloutFixture is a namespace with StackRollouts in known states, and a clock at
// which the waves became Ready minutes ago:
//   - web: Progressing, its wave "1" (of three) awaiting promotion;
//   - updating: Progressing, its wave ring-1 updating;
//   - halted: Halted, its first wave failed;
//   - idle: Idle, never rolled anything out;
//   - paused: as updating, paused by a request;
//   - gitops: as updating, paused by spec.paused;
//   - previewing: Progressing, its only wave previewing for the preview gate;
//   - sampling: Progressing, its only wave baking with a metric gate sampled;
//   - refused: Idle, stalled by a metric gate the manager may not query.
func newRolloutFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{ns: env.Namespace(t), now: time.Now().Truncate(time.Second)}
	ago := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: f.now.Add(-d)} }
	condition := func(typ, reason, message string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: *ago(time.Minute)}
	}
	target := &v1alpha1.RolloutRevision{Revision: targetSHA, Digest: "sha256:aa"}
	stable := &v1alpha1.RolloutRevision{Revision: "v1", Digest: "sha256:bb"}
	f.rollout(t, "web", v1alpha1.StackRolloutStatus{
		Phase: v1alpha1.RolloutProgressing, Target: target, Stable: stable, Wave: 1, WaveName: "1", Stacks: 5, Updated: 3,
		Conditions: []metav1.Condition{condition(v1alpha1.ConditionReconciling, v1alpha1.ReasonAwaitingPromotion, "wave 1 passed its gates and awaits promotion")},
		Waves: []v1alpha1.RolloutWaveStatus{
			{Name: "0", Stacks: []string{"web-a"}, Released: 1, Updated: 1, State: v1alpha1.WaveDone, ReadyTime: ago(20 * time.Minute), GateJob: "web-0-gate"},
			{Name: "1", Stacks: []string{"web-b", "web-c"}, Released: 2, Updated: 2, State: v1alpha1.WaveAwaitingPromotion, ReadyTime: ago(5 * time.Minute), GateJob: "web-1-gate"},
			{Name: "2", Stacks: []string{"web-d", "web-e"}, State: v1alpha1.WavePending},
		},
	}, func(spec *v1alpha1.StackRolloutSpec) {
		spec.MaxParallel, spec.BakeTime = new(intstr.FromInt32(1)), &metav1.Duration{Duration: 10 * time.Minute}
		spec.Waves.Pace = []v1alpha1.RolloutWavePace{{Wave: "1", MaxParallel: new(intstr.FromString("50%")), BakeTime: &metav1.Duration{Duration: time.Hour}}}
	})
	f.rollout(t, "updating", v1alpha1.StackRolloutStatus{
		Phase: v1alpha1.RolloutProgressing, Target: target, Stable: stable, Wave: 1, WaveName: "ring-1", Stacks: 2, Updated: 1,
		Conditions: []metav1.Condition{condition(v1alpha1.ConditionReconciling, v1alpha1.ReasonWaveUpdating, "wave ring-1: 0 of 1 Stacks updated")},
		Waves: []v1alpha1.RolloutWaveStatus{
			{Name: "ring-0", Stacks: []string{"a"}, Released: 1, Updated: 1, State: v1alpha1.WaveDone, ReadyTime: ago(10 * time.Minute)},
			{Name: "ring-1", Stacks: []string{"b"}, Released: 1, State: v1alpha1.WaveUpdating},
		},
	})
	f.rollout(t, "halted", v1alpha1.StackRolloutStatus{
		Phase: v1alpha1.RolloutHalted, Target: target, Stable: stable, WaveName: "step-1", Stacks: 3, FailedStacks: []string{"db-a", "db-b"},
		Conditions: []metav1.Condition{
			condition(v1alpha1.ConditionHalted, v1alpha1.ReasonStackUpdateFailed, "updates of Stacks db-a, db-b failed"),
			condition(v1alpha1.ConditionStalled, v1alpha1.ReasonStackUpdateFailed, "updates of Stacks db-a, db-b failed"),
		},
		Waves: []v1alpha1.RolloutWaveStatus{
			{Name: "step-1", Stacks: []string{"db-a", "db-b"}, Released: 2, State: v1alpha1.WaveFailed},
			{Name: "step-2", Stacks: []string{"db-c"}, State: v1alpha1.WavePending},
		},
	}, func(spec *v1alpha1.StackRolloutSpec) { spec.AutoAbort = &v1alpha1.RolloutAutoAbort{Limit: 2} })
	f.rollout(t, "idle", v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutIdle})
	paused := f.getRollout(t, "updating").Status
	paused.PauseTime = ago(time.Minute)
	f.rollout(t, "paused", paused)
	f.rollout(t, "gitops", f.getRollout(t, "updating").Status, func(spec *v1alpha1.StackRolloutSpec) { spec.Paused = true })
	f.rollout(t, "sampling", v1alpha1.StackRolloutStatus{
		Phase: v1alpha1.RolloutProgressing, Target: target, Stable: stable, WaveName: "canary", Stacks: 1, Updated: 1,
		Waves: []v1alpha1.RolloutWaveStatus{{Name: "canary", Stacks: []string{"c"}, Released: 1, Updated: 1, State: v1alpha1.WaveBaking, ReadyTime: ago(2 * time.Minute),
			Metrics: []v1alpha1.RolloutMetricStatus{{Name: "errors", Value: "0.01", SampleTime: ago(10 * time.Second), Successes: 2}}}},
	}, func(spec *v1alpha1.StackRolloutSpec) {
		spec.BakeTime = &metav1.Duration{Duration: time.Minute}
		spec.Gates.Metrics = []v1alpha1.RolloutMetricGate{{Name: "errors", Prometheus: v1alpha1.RolloutPrometheus{URL: "http://prometheus:9090"}, Query: "up", SuccessCondition: "< 0.05"}}
	})
	f.rollout(t, "previewing", v1alpha1.StackRolloutStatus{
		Phase: v1alpha1.RolloutProgressing, Target: target, Stable: stable, WaveName: "canary", Stacks: 1,
		Conditions: []metav1.Condition{condition(v1alpha1.ConditionReconciling, v1alpha1.ReasonWavePreviewing, "wave canary (1 of 1): 1 of 1 Stack(s) are previewing")},
		Waves:      []v1alpha1.RolloutWaveStatus{{Name: "canary", Stacks: []string{"c"}, State: v1alpha1.WavePreviewing}},
	}, func(spec *v1alpha1.StackRolloutSpec) {
		spec.Gates.Preview = &v1alpha1.RolloutPreviewGate{NoDeletes: true, MaxChanges: new(int32(5))}
	})
	f.rollout(t, "refused", v1alpha1.StackRolloutStatus{
		Phase: v1alpha1.RolloutIdle, Stable: stable,
		Conditions: []metav1.Condition{condition(v1alpha1.ConditionStalled, v1alpha1.ReasonMetricGateURLNotAllowed, "metric gate errors may not query http://evil:9090")},
	})
	return f
}

func (f *fixture) rollout(t *testing.T, name string, status v1alpha1.StackRolloutStatus, specs ...func(*v1alpha1.StackRolloutSpec)) {
	t.Helper()
	r := &v1alpha1.StackRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: v1alpha1.StackRolloutSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Waves:    v1alpha1.RolloutWaves{Steps: []v1alpha1.RolloutStep{{Stacks: intstr.FromString("50%")}}},
		},
	}
	for _, spec := range specs {
		spec(&r.Spec)
	}
	if err := env.Client.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	r.Status = status
	if err := env.Client.Status().Update(t.Context(), r); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) getRollout(t *testing.T, name string) *v1alpha1.StackRollout {
	t.Helper()
	r := &v1alpha1.StackRollout{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: name}, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// runWith runs the plugin as fixture.run does, with c as its client.
func (f *fixture) runWith(t *testing.T, c client.Client, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	connect := func() (*kubectlplugin.Env, error) {
		return &kubectlplugin.Env{Client: c, Namespace: f.ns, Out: &out, Now: func() time.Time { return f.now }}, nil
	}
	cmd := kubectlplugin.NewCommand(env.Scheme, &out, connect)
	cmd.SetArgs(args)
	cmd.SetContext(t.Context())
	err := cmd.Execute()
	return out.String(), err
}

func TestCommand_RolloutStatus_ShowsStateAndWaves(t *testing.T) {
	f := newRolloutFixture(t)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"awaitingPromotion", []string{"rollout", "status", "web"}, []string{
			"Phase: Progressing",
			"Target: 0123456789ab",
			"Stable: v1",
			"Wave: 1 (2 of 3)",
			"Updated: 3/5",
			"Gate: promotion of wave 1: kubectl stackwright rollout promote web",
			"Waiting: wave 1 passed its gates and awaits promotion",
			"",
			"NAME STATE RELEASED UPDATED/STACKS MAX-PARALLEL BAKE READY-AT GATE JOB",
			"0 Done 1 1/1 1 10m0s 20m ago web-0-gate",
			"1 AwaitingPromotion 2 2/2 1 1h0m0s 5m ago web-1-gate",
			"2 Pending 0 0/2 1 10m0s - -",
		}},
		{"haltedNamesTheFailure", []string{"rollout", "status", "halted"}, []string{
			"Phase: Halted",
			"Target: 0123456789ab",
			"Stable: v1",
			"Wave: step-1 (1 of 2)",
			"Updated: 0/3",
			"Halted: UpdateFailed: updates of Stacks db-a, db-b failed",
			"Failed: db-a, db-b",
			"Auto abort: 0 of 2 in a row used",
			"",
			"NAME STATE RELEASED UPDATED/STACKS MAX-PARALLEL BAKE READY-AT GATE JOB",
			"step-1 Failed 2 0/2 2 0s - -",
			"step-2 Pending 0 0/1 1 0s - -",
		}},
		{"pausedByRequest", []string{"rollout", "status", "paused"}, []string{
			"Phase: Progressing",
			"Target: 0123456789ab",
			"Stable: v1",
			"Wave: ring-1 (2 of 2)",
			"Updated: 1/2",
			"Paused: 1m ago by stackwright.dev/pause: resume with `kubectl stackwright rollout resume paused`",
			"Waiting: wave ring-1: 0 of 1 Stacks updated",
			"",
			"NAME STATE RELEASED UPDATED/STACKS MAX-PARALLEL BAKE READY-AT GATE JOB",
			"ring-0 Done 1 1/1 1 0s 10m ago -",
			"ring-1 Updating 1 0/1 1 0s - -",
		}},
		{"pausedBySpec", []string{"rollout", "status", "gitops"}, []string{
			"Phase: Progressing",
			"Target: 0123456789ab",
			"Stable: v1",
			"Wave: ring-1 (2 of 2)",
			"Updated: 1/2",
			"Paused: by spec.paused: set it false to resume",
			"Waiting: wave ring-1: 0 of 1 Stacks updated",
			"",
			"NAME STATE RELEASED UPDATED/STACKS MAX-PARALLEL BAKE READY-AT GATE JOB",
			"ring-0 Done 1 1/1 1 0s 10m ago -",
			"ring-1 Updating 1 0/1 1 0s - -",
		}},
		{"previewGate", []string{"rollout", "status", "previewing"}, []string{
			"Phase: Progressing",
			"Target: 0123456789ab",
			"Stable: v1",
			"Wave: canary (1 of 1)",
			"Updated: 0/1",
			"Gate: preview of 0123456789ab on wave canary (no deletes, at most 5 changes)",
			"Waiting: wave canary (1 of 1): 1 of 1 Stack(s) are previewing",
			"",
			"NAME STATE RELEASED UPDATED/STACKS MAX-PARALLEL BAKE READY-AT GATE JOB",
			"canary Previewing 0 0/1 1 0s - -",
		}},
		{"metricGate", []string{"rollout", "status", "sampling"}, []string{
			"Phase: Progressing",
			"Target: 0123456789ab",
			"Stable: v1",
			"Wave: canary (1 of 1)",
			"Updated: 1/1",
			"Gate: bake of wave canary (1m0s); metric errors (< 0.05): 2 success(es), 0 failure(s) in a row, last sample 10s ago: 0.01",
			"",
			"NAME STATE RELEASED UPDATED/STACKS MAX-PARALLEL BAKE READY-AT GATE JOB",
			"canary Baking 1 1/1 1 1m0s 2m ago -",
		}},
		{"stalledSaysWhy", []string{"rollout", "status", "refused"}, []string{
			"Phase: Idle",
			"Target: -",
			"Stable: v1",
			"Wave: -",
			"Updated: 0/0",
			"Stalled: MetricGateURLNotAllowed: metric gate errors may not query http://evil:9090",
			"",
			"No resources found.",
		}},
		{"idleWithoutWaves", []string{"rollout", "status", "idle"}, []string{
			"Phase: Idle",
			"Target: -",
			"Stable: -",
			"Wave: -",
			"Updated: 0/0",
			"",
			"No resources found.",
		}},
		// ":4" is cobra's ShellCompDirectiveNoFileComp: rollout names, never file names.
		{"argumentCompletesRolloutNames", []string{"__complete", "rollout", "promote", ""}, []string{"gitops", "halted", "idle", "paused", "previewing", "refused", "sampling", "updating", "web", ":4"}},
		{"secondArgumentCompletesNothing", []string{"__complete", "rollout", "status", "web", ""}, []string{":4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := f.run(t, tt.args...)
			if err != nil {
				t.Fatalf("%v: %v", tt.args, err)
			}
			if diff := cmp.Diff(tt.want, lines(out)); diff != "" {
				t.Errorf("%v (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestCommand_RolloutStatus_OutputIsTheObject(t *testing.T) {
	f := newRolloutFixture(t)
	want := f.getRollout(t, "web")
	tests := []struct {
		format    string
		unmarshal func([]byte, any) error
	}{
		{"json", json.Unmarshal},
		{"yaml", func(b []byte, v any) error { return yaml.Unmarshal(b, v) }},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			out, err := f.run(t, "rollout", "status", "web", "-o", tt.format)
			if err != nil {
				t.Fatal(err)
			}
			got := &v1alpha1.StackRollout{}
			if err := tt.unmarshal([]byte(out), got); err != nil {
				t.Fatalf("rollout status -o %s printed no StackRollout: %v\n%s", tt.format, err, out)
			}
			// MarshalIndent indents the raw JSON of managedFields too.
			ignore := cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ManagedFields")
			if diff := cmp.Diff(want, got, ignore); diff != "" {
				t.Errorf("rollout status -o %s (-want +got):\n%s", tt.format, diff)
			}
		})
	}
}

func TestCommand_RolloutRequests_SetTheirAnnotation(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		annotation string
		want       string
	}{
		{"promoteTheWaveAwaitingPromotion", []string{"rollout", "promote", "web"}, v1alpha1.RolloutPromoteAnnotation,
			`requested promotion of wave "1" of rollout web`},
		{"abortProgressing", []string{"rollout", "abort", "updating"}, v1alpha1.RolloutAbortAnnotation,
			"requested abort of revision 0123456789ab of rollout updating"},
		{"abortHalted", []string{"rollout", "abort", "halted"}, v1alpha1.RolloutAbortAnnotation,
			"requested abort of revision 0123456789ab of rollout halted"},
		{"resumeHalted", []string{"rollout", "resume", "halted"}, v1alpha1.RolloutResumeAnnotation,
			`requested resume of rollout halted, halted at wave "step-1"`},
		{"resumePaused", []string{"rollout", "resume", "paused"}, v1alpha1.RolloutResumeAnnotation,
			`requested resume of rollout paused, paused at wave "ring-1"`},
		{"pauseProgressing", []string{"rollout", "pause", "updating"}, v1alpha1.RolloutPauseAnnotation,
			"requested pause of rollout updating (phase Progressing)"},
		{"pauseIdle", []string{"rollout", "pause", "idle"}, v1alpha1.RolloutPauseAnnotation,
			"requested pause of rollout idle (phase Idle)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRolloutFixture(t)
			f.now = f.now.Add(123456789 * time.Nanosecond)
			out, err := f.run(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			value := f.now.UTC().Format(time.RFC3339Nano)
			if diff := cmp.Diff([]string{tt.want + " (" + tt.annotation + "=" + value + ")"}, lines(out)); diff != "" {
				t.Errorf("%v printed (-want +got):\n%s", tt.args, diff)
			}
			got := f.getRollout(t, tt.args[2]).Annotations
			if diff := cmp.Diff(map[string]string{tt.annotation: value}, got); diff != "" {
				t.Errorf("%v: annotations (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestCommand_Rollout_RefusesAndSaysWhy(t *testing.T) {
	f := newRolloutFixture(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"promoteWhileUpdating", []string{"rollout", "promote", "updating"},
			"rollout updating has no wave awaiting promotion (phase Progressing, wave ring-1 is Updating)"},
		{"promoteHalted", []string{"rollout", "promote", "halted"},
			"rollout halted has no wave awaiting promotion (phase Halted, wave step-1 is Failed)"},
		{"promoteWithoutWaves", []string{"rollout", "promote", "idle"},
			"rollout idle has no wave awaiting promotion (phase Idle, no wave)"},
		{"abortIdle", []string{"rollout", "abort", "idle"},
			"rollout idle cannot be aborted (phase Idle): only a Progressing or Halted rollout can"},
		{"resumeProgressing", []string{"rollout", "resume", "web"},
			"rollout web cannot be resumed (phase Progressing): only a paused or Halted rollout can"},
		{"resumeIdle", []string{"rollout", "resume", "idle"},
			"rollout idle cannot be resumed (phase Idle): only a paused or Halted rollout can"},
		{"resumeSpecPaused", []string{"rollout", "resume", "gitops"},
			"rollout gitops is paused by spec.paused, which a resume does not lift: set spec.paused to false (in the repository it is applied from)"},
		{"pausePaused", []string{"rollout", "pause", "paused"},
			"rollout paused is paused already (since " + f.now.Add(-time.Minute).UTC().Format(time.RFC3339) + ")"},
		{"unknownRollout", []string{"rollout", "status", "nope"},
			`failed to get StackRollout ` + f.ns + `/nope: stackrollouts.stackwright.dev "nope" not found`},
		{"unknownFormat", []string{"rollout", "status", "web", "-o", "xml"}, `unknown output format "xml": want json or yaml`},
		{"missingArgument", []string{"rollout", "abort"}, "accepts 1 arg(s), received 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := f.run(t, tt.args...)
			if err == nil {
				t.Fatalf("%v succeeded and printed %q; want error %q", tt.args, out, tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("%v error (-want +got):\n%s", tt.args, diff)
			}
		})
	}
	for _, name := range []string{"web", "updating", "halted", "idle", "paused", "gitops", "previewing", "sampling"} {
		if got := f.getRollout(t, name).Annotations; len(got) > 0 {
			t.Errorf("refused requests annotated rollout %s: %v", name, got)
		}
	}
}

// changeBeforePatch changes the rollout once, just before the first patch: what the
// controller might do between the plugin's check and its write.
type changeBeforePatch struct {
	client.Client
	change func(ctx context.Context) error
}

func (c *changeBeforePatch) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if change := c.change; change != nil {
		c.change = nil
		if err := change(ctx); err != nil {
			return err
		}
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func TestCommand_RolloutPromote_ChecksAgainWhenTheRolloutChanged(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*v1alpha1.StackRollout)
		wantErr string
	}{
		{name: "stillAwaitingPromotion", change: func(r *v1alpha1.StackRollout) { r.Status.ObservedGeneration++ }},
		{name: "promotedMeanwhile", change: func(r *v1alpha1.StackRollout) {
			r.Status.Wave, r.Status.WaveName = 2, "2"
			r.Status.Waves[1].State, r.Status.Waves[2].State = v1alpha1.WaveDone, v1alpha1.WaveUpdating
		}, wantErr: "rollout web has no wave awaiting promotion (phase Progressing, wave 2 is Updating)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRolloutFixture(t)
			c := &changeBeforePatch{Client: env.Client, change: func(ctx context.Context) error {
				r := f.getRollout(t, "web")
				tt.change(r)
				return env.Client.Status().Update(ctx, r)
			}}
			_, err := f.runWith(t, c, "rollout", "promote", "web")
			want := map[string]string{v1alpha1.RolloutPromoteAnnotation: f.now.UTC().Format(time.RFC3339Nano)}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v; want %q", err, tt.wantErr)
				}
				want = nil
			} else if err != nil {
				t.Fatal(err)
			}
			if c.change != nil {
				t.Fatal("the rollout was never patched")
			}
			if diff := cmp.Diff(want, f.getRollout(t, "web").Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}
