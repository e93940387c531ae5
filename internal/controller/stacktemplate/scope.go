package stacktemplate

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/kit"
	"github.com/stackwright/stackwright/internal/controller/patch"
)

// scope is what one reconcile of a StackTemplate has learned so far. Each phase reads it
// and adds to it.
type scope struct {
	template *v1alpha1.StackTemplate
	patcher  *patch.Patcher

	// want is the CustomResourceDefinition the template's spec describes.
	want *apiextensionsv1.CustomResourceDefinition
	// crd is the definition as the API server holds it, once applied.
	crd *apiextensionsv1.CustomResourceDefinition

	requeue kit.Requeue
}

// run runs phases in order until one ends the reconcile (see kit.Run).
func (s *scope) run(ctx context.Context, phases ...kit.Phase[*scope]) (ctrl.Result, error) {
	err := kit.Run(ctx, s, phases...)
	return s.requeue.Result(), err
}
