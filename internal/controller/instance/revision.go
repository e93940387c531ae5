package instance

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// openLatest, as the open-template-revision annotation's value, opens whatever revision is
// the latest.
const openLatest = "latest"

// targetRevision is the template revision the instance's Stack st is to be rendered from:
// the latest, except under the Hold strategy, where a Stack stays at its own revision
// until the open-template-revision annotation on it opens a newer one. A new Stack (no
// resourceVersion) starts at the latest. note says why an annotation was not followed.
func targetRevision(t *v1alpha1.StackTemplate, st *pulumiv1.Stack) (rev int64, note string) {
	latest := t.Status.Revision
	cur := currentRevision(st)
	if cur == 0 || cur >= latest || t.Spec.UpdateStrategy.Type != v1alpha1.UpdateStrategyHold {
		return latest, ""
	}
	open := st.Annotations[v1alpha1.OpenTemplateRevisionAnnotation]
	switch open {
	case "":
		return cur, ""
	case openLatest:
		return latest, ""
	}
	n, err := strconv.ParseInt(open, 10, 64)
	if err != nil || n <= 0 {
		return cur, fmt.Sprintf("%s=%q is neither a revision number nor %q", v1alpha1.OpenTemplateRevisionAnnotation, open, openLatest)
	}
	if n <= cur {
		return cur, ""
	}
	return min(n, latest), ""
}

// revision gets the StackTemplateRevision rev of template t; nil when it does not exist.
func (c *Controller) revision(ctx context.Context, t *v1alpha1.StackTemplate, rev int64) (*v1alpha1.StackTemplateRevision, error) {
	r := &v1alpha1.StackTemplateRevision{}
	name := v1alpha1.RevisionName(t.Name, rev)
	err := c.Client.Get(ctx, client.ObjectKey{Name: name}, r)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("failed to get StackTemplateRevision %s: %w", name, err)
	case r.Spec.Template == t.Name && r.Spec.Revision == rev:
		return r, nil
	}
	return nil, nil
}
