package autoupdate_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/autoupdate"
)

// Each of PKO's options reaches the operation that takes it, and only that one: the CLI
// refuses a flag its verb does not have. Outputs go to a Secret, which the request names.
func TestOperation_MapsPKOOptions(t *testing.T) {
	all := autov1alpha1.UpdateSpec{
		WorkspaceName: "web", Parallel: ptr.To[int32](3), Message: ptr.To("m"), ExpectNoChanges: ptr.To(true),
		Replace: []string{"urn:r"}, Target: []string{"urn:t"}, TargetDependents: ptr.To(true), Refresh: ptr.To(true),
		ContinueOnError: ptr.To(true), Remove: ptr.To(true),
	}
	stack := &pulumiv1.Stack{Spec: pulumiv1.StackSpec{Stack: "dev", RunProgram: true}}
	for _, tc := range []struct {
		typ         autov1alpha1.UpdateType
		previewOnly bool
		want        v1alpha1.UpdateType
		opts        v1alpha1.UpdateOptions
	}{
		{autov1alpha1.PreviewType, false, v1alpha1.UpdateTypePreview, v1alpha1.UpdateOptions{
			Refresh: true, ExpectNoChanges: true, Targets: []string{"urn:t"}, TargetDependents: true, RunProgram: true, Replace: []string{"urn:r"}, Parallel: 3, Message: "m", OutputsSecret: true}},
		{autov1alpha1.UpType, false, v1alpha1.UpdateTypeUp, v1alpha1.UpdateOptions{
			Refresh: true, ExpectNoChanges: true, Targets: []string{"urn:t"}, TargetDependents: true, RunProgram: true, Replace: []string{"urn:r"}, Parallel: 3, ContinueOnError: true, Message: "m", OutputsSecret: true}},
		{autov1alpha1.RefreshType, false, v1alpha1.UpdateTypeRefresh, v1alpha1.UpdateOptions{
			ExpectNoChanges: true, Targets: []string{"urn:t"}, RunProgram: true, Parallel: 3, Message: "m", OutputsSecret: true}},
		{autov1alpha1.RefreshType, true, v1alpha1.UpdateTypeDrift, v1alpha1.UpdateOptions{
			Targets: []string{"urn:t"}, RunProgram: true, Parallel: 3, Message: "m", OutputsSecret: true}},
		{autov1alpha1.DestroyType, false, v1alpha1.UpdateTypeDestroy, v1alpha1.UpdateOptions{
			Refresh: true, Targets: []string{"urn:t"}, TargetDependents: true, RunProgram: true, Parallel: 3, ContinueOnError: true, Remove: true, Message: "m", OutputsSecret: true}},
	} {
		req := &autov1alpha1.Update{Spec: all}
		req.Spec.Type, req.Spec.PreviewOnly = tc.typ, ptr.To(tc.previewOnly)
		typ, opts := autoupdate.Operation(req, stack)
		if typ != tc.want {
			t.Errorf("%s (previewOnly %v): type %s; want %s", tc.typ, tc.previewOnly, typ, tc.want)
		}
		if diff := cmp.Diff(&tc.opts, opts); diff != "" {
			t.Errorf("%s (previewOnly %v): options (-want +got):\n%s", tc.typ, tc.previewOnly, diff)
		}
	}
}

// The request's runProgram, when set, overrides the Stack's.
func TestOperation_RunProgramOverridesTheStacks(t *testing.T) {
	stack := &pulumiv1.Stack{Spec: pulumiv1.StackSpec{RunProgram: true}}
	for _, tc := range []struct {
		set  *bool
		want bool
	}{{nil, true}, {ptr.To(false), false}, {ptr.To(true), true}} {
		_, opts := autoupdate.Operation(&autov1alpha1.Update{Spec: autov1alpha1.UpdateSpec{Type: autov1alpha1.DestroyType, RunProgram: tc.set}}, stack)
		if opts.RunProgram != tc.want {
			t.Errorf("runProgram %v: options.runProgram %v; want %v", tc.set, opts.RunProgram, tc.want)
		}
	}
}

