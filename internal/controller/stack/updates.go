package stack

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/source"
)

// updateName is <stack>-<first 10 hex of the key>-<attempt>, shortened to fit a name, so
// that deciding twice on the same status yields the same name.
func updateName(stack, key string, attempt int32) string {
	return shortName(stack, "-"+key[:min(10, len(key))]+"-"+strconv.Itoa(int(attempt)))
}

// previewName is <stack>-<first 10 hex of the key>-preview-<n>, n counting the Stack's
// approval previews.
func previewName(stack, key string, n int64) string {
	return shortName(stack, "-"+key[:min(10, len(key))]+"-preview-"+strconv.FormatInt(n, 10))
}

// shortName is stack+suffix, stack shortened so that the whole fits a name.
func shortName(stack, suffix string) string {
	const maxName = 253
	if len(stack)+len(suffix) > maxName {
		stack = strings.TrimRight(stack[:maxName-len(suffix)], "-.")
	}
	return stack + suffix
}

// buildUpdate builds the Update that scope decided to start, in full, once. A resumed
// Update keeps the name its intent recorded.
func (r *Reconciler) buildUpdate(s *scope) *v1alpha1.Update {
	stack, spec, attempt := s.stack, &s.stack.Spec, s.next.Attempt
	name, op := s.resume, s.op
	switch {
	case s.driftName != "":
		name = s.driftName
	case s.previewName != "":
		name, op = s.previewName, v1alpha1.UpdateTypePreview
	case name == "":
		name = updateName(stack.Name, s.key, attempt)
	}
	u := &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: stack.Namespace},
		Spec: v1alpha1.UpdateSpec{
			StackName: stack.Name, Type: op, Revision: s.artifact.Revision, ArtifactDigest: s.artifact.Digest,
			ProjectDir: s.artifact.Dir, DesiredStateKey: s.key, Attempt: attempt, Runner: r.Options.Runner,
			Options: &v1alpha1.UpdateOptions{
				// A drift check and an approval preview report changes; expecting none would
				// fail them exactly when they find some.
				Refresh: spec.Refresh || s.next.Refresh, ExpectNoChanges: spec.ExpectNoRefreshChanges && op == s.op && op != v1alpha1.UpdateTypeDrift, Targets: spec.Targets,
				TargetDependents: spec.TargetDependents, RunProgram: spec.RunProgram,
				Remove:   s.op == v1alpha1.UpdateTypeDestroy,
				Message:  fmt.Sprintf("Stackwright: %s (Stack %s/%s, generation %d)", s.next.Why, stack.Namespace, stack.Name, stack.Generation),
				SavePlan: s.previewName != "",
				Plan:     s.plan,
			},
		},
	}
	if s.inputs != nil {
		u.Spec.Inputs = &v1alpha1.UpdateInputs{StackGeneration: stack.Generation, Fingerprint: s.inputs.Fingerprint}
	}
	if sw := stack.Status.Stackwright; sw != nil && op == v1alpha1.UpdateTypeUp && sw.LastAttemptedKey == s.key {
		u.Spec.Options.Recover = slices.Clone(sw.LostUpdates)
	}
	if len(stack.Name) <= 63 {
		u.Labels = map[string]string{v1alpha1.StackLabel: stack.Name}
	}
	if s.request != nil {
		requestUpdate(u, s)
	}
	applyUpdateTemplate(u, spec)
	return u
}

// findUpdate finds a recorded Update: in the cache, on the API server (the cache may lag),
// or among the detached ones (reported as such). Nil when it exists nowhere.
func (r *Reconciler) findUpdate(ctx context.Context, namespace, name string) (*v1alpha1.Update, bool, error) {
	u := &v1alpha1.Update{}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	err := r.Client.Get(ctx, key, u)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, u)
	}
	switch {
	case err == nil:
		return u, false, nil
	case !apierrors.IsNotFound(err):
		return nil, false, fmt.Errorf("failed to get Update %s: %w", name, err)
	case r.Detached != nil:
		if d, ok := r.Detached.Detached(namespace, name); ok {
			return d, true, nil
		}
	}
	return nil, false, nil
}

// readOutputs reads the outputs a successful Update recorded, in its status or its Secret,
// masking secret ones; nil when it recorded none (the status then keeps the outputs it
// has).
func (r *Reconciler) readOutputs(ctx context.Context, u *v1alpha1.Update) (map[string]apiextensionsv1.JSON, error) {
	if u.Status.Phase != v1alpha1.UpdatePhaseSucceeded {
		return nil, nil
	}
	data, secret, err := r.outputsOf(ctx, u)
	if err != nil || data == nil {
		return nil, err
	}
	return maskOutputs(data, secret), nil
}

// outputsOf returns the outputs u recorded, each as JSON, and which of them are secret:
// from its status when none is (status.outputs), otherwise from its Secret. Nil data when
// it recorded none: a Secret pruned or deleted by hand, or never written.
func (r *Reconciler) outputsOf(ctx context.Context, u *v1alpha1.Update) (map[string][]byte, map[string]bool, error) {
	if u.Status.OutputsSecretName == "" {
		if u.Status.Outputs == nil {
			return nil, nil, nil
		}
		data := make(map[string][]byte, len(u.Status.Outputs))
		for k, v := range u.Status.Outputs {
			data[k] = v.Raw
		}
		return data, map[string]bool{}, nil
	}
	sec, err := r.getOutputsSecret(ctx, u.Namespace, u.Status.OutputsSecretName)
	if err != nil || sec == nil {
		return nil, nil, err
	}
	return sec.Data, secretOutputNames(sec), nil
}

// describeSource names what resolving the Stack's source fetches, for progress messages.
func describeSource(spec *pulumiv1.StackSpec) string {
	switch spec.SourceKind() {
	case pulumiv1.SourceKindGit:
		if spec.Commit != "" {
			return fmt.Sprintf("commit %s of %s", spec.Commit, spec.ProjectRepo)
		}
		return fmt.Sprintf("branch %s of %s", nonEmpty(spec.Branch, "HEAD"), spec.ProjectRepo)
	case pulumiv1.SourceKindFlux:
		ref := spec.FluxSource.SourceRef
		return fmt.Sprintf("the artifact of %s %s", ref.Kind, ref.Name)
	case pulumiv1.SourceKindProgram:
		return fmt.Sprintf("the artifact of Program %s", spec.ProgramRef.Name)
	case pulumiv1.SourceKindImage:
		return "the program in the workspace image"
	}
	return "the source"
}

// artifactMessage says what the Stack will run.
func artifactMessage(art source.Artifact) string {
	if art.Digest == "" {
		return fmt.Sprintf("revision %s, program at %s in the image", art.Revision, art.Dir)
	}
	return fmt.Sprintf("revision %s, artifact %s", art.Revision, art.Digest)
}

func nonEmpty[T ~string](v, fallback T) T {
	if v == "" {
		return fallback
	}
	return v
}
