package devenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stackwright/stackwright/internal/manager"
)

// Options configure a development environment.
type Options struct {
	// Bin holds kube-apiserver, etcd, kube-controller-manager, kubectl, pulumi and the
	// plugins.
	Bin string
	// CRDs is the directory of CRD manifests to install.
	CRDs string
	// Kubeconfig is where the admin kubeconfig is written.
	Kubeconfig string
	// Manager configures the manager; its DataDir and PulumiBin are used as given.
	Manager *manager.Options
}

// Run starts the control plane and the manager, writes the kubeconfig, and blocks until ctx
// is done; then it stops the manager, the controller manager, the API server and etcd, in
// that order.
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
	stopGC, err := startGarbageCollector(ctx, o.Bin, o.Kubeconfig)
	if err != nil {
		return err
	}
	defer stopGC()

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

// startGarbageCollector runs kube-controller-manager's garbage collector and namespace
// controller against the control plane: without them an object deleted in the foreground
// (as the Kubernetes provider deletes) keeps its foregroundDeletion finalizer for ever, and
// a deleted namespace never goes. It logs to this process's stderr. The returned function
// stops it.
func startGarbageCollector(ctx context.Context, bin, kubeconfig string) (func(), error) {
	path := filepath.Join(bin, "kube-controller-manager")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("failed to find the controller manager: %w (run `make tools`)", err)
	}
	cmd := exec.CommandContext(ctx, path,
		"--kubeconfig="+kubeconfig,
		"--controllers=garbagecollector,namespace",
		"--leader-elect=false",
		// No endpoint of its own: nothing scrapes or probes it here.
		"--secure-port=0",
	)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start the controller manager: %w", err)
	}
	done := make(chan struct{})
	go func() {
		// Its exit is logged, not fatal: the manager runs on without a garbage collector.
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			ctrl.Log.Error(err, "Controller manager exited")
		}
		close(done)
	}()
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}, nil
}
