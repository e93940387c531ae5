package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// gitServer serves the repositories below a directory over git's smart HTTP protocol
// with git-http-backend (through net/http/cgi), on 127.0.0.1, counting requests.
type gitServer struct {
	dir      string
	srv      *http.Server
	url      string
	listings atomic.Int64 // GET info/refs?service=git-upload-pack
	fetches  atomic.Int64 // POST git-upload-pack
	other    atomic.Int64
}

func startGitServer(dir string) (*gitServer, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("failed to locate git's exec path: %w", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		return nil, fmt.Errorf("git-http-backend not found: %w", err)
	}
	g := &gitServer{dir: dir}
	h := &cgi.Handler{
		Path: backend,
		Root: "/",
		Env:  []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1"},
	}
	g.srv = &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs"):
				g.listings.Add(1)
			case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
				g.fetches.Add(1)
			default:
				g.other.Add(1)
			}
			h.ServeHTTP(w, r)
		}),
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g.url = "http://" + l.Addr().String()
	go func() { _ = g.srv.Serve(l) }()
	return g, nil
}

func (g *gitServer) counts() [3]int64 {
	return [3]int64{g.listings.Load(), g.fetches.Load(), g.other.Load()}
}

func (g *gitServer) stop() { _ = g.srv.Close() }

// gitRepo is a working copy pushing to a bare repository that the server serves.
type gitRepo struct {
	src, bare string
}

func (r *gitRepo) git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func newGitRepo(root string) (*gitRepo, error) {
	r := &gitRepo{src: filepath.Join(root, "src"), bare: filepath.Join(root, "repos", "fleet.git")}
	for _, d := range []string{r.src, r.bare} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if _, err := r.git(r.bare, "init", "--bare", "--quiet"); err != nil {
		return nil, err
	}
	if _, err := r.git(r.src, "init", "--quiet"); err != nil {
		return nil, err
	}
	return r, nil
}

// commit writes the program for rev, commits, pushes main and returns the commit's SHA.
func (r *gitRepo) commit(rev string) (string, error) {
	if err := os.WriteFile(filepath.Join(r.src, "Pulumi.yaml"), []byte(gitProgram(rev)), 0o644); err != nil {
		return "", err
	}
	for _, args := range [][]string{
		{"add", "Pulumi.yaml"},
		{"commit", "--quiet", "-m", "program " + rev},
		{"push", "--quiet", r.bare, "HEAD:refs/heads/main"},
	} {
		if _, err := r.git(r.src, args...); err != nil {
			return "", err
		}
	}
	return r.git(r.src, "rev-parse", "HEAD")
}

// gitRun is one run of the git scenario, filled in step by step.
type gitRun struct {
	repo *gitRepo
	srv  *gitServer
	url  string
	sha1 string
	// probe is the probe Stack's apply → Ready, cProbe the server's counts after it.
	probe  time.Duration
	cProbe [3]int64
	n      int
	names  []string
	// first and second are the fleet Ready on the first and on the pushed commit; c0, c1
	// and c2 the server's counts before the fleet, after first and after second.
	first, second readiness
	c0, c1, c2    [3]int64
	// The manager's RSS before the fleet, idle on the first commit, idle on the second.
	empty, idle, settled int64
	m                    *measurement
}

// runGit runs the git fleet when the manager serves git Stacks, and says why not otherwise.
func (b *bench) runGit(ctx context.Context) error {
	r, err := b.gitRepo()
	if err != nil {
		return err
	}
	srv, err := startGitServer(filepath.Join(b.work, "git", "repos"))
	if err != nil {
		b.rep.add("Git fleet (skipped)", "Could not serve a repository: "+err.Error())
		return nil
	}
	defer srv.stop()
	r.srv, r.url = srv, srv.url+"/fleet.git"
	if ok, err := b.probeGit(ctx, r); !ok || err != nil {
		return err
	}
	if err := b.deployGit(ctx, r); err != nil {
		return err
	}
	// The idle figure: the fleet Ready, nothing to do, the first burst's garbage collected
	// and returned to the OS as the Go runtime does by itself.
	if r.idle, err = b.settledRSS(ctx, "git: all Ready"); err != nil {
		return err
	}
	if err := b.pushGit(ctx, r); err != nil {
		return err
	}
	if r.settled, err = b.settledRSS(ctx, "git: all Ready on the pushed commit"); err != nil {
		return err
	}
	b.rep.add(fmt.Sprintf("Git fleet (N=%d)", r.n), b.gitReport(r))
	return nil
}

