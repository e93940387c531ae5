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

// runGit runs the git fleet when the manager serves git Stacks, and says why not otherwise.
func (b *bench) runGit(ctx context.Context) error {
	root := filepath.Join(b.work, "git")
	repo, err := newGitRepo(root)
	if err != nil {
		return err
	}
	sha1, err := repo.commit("v1")
	if err != nil {
		return err
	}
	srv, err := startGitServer(filepath.Join(root, "repos"))
	if err != nil {
		b.rep.add("Git fleet (skipped)", "Could not serve a repository: "+err.Error())
		return nil
	}
	defer srv.stop()
	url := srv.url + "/fleet.git"

	// Does this manager serve git Stacks at all? Apply one and see.
	probe := gitStack(nsGit, "git-probe", "probe", url, "main", filepath.Join(b.work, "files", nsGit, "probe"), b.cfg.GitResync)
	t0 := time.Now()
	if err := b.cluster.client.Create(ctx, probe); err != nil {
		return fmt.Errorf("failed to create git probe Stack: %w", err)
	}
	st, ok := b.track.waitStack(ctx, nsGit, probe.Name, 5*time.Minute, func(s *pulumiv1.Stack) bool {
		return isReady(s) || apimeta.IsStatusConditionTrue(s.Status.Conditions, pulumiv1.ConditionStalled)
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !ok || !isReady(st) {
		verdict := "did not become Ready within 5 minutes"
		if st != nil && apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionStalled) {
			verdict = "stalled"
		}
		b.rep.add("Git fleet (skipped)", fmt.Sprintf("A probe Stack (`projectRepo: %s`, `branch: main`) %s, so this manager does not "+
			"(yet) serve git Stacks and the git fleet was not run. Its state: %s. Requests at the git server: %s.\n",
			url, verdict, describeStack(st), countString(srv.counts())))
		return nil
	}
	probeLatency := time.Since(t0)
	cProbe := srv.counts()
	b.say("git: the manager serves git Stacks (probe Ready after %s); running the git fleet of %d", secs(probeLatency), b.cfg.GitN)

	n, par := b.cfg.GitN, b.cfg.Parallelism
	floor := b.floorMedian()
	timeout := b.cfg.FleetTimeout
	if timeout == 0 {
		timeout = 4*time.Duration(n)*max(floor, 5*time.Second)/time.Duration(par) + 5*time.Minute
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("git-%05d", i)
	}
	c0 := srv.counts()
	empty := b.rss()
	start := time.Now()
	if err := b.forAll(ctx, "create", names, func(name string) error {
		return b.cluster.client.Create(ctx, gitStack(nsGit, name, name, url, "main", filepath.Join(b.work, "files", nsGit, name), b.cfg.GitResync))
	}); err != nil {
		return err
	}
	ready1 := b.track.waitReady(ctx, nsGit, names, sha1[:12], timeout, 30*time.Second, func(ready int) {
		b.say("git: %d/%d Ready on the first commit after %s; server %s", ready, n, secs(time.Since(start)), countString(srv.counts()))
	})
	first := time.Since(start)
	c1 := srv.counts()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// The idle figure: the fleet Ready, nothing to do, the first burst's garbage collected
	// and returned to the OS as the Go runtime does by itself.
	b.say("git: all Ready; leaving the fleet alone for %s before reading the manager's RSS", b.cfg.GitSettle)
	if err := waitReporting(ctx, b.cfg.GitSettle, b.sayRSS); err != nil {
		return err
	}
	idle := b.rss()

	// One push; every Stack must notice it and deploy it.
	before := b.snap(ctx)
	peakRSS := b.sampleRSS(ctx)
	sha2, err := repo.commit("v2")
	if err != nil {
		return err
	}
	pushed := time.Now()
	b.say("git: pushed %s", sha2[:12])
	ready2 := b.track.waitReady(ctx, nsGit, names, sha2[:12], timeout, 30*time.Second, func(ready int) {
		b.say("git: %d/%d Ready on the pushed commit after %s; server %s", ready, n, secs(time.Since(pushed)), countString(srv.counts()))
	})
	after := b.snap(ctx)
	peak := peakRSS()
	c2 := srv.counts()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	b.say("git: all Ready on the pushed commit; leaving the fleet alone for %s before reading the manager's RSS", b.cfg.GitSettle)
	if err := waitReporting(ctx, b.cfg.GitSettle, b.sayRSS); err != nil {
		return err
	}
	settled := b.rss()
	var times []time.Duration
	for _, name := range names {
		if at, ok := b.track.readyAt(nsGit, name, sha2[:12]); ok {
			times = append(times, at.Sub(pushed))
		}
	}
	rt := Summarize(times)
	runs, runPhases := b.track.updatesSince(nsGit, pushed)
	resync := "product default"
	if b.cfg.GitResync > 0 {
		resync = fmt.Sprintf("%d s", b.cfg.GitResync)
	}
	ideal := time.Duration(n) * floor / time.Duration(par)
	rows := [][]string{
		{"Stacks on one branch of one repository", fmt.Sprint(n)},
		{"resyncFrequencySeconds", resync},
		{"probe Stack apply → Ready", secs(probeLatency)},
		{"probe: ref listings / fetches / other requests at the server", countString(cProbe)},
		{"first commit: start → all Ready", fmt.Sprintf("%s (%d/%d)", secs(first), ready1, n)},
		{"first commit: ref listings / fetches / other requests at the server", countString(sub(c1, c0))},
		{"push → all Ready on the new commit", fmt.Sprintf("%s (%d/%d)", secs(rt.Max), ready2, n)},
		{"push → first Stack Ready (poll delay + one run)", secs(rt.Min)},
		{"push → Ready: p50 / p90 / p99", fmt.Sprintf("%s / %s / %s", secs(rt.P50), secs(rt.P90), secs(rt.P99))},
		{"ideal after the push: N × floor median (CLI first update) / parallelism", secs(ideal)},
		{"push → all Ready / ideal", ratio(Ratio(rt.Max, ideal))},
		{"engine runs started after the push (Updates)", fmt.Sprintf("%d (%s)", runs, mapString(runPhases))},
		{"after the push: ref listings / fetches / other requests", countString(sub(c2, c1))},
	}
	rows = append(rows, costRows(before, after)...)
	settle := secs(b.cfg.GitSettle)
	rows = append(rows,
		[]string{"manager RSS before the git fleet was created", MiB(empty)},
		[]string{"manager RSS idle: all Ready on the first commit, " + settle + " later", MiB(idle)},
		[]string{"manager peak RSS from the push to all Ready (sampled 1/s)", MiB(max(peak, after.mgr.RSS))},
		[]string{"manager RSS idle again: all Ready on the pushed commit, " + settle + " later", MiB(settled)},
		[]string{"RSS idle again / RSS idle", ratio(float64(settled) / float64(max(idle, 1)))},
	)
	body := "N Stacks track `main` of one local repository served over smart HTTP by git-http-backend (net/http/cgi, " +
		"127.0.0.1); after all are Ready on the first commit, one commit is pushed.\n\n" + table([]string{"git fleet", ""}, rows)
	if ready2 < n {
		body += "\n" + b.notReady(nsGit, names, "")
	}
	b.rep.add(fmt.Sprintf("Git fleet (N=%d)", n), body)
	return nil
}

func sub(a, b [3]int64) [3]int64 { return [3]int64{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }

func countString(c [3]int64) string {
	return fmt.Sprintf("%d ref listings, %d fetches, %d other", c[0], c[1], c[2])
}
