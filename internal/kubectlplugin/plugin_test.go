package kubectlplugin_test

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/kubectlplugin"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

// fixture is a namespace with Stacks and Updates in known states, and a clock an hour
// after they were written.
type fixture struct {
	ns  string
	now time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{ns: env.Namespace(t)}
	ctx := t.Context()
	finished := metav1.NewTime(time.Now().Add(-10 * time.Minute).Truncate(time.Second))
	ready := f.stack(t, "web", func(s *pulumiv1.Stack) {
		s.Status.Conditions = []metav1.Condition{{Type: pulumiv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "ProcessingCompleted", LastTransitionTime: finished}}
		s.Status.LastUpdate = &pulumiv1.StackUpdateState{Type: "up", State: pulumiv1.UpdateStateSucceeded,
			LastSuccessfulCommit: "0123456789abcdef0123456789abcdef01234567", LastResyncTime: &finished}
		s.Status.Outputs = map[string]apiextensionsv1.JSON{"url": {Raw: []byte(`"https://web"`)}, "password": {Raw: []byte(`"[secret]"`)}}
	})
	f.stack(t, "db", func(s *pulumiv1.Stack) {
		s.Status.Conditions = []metav1.Condition{{Type: pulumiv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "SpecInvalid", LastTransitionTime: finished}}
	})
	for i, phase := range []v1alpha1.UpdatePhase{v1alpha1.UpdatePhaseSucceeded, v1alpha1.UpdatePhaseFailed} {
		u := &v1alpha1.Update{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web-" + string(rune('a'+i))},
			Spec:       v1alpha1.UpdateSpec{StackName: ready.Name, Type: v1alpha1.UpdateTypeUp, Revision: "main@sha1:abc"},
		}
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		start := metav1.NewTime(finished.Add(-90 * time.Second))
		u.Status = v1alpha1.UpdateStatus{Phase: phase, StartTime: &start, EndTime: &finished, Message: "run " + string(phase),
			LogTail: "Updating (dev):\n +  web created\n"}
		if err := env.Client.Status().Update(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	f.stack(t, "gated", func(s *pulumiv1.Stack) {
		s.Status.Stackwright = &pulumiv1.StackwrightStatus{Approval: &pulumiv1.ApprovalStatus{
			Preview: "gated-abc-preview-1", State: pulumiv1.ApprovalAwaiting, DesiredStateKey: "abc", Attempt: 1,
			Revision: "generation/2", Summary: "preview succeeded: 1 to update, 1 to delete",
			Violations: []pulumiv1.PolicyViolation{{Policy: "Policy ns/tags", Enforcement: "advisory", Message: "bucket has no team tag"}},
		}}
	})
	p := &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "gated-abc-preview-1"},
		Spec:       v1alpha1.UpdateSpec{StackName: "gated", Type: v1alpha1.UpdateTypePreview, Revision: "generation/2"},
	}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status = v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseSucceeded, Steps: []v1alpha1.UpdateStep{
		{Op: "update", URN: "urn:pulumi:dev::p::File::a", Changed: []string{"content", "mode"}},
		{Op: "delete", URN: "urn:pulumi:dev::p::File::b"},
	}}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	f.now = time.Now().Add(time.Hour)
	return f
}

func (f *fixture) stack(t *testing.T, name string, status func(*pulumiv1.Stack)) *pulumiv1.Stack {
	t.Helper()
	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: name}},
	}
	if err := env.Client.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	status(s)
	if err := env.Client.Status().Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs the plugin with args in the fixture's namespace and returns what it printed.
func (f *fixture) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	connect := func() (*kubectlplugin.Env, error) {
		return &kubectlplugin.Env{Client: env.Client, Namespace: f.ns, Out: &out, Now: func() time.Time { return f.now }}, nil
	}
	cmd := kubectlplugin.NewCommand(env.Scheme, &out, connect)
	cmd.SetArgs(args)
	cmd.SetContext(t.Context())
	err := cmd.Execute()
	return out.String(), err
}

// lines splits a table and squeezes its padding, so that the test does not pin widths.
func lines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	return out
}