// gitRepo makes the repository the git fleet tracks, with its first commit.
func (b *bench) gitRepo() (*gitRun, error) {
	root := filepath.Join(b.work, "git")
	repo, err := newGitRepo(root)
	if err != nil {
		return nil, err
	}
	r := &gitRun{repo: repo, n: b.cfg.GitN, names: numbered("git", b.cfg.GitN)}
	if r.sha1, err = repo.commit("v1"); err != nil {
		return nil, err
	}
	return r, nil
}

// probeGit applies one git Stack to see whether this manager serves git Stacks at all;
// if not, the report says so and the scenario is skipped.
func (b *bench) probeGit(ctx context.Context, r *gitRun) (bool, error) {
	probe := gitStack(nsGit, "git-probe", "probe", r.url, "main", filepath.Join(b.work, "files", nsGit, "probe"), b.cfg.GitResync)
	t0 := time.Now()
	if err := b.cluster.client.Create(ctx, probe); err != nil {
		return false, fmt.Errorf("failed to create git probe Stack: %w", err)
	}
	st, ok := b.track.waitStack(ctx, nsGit, probe.Name, 5*time.Minute, func(s *pulumiv1.Stack) bool {
		return isReady(s) || apimeta.IsStatusConditionTrue(s.Status.Conditions, pulumiv1.ConditionStalled)
	})
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if !ok || !isReady(st) {
		verdict := "did not become Ready within 5 minutes"
		if st != nil && apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionStalled) {
			verdict = "stalled"
		}
		b.rep.add("Git fleet (skipped)", fmt.Sprintf("A probe Stack (`projectRepo: %s`, `branch: main`) %s, so this manager does not "+
			"(yet) serve git Stacks and the git fleet was not run. Its state: %s. Requests at the git server: %s.\n",
			r.url, verdict, describeStack(st), countString(r.srv.counts())))
		return false, nil
	}
	r.probe = time.Since(t0)
	r.cProbe = r.srv.counts()
	b.say("git: the manager serves git Stacks (probe Ready after %s); running the git fleet of %d", secs(r.probe), r.n)
	return true, nil
}

// deployGit creates the git fleet at once and waits until all are Ready on the first commit.
func (b *bench) deployGit(ctx context.Context, r *gitRun) error {
	r.c0 = r.srv.counts()
	r.empty = b.rss()
	keys := keysOf(nsGit, r.names)
	start, _, err := b.createFleet(ctx, keys, func(ns, name string) error {
		return b.cluster.client.Create(ctx, gitStack(ns, name, name, r.url, "main", filepath.Join(b.work, "files", ns, name), b.cfg.GitResync))
	})
	if err != nil {
		return err
	}
	r.first = b.waitReady(ctx, keys, r.sha1[:12], start, b.fleetTimeout(r.n, b.floorMedian()), func(ready int) {
		b.say("git: %d/%d Ready on the first commit after %s; server %s", ready, r.n, secs(time.Since(start)), countString(r.srv.counts()))
	})
	r.c1 = r.srv.counts()
	return ctx.Err()
}

