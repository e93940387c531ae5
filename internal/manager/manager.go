package manager

import (
	"context"
	"flag"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stackwright/stackwright/internal/scheme"
)

// Options are the manager's command-line settings.
type Options struct {
	MetricsAddr             string
	ProbeAddr               string
	LeaderElection          bool
	LeaderElectionNamespace string
	Zap                     zap.Options
}

// DefaultOptions returns the settings used when no flag is given.
func DefaultOptions() *Options {
	return &Options{MetricsAddr: ":8080", ProbeAddr: ":8081"}
}

// BindFlags registers the options on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "Address the /healthz and /readyz endpoints bind to.")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "Elect a leader so that only one replica reconciles at a time.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the leader election Lease (default: the pod's namespace).")
	zapFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.Zap.BindFlags(zapFlags)
	fs.AddGoFlagSet(zapFlags)
}

// Run starts the manager and blocks until ctx is done.
func Run(ctx context.Context, cfg *rest.Config, o *Options) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.Zap)))
	s, err := scheme.New()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  s,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        "stackwright.dev",
		LeaderElectionNamespace: o.LeaderElectionNamespace,
	})
	if err != nil {
		return fmt.Errorf("failed to create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add ready check: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("failed to run manager: %w", err)
	}
	return nil
}
