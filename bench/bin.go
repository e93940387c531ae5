package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/internal/scheme"
)

// ClusterClient is a client of the cluster $KUBECONFIG names (the one-node cluster, when
// the make target given as target runs the benchmark), with Stackwright's kinds and room
// for a benchmark's bursts of requests.
func ClusterClient(target string) (client.WithWatch, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig (run with %s): %w", target, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: s})
}

// Bin runs the repository's ./bin/<name> with args, from the repository's root as the
// make targets do, and returns its combined output; a failure's error quotes it.
func Bin(name string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join("bin", name), args...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return b.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, b.String())
	}
	return b.String(), nil
}

// KubectlApply applies the manifests of doc in namespace with ./bin/kubectl.
func KubectlApply(namespace, doc string) (string, error) {
	f, err := os.CreateTemp("", "bench-*.yaml")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if _, err := f.WriteString(doc); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return Bin("kubectl", "apply", "-n", namespace, "-f", f.Name())
}

// Uninstall removes the chart a cluster benchmark installed: the Stacks of ns first, while
// their manager still runs, so that their finalizers are handled (deleting the namespace
// after the uninstall left them stuck), then the release and its namespace.
func Uninstall(ns string) {
	_, _ = Bin("kubectl", "delete", "stacks", "--all", "-n", ns, "--wait", "--timeout=10m")
	_, _ = Bin("helm", "uninstall", "stackwright", "-n", "stackwright-system", "--wait", "--timeout=5m")
	_, _ = Bin("kubectl", "delete", "namespace", "stackwright-system", "--wait", "--timeout=3m")
}