func TestCommand_Read_Tables(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"getListsStacksWithState", []string{"get"}, []string{
			"NAME STATE REVISION LAST UPDATE AGE",
			"db Stalled - - 1h",
			"gated Unknown - - 1h",
			"web Ready 0123456789ab up succeeded 1h ago 1h",
		}},
		{"historyNewestFirst", []string{"history", "web"}, []string{
			"UPDATE TYPE PHASE REVISION DURATION AGE MESSAGE",
			"web-b up Failed main@sha1:abc 1m30s 1h run Failed",
			"web-a up Succeeded main@sha1:abc 1m30s 1h run Succeeded",
		}},
		{"logsPrintsTheRecordedOutput", []string{"logs", "web-a"}, []string{"Updating (dev):", "+ web created"}},
		{"outputsKeepSecretsMasked", []string{"outputs", "web"}, []string{
			"OUTPUT VALUE",
			`password "[secret]"`,
			`url "https://web"`,
		}},
		// ":4" is cobra's ShellCompDirectiveNoFileComp: Stack names, never file names.
		{"previewShowsStepsAndVerdict", []string{"preview", "gated"}, []string{
			"Preview: gated-abc-preview-1 (revision generation/2)",
			"State: AwaitingApproval",
			"Summary: preview succeeded: 1 to update, 1 to delete",
			"Policy: Policy ns/tags (advisory): bucket has no team tag",
			"",
			"OP RESOURCE CHANGED",
			"update urn:pulumi:dev::p::File::a content,mode",
			"delete urn:pulumi:dev::p::File::b",
		}},
		{"stackArgumentCompletesStackNames", []string{"__complete", "history", ""}, []string{"db", "gated", "web", ":4"}},
		{"secondArgumentCompletesNothing", []string{"__complete", "retry", "web", ""}, []string{":4"}},
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

func TestCommand_Completion_ScriptForTheShell(t *testing.T) {
	f := &fixture{ns: "default", now: time.Now()}
	script, err := f.run(t, "completion", "bash")
	if err != nil || !strings.Contains(script, "__start_kubectl-stackwright") {
		t.Errorf("completion bash: %v; script does not define __start_kubectl-stackwright", err)
	}
}

