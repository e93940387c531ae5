package program_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/controller/program"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// One real manager running the Program controller serves every test of the package; each
// test works in its own namespace.
var (
	env *kubetest.Env
	// store is the package manager's artifact store.
	store *artifact.Store
)

func TestMain(m *testing.M) { kubetest.Main(m, &env, kubetest.Manager(setupManager)) }

// ownManagerLabel marks a Program reconciled by its test's own manager: the package's
// manager does not see it, so two controllers never race on one Program.
const ownManagerLabel = "test.stackwright.dev/own-manager"

func setupManager(_ context.Context, e *kubetest.Env, dir string) (ctrl.Manager, error) {
	announced = kubetest.NewRecorder(e.Client, readySays)
	notOwn, err := labels.Parse("!" + ownManagerLabel)
	if err != nil {
		return nil, fmt.Errorf("failed to parse label selector: %w", err)
	}
	mgr, s, err := newProgramManager(e, dir, cache.Options{ByObject: map[client.Object]cache.ByObject{
		&pulumiv1.Program{}: {Label: notOwn},
	}})
	store = s
	return mgr, err
}

// startOwnManager runs, until the test ends, a manager of the test's own that reconciles
// only the Programs of s's namespace, which must carry ownManagerLabel. It is the exception
// to one manager per package, for a test that needs a store of its own (one it breaks);
// it returns that store.
func startOwnManager(t *testing.T, s *kubetest.Scenario) *artifact.Store {
	t.Helper()
	var own *artifact.Store
	stop, err := env.StartManager(func(_ context.Context, e *kubetest.Env, dir string) (ctrl.Manager, error) {
		mgr, st, err := newProgramManager(e, dir, cache.Options{DefaultNamespaces: map[string]cache.Config{s.Namespace: {}}})
		own = st
		return mgr, err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("failed to stop the test's own manager: %v", err)
		}
	})
	return own
}

// newProgramManager creates a manager running the Program controller, with a store in dir
// and a cache limited by c.
func newProgramManager(e *kubetest.Env, dir string, c cache.Options) (ctrl.Manager, *artifact.Store, error) {
	st, err := artifact.NewStore(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to open artifact store: %w", err)
	}
	mgr, err := e.NewManager(ctrl.Options{Cache: c})
	if err != nil {
		return nil, nil, err
	}
	// A clock that moves a second at each reading: lastUpdateTime has one-second
	// resolution, and a test must see it move without waiting.
	var ticks atomic.Int64
	start := time.Now()
	r := &program.Reconciler{Client: mgr.GetClient(), Store: st, Now: func() time.Time {
		return start.Add(time.Duration(ticks.Add(1)) * time.Second)
	}, Recorder: announced.Wrap(mgr.GetEventRecorder(program.ControllerName))}
	if err := r.SetupWithManager(context.Background(), mgr, controller.Options{}); err != nil {
		return nil, nil, fmt.Errorf("failed to set up Program controller: %w", err)
	}
	return mgr, st, nil
}
