package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

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

// Milestones are when a watch first saw each milestone of each run (a Stack's, an
// Update's), keyed by the run.
type Milestones map[string]map[string]time.Time

// Spans returns, for each phase (a pair of milestones), its durations over the given runs
// that have both.
func (m Milestones) Spans(runs []string, phases [][2]string) map[[2]string][]time.Duration {
	out := map[[2]string][]time.Duration{}
	for _, r := range runs {
		seen := m[r]
		for _, p := range phases {
			from, ok1 := seen[p[0]]
			to, ok2 := seen[p[1]]
			if ok1 && ok2 {
				out[p] = append(out[p], to.Sub(from))
			}
		}
	}
	return out
}
