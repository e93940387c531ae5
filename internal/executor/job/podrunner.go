package job

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/inputs"
	"github.com/stackwright/stackwright/internal/memcg"
	"github.com/stackwright/stackwright/internal/runner"
)

// PodRunner performs one Update inside a runner Pod: it fetches the artifact from the
// manager, verifying its digest, runs the engine, and reports the result to the manager.
type PodRunner struct {
	// WorkFile is the mounted Work document.
	WorkFile string
	// TokenFile is the projected token presented to the manager.
	TokenFile string
	// Scratch is the writable directory for the work tree and PULUMI_HOME.
	Scratch string
	// Limits bound the artifact.
	Limits artifact.Limits
	// Env is the engine's base environment (update checks and plugin downloads off).
	Env map[string]string
	// Report bounds how long the result is offered to a manager that does not answer.
	Report time.Duration
	// InheritEnv names variables of the Pod's environment, set by the Stack's
	// workspaceTemplate, that the program sees besides engine.DefaultInheritEnv and the
	// in-cluster API address.
	InheritEnv []string
	// PluginDirs are the plugin bundles mounted into the Pod (PluginsDir/<name>), put
	// ahead of the Pod's PATH for the engine.
	PluginDirs []string
	// PluginDownloads lets the engine download the plugins it lacks, from the manager's
	// plugin cache only.
	PluginDownloads bool
	// Cgroups reads the memory cgroup of the runner's container, whose OOM kills during
	// the run make a failed run OOMKilled; the zero value reads the real one.
	Cgroups memcg.Reader
}

// Run performs the Update. Its error means the result did not reach the manager (the Pod
// then fails, and the manager declares the runner lost); the operation's own failure is
// in the result.
func (p *PodRunner) Run(ctx context.Context) error {
	b, err := os.ReadFile(p.WorkFile)
	if err != nil {
		return fmt.Errorf("failed to read work: %w", err)
	}
	w, err := decodeWork(b)
	if err != nil {
		return fmt.Errorf("failed to decode work: %w", err)
	}
	certPEM, err := os.ReadFile(filepath.Join(filepath.Dir(p.WorkFile), ManagerCertFile))
	if err != nil {
		return fmt.Errorf("failed to read manager certificate: %w", err)
	}
	tlsConfig, err := pinnedTLS(certPEM)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 5 * time.Minute}

	u := &v1alpha1.Update{}
	u.Name, u.Namespace, u.Generation = w.Update, w.Namespace, 0
	tail := engine.NewTail(v1alpha1.MaxLogTailLength)
	oom := p.Cgroups.Watch()
	res, runErr := p.execute(ctx, hc, w, tail)
	if runErr != nil && ctx.Err() == nil {
		// A run cancelled on SIGTERM says Cancelled (the manager names the disruption);
		// one that failed by itself may have failed because a process of it was killed.
		runErr = outOfMemory(oom, runErr)
	}
	runner.Finish(u, res, runErr, tail.String(), time.Now())
	result := &Result{UpdateUID: w.UpdateUID, Status: u.Status}
	if runErr == nil {
		result.Outputs, result.Plan = res.Outputs, res.Plan
		if len(res.Plan) > 0 {
			result.Steps = res.Steps
		}
	}
	fmt.Fprintf(os.Stderr, "update %s/%s: %s: %s\n", w.Namespace, w.Update, u.Status.Phase, u.Status.Message)
	// Everything the run wrote to the Pod's ephemeral storage is still there (artifact,
	// work tree, PULUMI_HOME): what runner Pods' ephemeral-storage limits are sized from.
	fmt.Fprintf(os.Stderr, "%s%d bytes\n", ScratchUsedPrefix, diskUsage(p.Scratch))
	return p.report(context.WithoutCancel(ctx), hc, w, result)
}

// outOfMemory is err, the failure of a run, as OOMKilled when the kernel's OOM killer
// killed processes of the runner's memory cgroup since w started (before the run): the
// engine's own error then only says that a plugin stopped answering.
func outOfMemory(w *memcg.Watch, err error) error {
	kills, m, werr := w.Kills()
	if werr != nil {
		// Not worth failing for: the run's own error still says what the engine saw.
		fmt.Fprintf(os.Stderr, "cannot tell whether the run ran out of memory: %v\n", werr)
		return err
	}
	if kills == 0 {
		return err
	}
	return runner.OOMKilled(err, kills, m.Limit)
}

