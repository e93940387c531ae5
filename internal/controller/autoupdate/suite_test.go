package autoupdate_test

import (
	"context"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/stackwright/stackwright/internal/controller/autoupdate"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// One manager runs the autoupdate controller alone against a real API server: no Stack
// controller runs what it queues, so a request stays as this controller leaves it. The
// Stack controller's part (running requests and recording their results) is tested with
// it, in internal/controller/stack.
var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env, kubetest.Manager(setupManager)) }

func setupManager(ctx context.Context, e *kubetest.Env, _ string) (ctrl.Manager, error) {
	mgr, err := e.NewManager(ctrl.Options{})
	if err != nil {
		return nil, err
	}
	r := &autoupdate.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	return mgr, r.SetupWithManager(ctx, mgr, controller.Options{})
}
