package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stackwright/stackwright/internal/manager"
	"github.com/stackwright/stackwright/internal/version"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "stackwright",
		Short:         "Reconciles Pulumi stacks declared as Kubernetes resources",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newManagerCommand(), newVersionCommand())
	return root
}

func newManagerCommand() *cobra.Command {
	opts := manager.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the controllers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return manager.Run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), opts)
		},
	}
	opts.BindFlags(cmd.Flags())
	return cmd
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
