package devenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stackwright/stackwright/internal/manager"
)

// Options configure a development environment.
type Options struct {
	// Bin holds kube-apiserver, etcd, kubectl, pulumi and the plugins.
	Bin string
	// CRDs is the directory of CRD manifests to install.
	CRDs string
	// Kubeconfig is where the admin kubeconfig is written.
	Kubeconfig string
	// Manager configures the manager; its DataDir and PulumiBin are used as given.
	Manager *manager.Options
}

// Run starts the control plane and the manager, writes the kubeconfig, and blocks until ctx
// is done; then it stops the manager, the API server and etcd, in that order.
func Run(ctx context.Context, o Options) (err error) {
	te := &envtest.Environment{
		BinaryAssetsDirectory: o.Bin,
		CRDDirectoryPaths:     []string{o.CRDs},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := te.Start()
	if err != nil {
		return fmt.Errorf("failed to start control plane from %s: %w", o.Bin, err)
	}
	defer func() {
		if serr := te.Stop(); serr != nil && err == nil {
			err = fmt.Errorf("failed to stop control plane: %w", serr)
		}
	}()
	admin, err := te.AddUser(envtest.User{Name: "stackwright-dev", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("failed to create admin user: %w", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return fmt.Errorf("failed to render kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(o.Kubeconfig), 0o700); err != nil {
		return fmt.Errorf("failed to create kubeconfig directory: %w", err)
	}
	if err := os.WriteFile(o.Kubeconfig, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("failed to write kubeconfig: %w", err)
	}
	defer os.Remove(o.Kubeconfig)

	// manager.New, as in a cluster, so that every manager flag `stackwright dev` accepts
	// (--watch-namespaces, say) takes effect here too.
	mgr, err := manager.New(cfg, o.Manager)
	if err != nil {
		return err
	}
	if err := manager.Setup(ctx, mgr, o.Manager); err != nil {
		return err
	}
	ctrl.Log.Info("Development environment ready", "kubeconfig", o.Kubeconfig, "dataDir", o.Manager.DataDir)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("failed to run manager: %w", err)
	}
	return nil
}
