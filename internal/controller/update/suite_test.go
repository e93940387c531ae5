package update_test

import (
	"context"
	"sync"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/update"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// One manager runs the Update controller against a real API server. Its executor records
// what it is handed instead of running engines: what runs an Update is the executors'
// concern, tested with them; this suite is about what the controller hands over and what
// it marks lost.
var (
	env  *kubetest.Env
	exec = &recordingExecutor{alive: map[string]bool{}}
)

func TestMain(m *testing.M) { kubetest.Main(m, &env, kubetest.Manager(setupManager)) }

func setupManager(_ context.Context, e *kubetest.Env, _ string) (ctrl.Manager, error) {
	mgr, err := e.NewManager(ctrl.Options{})
	if err != nil {
		return nil, err
	}
	r := &update.Reconciler{Client: mgr.GetClient(), Executor: exec}
	return mgr, r.SetupWithManager(mgr, controller.Options{})
}

// recordingExecutor records submitted Updates by namespace/name and owns the runners
// marked alive.
type recordingExecutor struct {
	mu        sync.Mutex
	submitted []string
	alive     map[string]bool
}

func (e *recordingExecutor) Submit(u *v1alpha1.Update) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.submitted = append(e.submitted, u.Namespace+"/"+u.Name)
}

func (e *recordingExecutor) Owns(runner string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.alive[runner]
}

func (e *recordingExecutor) wasSubmitted(namespace, name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.submitted {
		if s == namespace+"/"+name {
			return true
		}
	}
	return false
}