// pushGit pushes one commit, which every Stack must notice and deploy, and waits until all
// are Ready on it, measuring the manager meanwhile.
func (b *bench) pushGit(ctx context.Context, r *gitRun) error {
	r.m = b.measure(ctx)
	defer r.m.release()
	sha2, err := r.repo.commit("v2")
	if err != nil {
		return err
	}
	pushed := time.Now()
	b.say("git: pushed %s", sha2[:12])
	r.second = b.waitReady(ctx, keysOf(nsGit, r.names), sha2[:12], pushed, b.fleetTimeout(r.n, b.floorMedian()), func(ready int) {
		b.say("git: %d/%d Ready on the pushed commit after %s; server %s", ready, r.n, secs(time.Since(pushed)), countString(r.srv.counts()))
	})
	r.m.end(ctx)
	r.c2 = r.srv.counts()
	return ctx.Err()
}

// settledRSS leaves the manager alone for GitSettle and reads its RSS.
func (b *bench) settledRSS(ctx context.Context, what string) (int64, error) {
	b.say("%s; leaving the fleet alone for %s before reading the manager's RSS", what, b.cfg.GitSettle)
	if err := waitReporting(ctx, b.cfg.GitSettle, b.sayRSS); err != nil {
		return 0, err
	}
	return b.rss(), nil
}

// gitReport renders the scenario's section.
func (b *bench) gitReport(r *gitRun) string {
	n := r.n
	rt := Summarize(r.second.sinceStart)
	runs, runPhases := b.track.updatesSince(nsGit, r.second.start)
	resync := "product default"
	if b.cfg.GitResync > 0 {
		resync = fmt.Sprintf("%d s", b.cfg.GitResync)
	}
	ideal := time.Duration(n) * b.floorMedian() / time.Duration(b.cfg.Parallelism)
	rows := [][]string{
		{"Stacks on one branch of one repository", fmt.Sprint(n)},
		{"resyncFrequencySeconds", resync},
		{"probe Stack apply → Ready", secs(r.probe)},
		{"probe: ref listings / fetches / other requests at the server", countString(r.cProbe)},
		{"first commit: start → all Ready", fmt.Sprintf("%s (%d/%d)", secs(r.first.wall), r.first.ready, n)},
		{"first commit: ref listings / fetches / other requests at the server", countString(sub(r.c1, r.c0))},
		{"push → all Ready on the new commit", fmt.Sprintf("%s (%d/%d)", secs(rt.Max), r.second.ready, n)},
		{"push → first Stack Ready (poll delay + one run)", secs(rt.Min)},
		{"push → Ready: p50 / p90 / p99", fmt.Sprintf("%s / %s / %s", secs(rt.P50), secs(rt.P90), secs(rt.P99))},
		{"ideal after the push: N × floor median (CLI first update) / parallelism", secs(ideal)},
		{"push → all Ready / ideal", ratio(Ratio(rt.Max, ideal))},
		{"engine runs started after the push (Updates)", fmt.Sprintf("%d (%s)", runs, mapString(runPhases))},
		{"after the push: ref listings / fetches / other requests", countString(sub(r.c2, r.c1))},
	}
	rows = append(rows, r.m.costRows()...)
	settle := secs(b.cfg.GitSettle)
	rows = append(rows,
		[]string{"manager RSS before the git fleet was created", MiB(r.empty)},
		[]string{"manager RSS idle: all Ready on the first commit, " + settle + " later", MiB(r.idle)},
		[]string{"manager peak RSS from the push to all Ready (sampled 1/s)", MiB(r.m.peakRSS())},
		[]string{"manager RSS idle again: all Ready on the pushed commit, " + settle + " later", MiB(r.settled)},
		[]string{"RSS idle again / RSS idle", ratio(float64(r.settled) / float64(max(r.idle, 1)))},
	)
	body := "N Stacks track `main` of one local repository served over smart HTTP by git-http-backend (net/http/cgi, " +
		"127.0.0.1); after all are Ready on the first commit, one commit is pushed.\n\n" + table([]string{"git fleet", ""}, rows)
	if !r.second.all() {
		body += "\n" + b.notReady(nsGit, r.names, "")
	}
	return body
}

func sub(a, b [3]int64) [3]int64 { return [3]int64{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }

func countString(c [3]int64) string {
	return fmt.Sprintf("%d ref listings, %d fetches, %d other", c[0], c[1], c[2])
}
