package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// ManagerSetup creates a manager on the control plane and adds what it runs. dir is an
// empty directory of the manager's own (data directory, artifact store), removed once the
// manager has stopped. ctx ends when the manager is stopped, so whatever the setup starts
// beside the manager (a stand-in kubelet, say) can stop with it.
type ManagerSetup func(ctx context.Context, e *Env, dir string) (ctrl.Manager, error)

// Manager returns a Hook that runs setup's manager for the whole package. One manager per
// package, with each test in a namespace of its own (see Scenario), lets the tests run in
// parallel without starting controllers, caches and engines once per test.
func Manager(setup ManagerSetup) Hook {
	return func(e *Env) (func(), error) {
		stop, err := e.StartManager(setup)
		if err != nil {
			return nil, err
		}
		return func() {
			if err := stop(); err != nil {
				fmt.Fprintf(os.Stderr, "kubetest: %v\n", err)
			}
		}, nil
	}
}

// managerStartTimeout: a manager not started after a minute against a local control plane
// is stuck, not slow.
const managerStartTimeout = time.Minute

// StartManager runs setup's manager until stop is called. It returns once the manager's
// caches have synced and its controllers have started, so that a manager that cannot start
// fails here, saying why, instead of leaving every test to time out.
//
// Manager calls it for the package's manager. A test that needs a manager of its own (one
// whose store it breaks, say) calls it too and stops it in t.Cleanup; the two managers'
// caches must then not share objects, or both would reconcile them.
func (e *Env) StartManager(setup ManagerSetup) (stop func() error, err error) {
	dir, err := os.MkdirTemp("", "stackwright-manager-")
	if err != nil {
		return nil, fmt.Errorf("failed to create manager directory: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := setup(ctx, e, dir)
	if err != nil {
		cancel()
		return nil, errors.Join(fmt.Errorf("failed to set up manager: %w", err), os.RemoveAll(dir))
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop = func() error {
		cancel()
		var errs []error
		if err := <-done; err != nil {
			errs = append(errs, fmt.Errorf("failed to run manager: %w", err))
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("failed to remove manager directory: %w", err))
		}
		return errors.Join(errs...)
	}
	timer := time.NewTimer(managerStartTimeout)
	defer timer.Stop()
	select {
	// Closed once the caches have synced and the controllers have started (at once after
	// that without leader election).
	case <-mgr.Elected():
		return stop, nil
	case err := <-done:
		cancel()
		if err == nil {
			err = errors.New("manager stopped before its controllers started")
		}
		return nil, errors.Join(fmt.Errorf("failed to start manager: %w", err), os.RemoveAll(dir))
	case <-timer.C:
		return nil, errors.Join(fmt.Errorf("failed to start manager within %s", managerStartTimeout), stop())
	}
}

// NewManager creates a manager with opts for a test: the control plane's scheme, no
// metrics listener (packages run in parallel and would fight over the port), and
// controller names allowed to repeat, since a test may run a manager of its own beside the
// package's.
func (e *Env) NewManager(opts ctrl.Options) (ctrl.Manager, error) {
	opts.Scheme = e.Scheme
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	severalPerProcess := true
	opts.Controller.SkipNameValidation = &severalPerProcess
	mgr, err := ctrl.NewManager(e.Config, opts)
	if err != nil {
		return nil, fmt.Errorf("failed to create manager: %w", err)
	}
	return mgr, nil
}

// ManagerCache limits a test manager's cache as internal/manager limits the manager's: of
// the Jobs, it holds only those Stackwright labels as its own, and of the
// CustomResourceDefinitions only those a StackTemplate made. A suite whose controller reads
// either through the cache takes it, so that the controller finds there only what it would
// in the manager.
func ManagerCache() cache.Options {
	templated, err := labels.NewRequirement(v1alpha1.TemplateLabel, selection.Exists, nil)
	if err != nil {
		panic(fmt.Sprintf("invalid label key %q: %v", v1alpha1.TemplateLabel, err))
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&batchv1.Job{}: {Label: labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy})},
		&apiextensionsv1.CustomResourceDefinition{}: {Label: labels.NewSelector().Add(*templated)},
	}}
}
