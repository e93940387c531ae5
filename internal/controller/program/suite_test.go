package program

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

// startManager runs a real manager with the Program controller until the test ends, with a
// store of its own. Its cache sees only the given namespaces, so managers of earlier tests'
// Programs never interfere.
func startManager(t *testing.T, namespaces ...string) *artifact.Store {
	t.Helper()
	store, err := artifact.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	nsCache := map[string]cache.Config{}
	for _, ns := range namespaces {
		nsCache[ns] = cache.Config{}
	}
	// Every test builds a controller with the same name in this one process.
	skipNameValidation := true
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: nsCache},
		Controller: config.Controller{SkipNameValidation: &skipNameValidation},
	})
	if err != nil {
		t.Fatalf("failed to create manager: %v", err)
	}
	r := &Reconciler{Client: mgr.GetClient(), Store: store}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("failed to set up controller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager failed: %v", err)
		}
	})
	return store
}

// waitFor polls the Program until ok accepts it.
func waitFor(t *testing.T, key client.ObjectKey, what string, ok func(p *pulumiv1.Program) bool) *pulumiv1.Program {
	t.Helper()
	p := &pulumiv1.Program{}
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		g.Expect(env.Client.Get(context.Background(), key, p)).To(gomega.Succeed())
		g.Expect(ok(p)).To(gomega.BeTrue(), "waiting for %s; status: %+v", what, p.Status)
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(gomega.Succeed())
	return p
}