func TestOperation_DefaultMessageNamesTheRequest(t *testing.T) {
	req := &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "fix"}, Spec: autov1alpha1.UpdateSpec{Type: autov1alpha1.UpType}}
	_, opts := autoupdate.Operation(req, &pulumiv1.Stack{})
	if want := "Stackwright: up requested by auto.pulumi.com Update team/fix"; opts.Message != want {
		t.Errorf("message %q; want %q", opts.Message, want)
	}
}

// The name of the Update that runs a request depends on the request's UID alone (a crash
// finds the same name), differs for a request made again under the same name, and fits.
func TestUpdateName_FromTheUID(t *testing.T) {
	req := func(uid string) *autov1alpha1.Update {
		return &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: "fix", UID: types.UID(uid)}, Spec: autov1alpha1.UpdateSpec{Type: autov1alpha1.RefreshType}}
	}
	a, again, other := autoupdate.UpdateName("web", req("u1")), autoupdate.UpdateName("web", req("u1")), autoupdate.UpdateName("web", req("u2"))
	if a != again || a == other || !strings.HasPrefix(a, "web-refresh-") || len(a) != len("web-refresh-")+10 {
		t.Errorf("names %q, %q, %q; want one stable web-refresh-<10 hex> per UID", a, again, other)
	}
	if long := autoupdate.UpdateName(strings.Repeat("s", 253), req("u1")); len(long) > 253 {
		t.Errorf("name of %d characters; want at most 253", len(long))
	}
}

func TestRefusal_SaysWhy(t *testing.T) {
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: pulumiv1.StackSpec{Stack: "dev"}}
	deleted := stack.DeepCopy()
	deleted.DeletionTimestamp = ptr.To(metav1.Now())
	for _, tc := range []struct {
		name  string
		spec  autov1alpha1.UpdateSpec
		stack *pulumiv1.Stack
		want  string
	}{
		{"runs", autov1alpha1.UpdateSpec{WorkspaceName: "web", Type: autov1alpha1.UpType, StackName: "dev"}, stack, ""},
		{"unknownType", autov1alpha1.UpdateSpec{WorkspaceName: "web", Type: "apply"}, stack, autoupdate.ReasonUnsupportedType},
		{"noType", autov1alpha1.UpdateSpec{WorkspaceName: "web"}, stack, autoupdate.ReasonUnsupportedType},
		{"noWorkspace", autov1alpha1.UpdateSpec{Type: autov1alpha1.UpType}, nil, autoupdate.ReasonStackNotFound},
		{"noStack", autov1alpha1.UpdateSpec{WorkspaceName: "db", Type: autov1alpha1.UpType}, nil, autoupdate.ReasonStackNotFound},
		{"deleted", autov1alpha1.UpdateSpec{WorkspaceName: "web", Type: autov1alpha1.UpType}, deleted, autoupdate.ReasonStackDeleted},
		{"otherStack", autov1alpha1.UpdateSpec{WorkspaceName: "web", Type: autov1alpha1.UpType, StackName: "prod"}, stack, autoupdate.ReasonStackNameMismatch},
		{"hugeMessage", autov1alpha1.UpdateSpec{WorkspaceName: "web", Type: autov1alpha1.UpType, Message: ptr.To(strings.Repeat("m", 2000))}, stack, autoupdate.ReasonOptionsTooLarge},
		{"manyTargets", autov1alpha1.UpdateSpec{WorkspaceName: "web", Type: autov1alpha1.UpType, Target: make([]string, 501)}, stack, autoupdate.ReasonOptionsTooLarge},
		{"hugeType", autov1alpha1.UpdateSpec{WorkspaceName: "web", Type: autov1alpha1.UpdateType(strings.Repeat("x", 1<<20))}, stack, autoupdate.ReasonUnsupportedType},
	} {
		reason, msg := autoupdate.Refusal(&autov1alpha1.Update{Spec: tc.spec}, tc.stack)
		if reason != tc.want || (reason == "") != (msg == "") || len(msg) > 1024 {
			t.Errorf("%s: Refusal() = %q, %q; want reason %q with a message", tc.name, reason, msg, tc.want)
		}
	}
}
