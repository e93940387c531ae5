package program

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/scheme"
	"github.com/stackwright/stackwright/internal/source"
	"github.com/stackwright/stackwright/internal/source/program/project"
)

// The Resolver only reads what the Program controller recorded; a fake client stands in
// for the API server here, and the Stack controller's envtest suite covers the two
// controllers together.
func TestResolver_Resolve_ConsumesTheProgramControllersArtifact(t *testing.T) {
	const gen = 3
	prog := func(status pulumiv1.ProgramStatus) *pulumiv1.Program {
		p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: gen}, Status: status}
		p.Program.Outputs = map[string]apiextensionsv1.JSON{"x": {Raw: []byte(`"y"`)}}
		return p
	}
	good := prog(pulumiv1.ProgramStatus{})
	tarball, err := project.Tarball(good)
	if err != nil {
		t.Fatal(err)
	}
	digest := artifact.Digest(tarball)
	cond := func(typ string, status metav1.ConditionStatus, gen int64, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "R", Message: msg, ObservedGeneration: gen}
	}
	rendered := func(digest string) pulumiv1.ProgramStatus {
		return pulumiv1.ProgramStatus{
			ObservedGeneration: gen,
			Artifact:           &pulumiv1.ProgramArtifact{Digest: digest, Revision: "generation/3"},
			Conditions:         []metav1.Condition{cond(pulumiv1.ConditionReady, metav1.ConditionTrue, gen, "")},
		}
	}
	tests := []struct {
		name      string
		program   *pulumiv1.Program
		stored    bool
		want      source.Artifact
		wantFault string // substring; "" for success
		stalled   bool
	}{
		{name: "rendered and stored", program: prog(rendered(digest)), stored: true, want: source.Artifact{Revision: "generation/3", Digest: digest}},
		{name: "rendered but missing from a fresh store is restored", program: prog(rendered(digest)), want: source.Artifact{Revision: "generation/3", Digest: digest}},
		{name: "missing Program waits", wantFault: `Program "web" not found`},
		{
			name:      "generation not rendered yet waits",
			program:   prog(pulumiv1.ProgramStatus{ObservedGeneration: gen - 1, Artifact: rendered(digest).Artifact}),
			wantFault: "waiting for Program \"web\" to render generation 3",
		},
		{
			name: "generation that cannot render stalls with the Program's message",
			program: prog(pulumiv1.ProgramStatus{ObservedGeneration: gen, Conditions: []metav1.Condition{
				cond(pulumiv1.ConditionStalled, metav1.ConditionTrue, gen, "bad resource"),
				cond(pulumiv1.ConditionReady, metav1.ConditionFalse, gen, "bad resource"),
			}}),
			wantFault: `Program "web" cannot be rendered: bad resource`, stalled: true,
		},
		{
			name:      "digest this manager does not render waits",
			program:   prog(rendered("sha256:" + strings.Repeat("0", 64))),
			wantFault: "this manager renders " + digest,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, err := artifact.NewStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if tt.stored {
				if _, err := store.Put(bytes.NewReader(tarball), project.MaxArtifactBytes); err != nil {
					t.Fatal(err)
				}
			}
			sch, err := scheme.New()
			if err != nil {
				t.Fatal(err)
			}
			b := fake.NewClientBuilder().WithScheme(sch)
			if tt.program != nil {
				b = b.WithObjects(tt.program)
			}
			r := &Resolver{Client: b.Build(), Store: store}
			stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
				Spec: pulumiv1.StackSpec{ProgramRef: &pulumiv1.ProgramReference{Name: "web"}}}
			got, err := r.Resolve(t.Context(), stack)
			if tt.wantFault == "" {
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("artifact (-want +got):\n%s", diff)
				}
				if !store.Has(got.Digest) {
					t.Errorf("artifact %s is not in the store", got.Digest)
				}
				return
			}
			f, ok := fault.As(err)
			if !ok || !strings.Contains(err.Error(), tt.wantFault) || f.Stalled != tt.stalled {
				t.Errorf("Resolve error = %v (fault %v); want a fault containing %q, stalled=%v", err, ok, tt.wantFault, tt.stalled)
			}
		})
	}
}
