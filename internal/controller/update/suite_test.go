package update_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/update"
	"github.com/stackwright/stackwright/internal/executor"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// One manager runs the Update controller against a real API server. Its executor records
// what it is handed and gives the verdicts a test sets instead of running engines: what
// runs an Update, and how its runner is judged, are the executors' concern, tested with
// them; this suite is about what the controller hands over and what it marks failed.
var (
	env  *kubetest.Env
	exec = &recordingExecutor{alive: map[string]bool{}, notStarted: map[string]string{}, lost: map[string]executor.Verdict{}, queued: map[string]executor.Position{}}
)

func TestMain(m *testing.M) { kubetest.Main(m, &env, kubetest.Manager(setupManager)) }

func setupManager(ctx context.Context, e *kubetest.Env, _ string) (ctrl.Manager, error) {
	mgr, err := e.NewManager(ctrl.Options{})
	if err != nil {
		return nil, err
	}
	r := &update.Reconciler{Client: mgr.GetClient(), Executor: exec, QueueReportAfter: time.Nanosecond}
	return mgr, r.SetupWithManager(ctx, mgr, controller.Options{})
}

// recordingExecutor records submitted Updates by namespace/name, finds alive the runners
// marked so, never started those given a reason in notStarted, lost as lost says those
// given a verdict there, and lost (RunnerLost) the others.
type recordingExecutor struct {
	mu         sync.Mutex
	submitted  []string
	alive      map[string]bool
	notStarted map[string]string
	lost       map[string]executor.Verdict
	// queued are the positions of the Updates (namespace/name) still queued.
	queued map[string]executor.Position
}

func (e *recordingExecutor) Position(key types.NamespacedName) (executor.Position, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.queued[key.String()]
	return p, ok
}

func (e *recordingExecutor) setQueued(key string, p *executor.Position) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p == nil {
		delete(e.queued, key)
		return
	}
	e.queued[key] = *p
}

func (e *recordingExecutor) Submit(u *v1alpha1.Update) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.submitted = append(e.submitted, u.Namespace+"/"+u.Name)
}

func (e *recordingExecutor) Check(_ context.Context, u *v1alpha1.Update) executor.Verdict {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.alive[u.Status.Runner]:
		return executor.Verdict{}
	case e.notStarted[u.Status.Runner] != "":
		return executor.Verdict{NotStarted: e.notStarted[u.Status.Runner]}
	case e.lost[u.Status.Runner].Lost != "":
		return e.lost[u.Status.Runner]
	}
	return executor.Verdict{Lost: "its runner Job was deleted before it reported a result"}
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