func TestCommand_Get_JSONIsTheObjects(t *testing.T) {
	f := newFixture(t)
	out, err := f.run(t, "get", "web", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"name": "web"`) || !strings.Contains(out, `"lastSuccessfulCommit": "0123456789abcdef0123456789abcdef01234567"`) {
		t.Errorf("get -o json does not hold the Stack:\n%s", out)
	}
}

func TestCommand_Write_PatchesTheStack(t *testing.T) {
	f := newFixture(t)
	get := func() *pulumiv1.Stack {
		s := &pulumiv1.Stack{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: "web"}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if _, err := f.run(t, "suspend", "web"); err != nil {
		t.Fatal(err)
	}
	if s := get(); s.Spec.Stackwright == nil || !s.Spec.Stackwright.Suspend {
		t.Errorf("after suspend, spec.stackwright = %+v; want suspend: true", s.Spec.Stackwright)
	}
	if out, _ := f.run(t, "get", "web"); !strings.Contains(out, "Suspended") {
		t.Errorf("get of a suspended Stack:\n%s", out)
	}
	if _, err := f.run(t, "resume", "web"); err != nil {
		t.Fatal(err)
	}
	if s := get(); s.Spec.Stackwright != nil && s.Spec.Stackwright.Suspend {
		t.Errorf("after resume, the Stack is still suspended")
	}
	if _, err := f.run(t, "approve", "gated"); err != nil {
		t.Fatal(err)
	}
	gated := &pulumiv1.Stack{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: "gated"}, gated); err != nil {
		t.Fatal(err)
	}
	if got := gated.Annotations[pulumiv1.ApproveAnnotation]; got != "gated-abc-preview-1" {
		t.Errorf("after approve, %s = %q; want the preview awaiting approval", pulumiv1.ApproveAnnotation, got)
	}
	out, err := f.run(t, "retry", "web")
	if err != nil {
		t.Fatal(err)
	}
	want := f.now.UTC().Format(time.RFC3339Nano)
	if got := get().Annotations[pulumiv1.ReconcileRequestAnnotation]; got != want {
		t.Errorf("after retry, %s = %q; want %q (printed %q)", pulumiv1.ReconcileRequestAnnotation, got, want, out)
	}
}

func TestCommand_Errors_NameWhatIsMissing(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknownStack", []string{"history", "nope"}, "failed to get Stack " + f.ns + "/nope"},
		{"unknownUpdate", []string{"logs", "nope"}, "failed to get Update " + f.ns + "/nope"},
		{"unknownFormat", []string{"get", "-o", "xml"}, `unknown output format "xml"`},
		{"missingArgument", []string{"outputs"}, "accepts 1 arg(s), received 0"},
		{"nothingToApprove", []string{"approve", "web"}, "no change of Stack " + f.ns + "/web awaits approval (state: none)"},
		{"nothingToReject", []string{"reject", "db"}, "no change of Stack " + f.ns + "/db awaits approval"},
		{"nothingPreviewed", []string{"preview", "web"}, "no change of Stack " + f.ns + "/web was previewed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.run(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%v: error %v; want one containing %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestCommand_Extend_PushesTheExpiryBack(t *testing.T) {
	f := newFixture(t)
	withTTL := func(name string, status pulumiv1.StackwrightStatus) {
		s := f.stack(t, name, func(s *pulumiv1.Stack) { s.Status.Stackwright = &status })
		s.Spec.Stackwright = &pulumiv1.StackwrightSpec{TTL: &pulumiv1.StackTTL{After: metav1.Duration{Duration: 2 * time.Hour}}}
		if err := env.Client.Update(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: f.now.Add(d)} }
	withTTL("review", pulumiv1.StackwrightStatus{ExpiresAt: at(30 * time.Minute)})
	withTTL("lapsed", pulumiv1.StackwrightStatus{ExpiresAt: at(-time.Minute)})
	withTTL("gone", pulumiv1.StackwrightStatus{ExpiresAt: at(-time.Hour), ExpiredAt: at(-time.Hour)})
	tests := []struct {
		name    string
		args    []string
		want    time.Time
		wantErr string
	}{
		{name: "byPastTheCurrentExpiry", args: []string{"extend", "review", "--by", "1h"}, want: f.now.Add(90 * time.Minute)},
		{name: "byTheTTLPastNowWhenLater", args: []string{"extend", "lapsed"}, want: f.now.Add(2 * time.Hour)},
		{name: "noTTL", args: []string{"extend", "web"}, wantErr: "has no TTL"},
		{name: "alreadyExpired", args: []string{"extend", "gone"}, wantErr: "is being destroyed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.run(t, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := &pulumiv1.Stack{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: tt.args[1]}, s); err != nil {
				t.Fatal(err)
			}
			if got, want := s.Annotations[pulumiv1.ExpiresAtAnnotation], tt.want.UTC().Format(time.RFC3339); got != want {
				t.Errorf("%s = %q; want %q", pulumiv1.ExpiresAtAnnotation, got, want)
			}
		})
	}
}

// Decide, held to the preview the person reviewed, writes nothing when another awaits
// approval instead.
func TestEnv_Decide_HeldToTheReviewedPreview(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name     string
		preview  string
		wantErr  string
		wantMark string
	}{
		{name: "another preview", preview: "gated-abc-preview-0", wantErr: "is now the one previewed by Update gated-abc-preview-1, not gated-abc-preview-0"},
		{name: "the one awaiting", preview: "gated-abc-preview-1", wantMark: "gated-abc-preview-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &kubectlplugin.Env{Client: env.Client, Namespace: f.ns, Out: io.Discard, Now: time.Now}
			err := e.Decide(t.Context(), "gated", kubectlplugin.Reject, tt.preview)
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v; want %q", err, tt.wantErr)
			}
			gated := &pulumiv1.Stack{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: "gated"}, gated); err != nil {
				t.Fatal(err)
			}
			if got := gated.Annotations[pulumiv1.RejectAnnotation]; got != tt.wantMark {
				t.Errorf("%s = %q; want %q", pulumiv1.RejectAnnotation, got, tt.wantMark)
			}
		})
	}
}
