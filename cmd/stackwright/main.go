package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/devenv"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/executor/job"
	"github.com/stackwright/stackwright/internal/manager"
	"github.com/stackwright/stackwright/internal/reaper"
	"github.com/stackwright/stackwright/internal/version"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

// locateReaper has the engine start every pulumi CLI under the reaper installed next to
// this binary; the commands that run the engine call it.
func locateReaper() {
	if _, err := reaper.Locate(); err != nil {
		fmt.Fprintf(os.Stderr, "warning: %v: pulumi plugins of a run cancelled hard, or of a manager or runner killed, may keep running\n", err)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "stackwright",
		Short:         "Reconciles Pulumi stacks declared as Kubernetes resources",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newManagerCommand(), newDevCommand(), newRunnerCommand(), newInstallRunnerCommand(), newVersionCommand())
	return root
}

func newManagerCommand() *cobra.Command {
	opts := manager.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the controllers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("failed to load kubeconfig: %w", err)
			}
			locateReaper()
			return manager.Run(ctrl.SetupSignalHandler(), cfg, opts)
		},
	}
	opts.BindFlags(cmd.Flags())
	return cmd
}

func newDevCommand() *cobra.Command {
	opts := manager.DefaultOptions()
	opts.DataDir, opts.MetricsAddr, opts.ProbeAddr = ".demo/data", "0", "0"
	// The local executor serves one namespace unless --no-tenant-isolation says otherwise.
	opts.WatchNamespaces = []string{"default"}
	dev := devenv.Options{Bin: "bin", CRDs: "config/crd/bases", Kubeconfig: ".demo/kubeconfig", Manager: opts}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local control plane with the CRDs and the manager (local executor) in one process",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts.Zap)))
			bin, err := filepath.Abs(dev.Bin)
			if err != nil {
				return err
			}
			dev.Bin = bin
			locateReaper()
			if opts.PulumiBin == "" {
				opts.PulumiBin = bin
			}
			return devenv.Run(ctrl.SetupSignalHandler(), dev)
		},
	}
	opts.BindFlags(cmd.Flags())
	cmd.Flags().StringVar(&dev.Bin, "bin", dev.Bin, "Directory holding kube-apiserver, etcd, kubectl, pulumi and the plugins (make tools builds it).")
	cmd.Flags().StringVar(&dev.CRDs, "crds", dev.CRDs, "Directory of CRD manifests to install.")
	cmd.Flags().StringVar(&dev.Kubeconfig, "kubeconfig-out", dev.Kubeconfig, "Where to write the admin kubeconfig for kubectl.")
	return cmd
}

func newRunnerCommand() *cobra.Command {
	r := &job.PodRunner{
		WorkFile:  filepath.Join(job.WorkDir, job.WorkFile),
		TokenFile: filepath.Join(job.TokenDir, job.TokenFile),
		Scratch:   job.ScratchDir,
		Report:    10 * time.Minute,
		Env:       engine.BaseEnv(),
	}
	var maxBytes int64 = 100 << 20
	cmd := &cobra.Command{
		Use:   "runner",
		Short: "Run one Update in a runner Pod (started by the job executor)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r.Limits = artifact.Limits{MaxBytes: maxBytes}
			locateReaper()
			return r.Run(ctrl.SetupSignalHandler())
		},
	}
	cmd.Flags().StringVar(&r.WorkFile, "work", r.WorkFile, "The Update's work document (mounted from its work Secret).")
	cmd.Flags().StringVar(&r.TokenFile, "token", r.TokenFile, "The projected ServiceAccount token presented to the manager.")
	cmd.Flags().StringVar(&r.Scratch, "scratch", r.Scratch, "Writable directory for the work tree and PULUMI_HOME.")
	cmd.Flags().DurationVar(&r.Report, "report-timeout", r.Report, "How long to keep offering the result to a manager that does not answer.")
	cmd.Flags().StringArrayVar(&r.PluginDirs, "plugin-dir", nil, "A plugin bundle mounted into the Pod (repeatable): it and its subdirectories holding pulumi-* plugins go ahead of PATH for the engine.")
	cmd.Flags().BoolVar(&r.PluginDownloads, job.PluginDownloadsFlag, false, "Let the engine download the plugins it lacks, through the manager's plugin cache only (set by a manager with --plugin-download-url).")
	cmd.Flags().StringSliceVar(&r.InheritEnv, "inherit-env", nil, "Variables of the Pod's environment the program sees besides PATH, HOME, TMPDIR, SSL_CERT_FILE and SSL_CERT_DIR.")
	cmd.Flags().Int64Var(&maxBytes, "max-artifact-bytes", maxBytes, "Largest artifact accepted, in bytes (compressed and extracted).")
	return cmd
}

func newInstallRunnerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "install-runner DEST",
		Short: "Copy this binary to DEST (the init container of runner Pods that run a Stack's own image)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			locateReaper()
			return job.InstallBinary(args[0])
		},
	}
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.Version)
		},
	}
}
