package stacktemplate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/stackwright/stackwright/internal/controller/stacktemplate"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// One real manager running the StackTemplate controller alone serves every test of the
// package; the instance controller is stood in for by served, which records what the
// controller asks of it. Templates are cluster-scoped: each test names its own, and its
// kind's plural, after itself.
var (
	env    *kubetest.Env
	served = &server{serving: map[schema.GroupVersionKind]string{}, forgotten: map[schema.GroupVersionKind]bool{}}
)

// group is the one API group the package's manager serves templates of.
const group = "templates.test.stackwright.dev"

func TestMain(m *testing.M) { kubetest.Main(m, &env, kubetest.Manager(setupManager)) }

func setupManager(_ context.Context, e *kubetest.Env, _ string) (ctrl.Manager, error) {
	// As in the manager: only the definitions templates made are cached.
	mgr, err := e.NewManager(ctrl.Options{Cache: kubetest.ManagerCache()})
	if err != nil {
		return nil, err
	}
	r := &stacktemplate.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), AllowedGroups: []string{group}, Instances: served,
		ObjectKinds: []schema.GroupKind{{Kind: "ConfigMap"}, {Group: "networking.k8s.io", Kind: "NetworkPolicy"}}}
	if err := r.SetupWithManager(context.Background(), mgr, controller.Options{}); err != nil {
		return nil, fmt.Errorf("failed to set up StackTemplate controller: %w", err)
	}
	return mgr, nil
}

// server is a stacktemplate.Server that records the kinds it was asked to serve and to
// forget.
type server struct {
	mu        sync.Mutex
	serving   map[schema.GroupVersionKind]string
	forgotten map[schema.GroupVersionKind]bool
}

var _ stacktemplate.Server = (*server)(nil)

func (s *server) Serve(_ context.Context, template string, gvk schema.GroupVersionKind) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serving[gvk] = template
	return nil
}

func (s *server) Forget(_ context.Context, gvk schema.GroupVersionKind) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgotten[gvk] = true
	return nil
}

// state says which template gvk is served for ("" for none) and whether it was forgotten.
func (s *server) state(gvk schema.GroupVersionKind) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serving[gvk], s.forgotten[gvk]
}