func (p *PodRunner) execute(ctx context.Context, hc *http.Client, w *Work, tail *engine.Tail) (engine.Result, error) {
	dir, err := p.program(ctx, hc, w)
	if err != nil {
		return engine.Result{}, err
	}
	inherit := append(podInheritEnv(), p.InheritEnv...)
	// One operation per Pod: `pulumi version` would be a process more per update.
	env := p.Env
	if len(p.PluginDirs) > 0 {
		env = maps.Clone(p.Env)
		if env == nil {
			env = map[string]string{}
		}
		env["PATH"] = pluginPath(p.PluginDirs, os.Getenv("PATH"))
	}
	if p.PluginDownloads {
		proxy, err := p.startPluginProxy(ctx, hc, w, tail)
		if err != nil {
			return engine.Result{}, err
		}
		defer proxy.Close()
		env = proxy.downloadEnv(env)
	}
	eng, err := engine.New(engine.Options{PulumiHome: filepath.Join(p.Scratch, "pulumi-home"), Env: env, InheritEnv: inherit, SkipVersionCheck: true})
	if err != nil {
		return engine.Result{}, fault.Stall(v1alpha1.ReasonPermanentFailure, "the runner image has no usable pulumi CLI: %v", err)
	}
	req := w.Request
	// A file:// backend here is a volume of the runner Pod (workspaceTemplate).
	backend := req.Env[inputs.EnvBackendURL]
	if err := runner.EnsureFileBackend(backend); err != nil {
		return engine.Result{}, err
	}
	req.WorkDir, req.Log = dir, tail
	return eng.Run(ctx, req)
}

// podInheritEnv is what a program takes from the runner Pod's environment besides the
// variables its workspaceTemplate sets. The Pod's environment is the Stack's own (its
// ServiceAccount, its workspaceTemplate), but the runner's settings are not the program's
// business.
func podInheritEnv() []string {
	return append(slices.Clone(engine.DefaultInheritEnv), "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
}

// program lays out the Update's program in the scratch work tree and returns its project
// directory: the manager's artifact, fetched and verified, or with no artifact (PKO's
// custom source) the directory baked into this Pod's image.
func (p *PodRunner) program(ctx context.Context, hc *http.Client, w *Work) (string, error) {
	work := filepath.Join(p.Scratch, "work")
	if w.ArtifactDigest == "" {
		if err := copyProgram(w.ProjectDir, work); err != nil {
			return "", fault.Stall(v1alpha1.ReasonPermanentFailure, "%v", err)
		}
		return runner.ProjectDir(work, "", w.Revision)
	}
	store, err := artifact.NewStore(filepath.Join(p.Scratch, "artifacts"))
	if err != nil {
		return "", fmt.Errorf("failed to open artifact store: %w", err)
	}
	if err := p.fetch(ctx, hc, w, store); err != nil {
		return "", err
	}
	if err := store.Extract(w.ArtifactDigest, work, p.Limits); err != nil {
		return "", fmt.Errorf("failed to extract artifact %s: %w", w.ArtifactDigest, err)
	}
	return runner.ProjectDir(work, w.ProjectDir, w.Revision)
}

// fetch downloads the Update's artifact into store, which verifies its digest.
func (p *PodRunner) fetch(ctx context.Context, hc *http.Client, w *Work, store *artifact.Store) error {
	resp, err := p.call(ctx, hc, http.MethodGet, w.ManagerURL+artifactPath+w.ArtifactDigest, nil)
	if err != nil {
		return fault.Retry(v1alpha1.ReasonTransientFailure, "failed to fetch artifact %s: %v", w.ArtifactDigest, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fault.Retry(v1alpha1.ReasonTransientFailure, "failed to fetch artifact %s: manager answered %s", w.ArtifactDigest, resp.Status)
	}
	if err := store.PutVerified(resp.Body, p.Limits.MaxBytes, w.ArtifactDigest); err != nil {
		return fault.Retry(v1alpha1.ReasonTransientFailure, "failed to fetch artifact %s: %v", w.ArtifactDigest, err)
	}
	return nil
}

// report offers the result until the manager records it: a manager restarting meanwhile
// is waited for.
func (p *PodRunner) report(ctx context.Context, hc *http.Client, w *Work, r *Result) error {
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("failed to encode result: %w", err)
	}
	url := w.ManagerURL + resultPath + w.Namespace + "/" + w.Update
	deadline := time.Now().Add(p.Report)
	delay := time.Second
	for {
		resp, err := p.call(ctx, hc, http.MethodPost, url, body)
		if err == nil {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			_ = resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusNoContent:
				return nil
			case resp.StatusCode < 500 && resp.StatusCode != http.StatusUnauthorized:
				// The manager refuses this result for good (the Update is gone, or is not
				// ours): trying again cannot help.
				return fmt.Errorf("manager refused the result: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
			}
			err = fmt.Errorf("manager answered %s", resp.Status)
		}
		if time.Now().Add(delay).After(deadline) {
			return fmt.Errorf("failed to report result: %w", err)
		}
		fmt.Fprintf(os.Stderr, "reporting result: %v; retrying in %s\n", err, delay)
		time.Sleep(delay)
		delay = min(delay*2, 15*time.Second)
	}
}

// call sends an authenticated request; the token is read each time, since the kubelet
// rotates it.
func (p *PodRunner) call(ctx context.Context, hc *http.Client, method, url string, body []byte) (*http.Response, error) {
	token, err := os.ReadFile(p.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("failed to read token: %w", err)
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return hc.Do(req)
}

// ScratchUsedPrefix starts the runner's last log line but one: how many bytes its scratch
// directory holds once the run is over.
const ScratchUsedPrefix = "scratch used: "

// diskUsage is the size of the regular files below dir (0 where it cannot be read).
func diskUsage(dir string) int64 {
	var n int64
	// An entry that cannot be read counts as empty: the figure informs, it decides nothing.
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, walkErr error) error {
		if walkErr == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
