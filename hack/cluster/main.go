package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/stackwright/stackwright/internal/testing/cluster"
)

type images []string

func (i *images) String() string     { return strings.Join(*i, ",") }
func (i *images) Set(v string) error { *i = append(*i, v); return nil }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: stackwright-cluster up|run|load|down|kubeconfig [flags]")
		os.Exit(2)
	}
	o := cluster.DefaultOptions()
	var imgs images
	keep := false
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	fs.StringVar(&o.Bin, "bin", o.Bin, "directory holding the cluster's binaries (make tools-cluster)")
	fs.StringVar(&o.Dir, "dir", o.Dir, "the cluster's state directory")
	fs.StringVar(&o.RunDir, "run-dir", o.RunDir, "the cluster's socket and pid directory (keep it short)")
	fs.StringVar(&o.Node, "node", o.Node, "the node's name")
	fs.IntVar(&o.Volumes, "volumes", o.Volumes, "host-path PersistentVolumes kept available")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long to wait for the cluster to be ready")
	fs.Var(&imgs, "image", "OCI image archive to import at start (repeatable; must include the pause image)")
	fs.BoolVar(&keep, "keep-state", keep, "down: keep the state directory (etcd, volumes, logs)")
	_ = fs.Parse(os.Args[2:])
	o.Images = imgs

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "up":
		err = cluster.Up(ctx, o)
	case "run":
		err = cluster.Run(ctx, o)
	case "load":
		err = cluster.Load(ctx, o, fs.Args()...)
	case "down":
		err = cluster.Down(ctx, o, !keep)
	case "kubeconfig":
		fmt.Println(o.Kubeconfig())
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
