package autoupdate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/clip"
)

// Reasons of a refused request (its Failed condition).
const (
	ReasonUnsupportedType   = "UnsupportedType"
	ReasonStackNotFound     = "StackNotFound"
	ReasonStackNameMismatch = "StackNameMismatch"
	ReasonStackDeleted      = "StackDeleted"
	ReasonOptionsTooLarge   = "OptionsTooLarge"
)

// Bounds of a request's options: PKO's schema sets none, and the Update that runs it, and
// the CLI's command line, must stay within what the API server and the kernel take.
const (
	maxMessage = 1024
	maxURNs    = 500
	maxURN     = 1024
)

// maxQuoted bounds what a refusal quotes of the request: the schema leaves its strings
// unbounded, and a message must fit a condition and an event.
const maxQuoted = 253

// Completed reports whether a request has ended (run, or refused).
func Completed(req *autov1alpha1.Update) bool {
	return apimeta.IsStatusConditionTrue(req.Status.Conditions, autov1alpha1.ConditionComplete)
}

// Refusal says why req cannot run on stack (nil: the Stack is missing): a reason of its
// Failed condition and a message, or "" if it can.
func Refusal(req *autov1alpha1.Update, stack *pulumiv1.Stack) (reason, message string) {
	switch req.Spec.Type {
	case autov1alpha1.PreviewType, autov1alpha1.UpType, autov1alpha1.RefreshType, autov1alpha1.DestroyType:
	default:
		return ReasonUnsupportedType, fmt.Sprintf("spec.type %q is not an operation: use preview, up, refresh or destroy", clip.Line(string(req.Spec.Type), maxQuoted))
	}
	if why := oversized(&req.Spec); why != "" {
		return ReasonOptionsTooLarge, why
	}
	switch {
	case req.Spec.WorkspaceName == "":
		return ReasonStackNotFound, "spec.workspaceName is empty: it names the Stack to operate on (PKO names a Stack's Workspace after the Stack)"
	case stack == nil:
		return ReasonStackNotFound, fmt.Sprintf("no Stack %q in namespace %s: spec.workspaceName names the Stack to operate on (PKO names a Stack's Workspace after the Stack)", clip.Line(req.Spec.WorkspaceName, maxQuoted), req.Namespace)
	case !stack.DeletionTimestamp.IsZero():
		return ReasonStackDeleted, fmt.Sprintf("Stack %s is being deleted", stack.Name)
	case req.Spec.StackName != "" && req.Spec.StackName != stack.Spec.Stack:
		return ReasonStackNameMismatch, fmt.Sprintf("spec.stackName %q is not the Pulumi stack of Stack %s (%q): a Stack operates on its own stack only", clip.Line(req.Spec.StackName, maxQuoted), stack.Name, stack.Spec.Stack)
	}
	return "", ""
}

// Operation maps a request's type and PKO options to the Update that runs it. A refresh
// with previewOnly is a drift check: it reports differences and records nothing.
func Operation(req *autov1alpha1.Update, stack *pulumiv1.Stack) (v1alpha1.UpdateType, *v1alpha1.UpdateOptions) {
	s := &req.Spec
	o := &v1alpha1.UpdateOptions{
		Refresh: deref(s.Refresh), ExpectNoChanges: deref(s.ExpectNoChanges), Targets: s.Target, TargetDependents: deref(s.TargetDependents),
		RunProgram: stack.Spec.RunProgram, ContinueOnError: deref(s.ContinueOnError), Message: requestMessage(req),
		// The request's status names the Secret that holds the outputs, as PKO's does,
		// whether or not one of them is secret.
		OutputsSecret: true,
	}
	if s.RunProgram != nil {
		o.RunProgram = *s.RunProgram
	}
	if s.Parallel != nil {
		o.Parallel = max(*s.Parallel, 0)
	}
	switch s.Type {
	case autov1alpha1.PreviewType:
		o.Replace, o.ContinueOnError = s.Replace, false
		return v1alpha1.UpdateTypePreview, o
	case autov1alpha1.RefreshType:
		// The CLI's refresh takes neither --refresh nor --continue-on-error nor
		// --target-dependents, nor --expect-no-changes with --preview-only.
		o.Refresh, o.ContinueOnError, o.TargetDependents = false, false, false
		if deref(s.PreviewOnly) {
			o.ExpectNoChanges = false
			return v1alpha1.UpdateTypeDrift, o
		}
		return v1alpha1.UpdateTypeRefresh, o
	case autov1alpha1.DestroyType:
		o.Remove, o.ExpectNoChanges = deref(s.Remove), false
		return v1alpha1.UpdateTypeDestroy, o
	}
	o.Replace = s.Replace
	return v1alpha1.UpdateTypeUp, o
}

// oversized says which option of spec is beyond its bound, "" if none is.
func oversized(spec *autov1alpha1.UpdateSpec) string {
	if spec.Message != nil && len(*spec.Message) > maxMessage {
		return fmt.Sprintf("spec.message has %d bytes: at most %d are passed on", len(*spec.Message), maxMessage)
	}
	for _, f := range []struct {
		field string
		urns  []string
	}{{"spec.target", spec.Target}, {"spec.replace", spec.Replace}} {
		field, urns := f.field, f.urns
		if len(urns) > maxURNs {
			return fmt.Sprintf("%s lists %d URNs: at most %d are passed on", field, len(urns), maxURNs)
		}
		for _, u := range urns {
			if len(u) > maxURN {
				return fmt.Sprintf("%s holds a URN of %d bytes: at most %d", field, len(u), maxURN)
			}
		}
	}
	return ""
}

func requestMessage(req *autov1alpha1.Update) string {
	if req.Spec.Message != nil && *req.Spec.Message != "" {
		return *req.Spec.Message
	}
	return fmt.Sprintf("Stackwright: %s requested by auto.pulumi.com Update %s/%s", req.Spec.Type, req.Namespace, req.Name)
}

func deref(b *bool) bool { return b != nil && *b }

// UpdateName names the stackwright.dev Update that runs req on its Stack: derived from
// the request's UID, so that a crash between recording the intent and creating the Update
// creates the same one, and a request deleted and made again under the same name is a
// new request.
func UpdateName(stack string, req *autov1alpha1.Update) string {
	sum := sha256.Sum256([]byte(req.UID))
	suffix := "-" + string(req.Spec.Type) + "-" + hex.EncodeToString(sum[:])[:10]
	const maxName = 253
	if len(stack)+len(suffix) > maxName {
		stack = strings.TrimRight(stack[:maxName-len(suffix)], "-.")
	}
	return stack + suffix
}
