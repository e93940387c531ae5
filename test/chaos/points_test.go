package chaos_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/crashpoint"
)

// quickPoints are the crash points make test runs; make test-chaos (CHAOS_POINTS=all) runs
// every one.
var quickPoints = []string{crashpoint.StackIntentRecorded, crashpoint.EngineUpApplied, crashpoint.StackDestroySucceeded, crashpoint.LocksHealed}

// unreached are the points this life of a Stack cannot reach, and why.
var unreached = map[string]string{
	crashpoint.ArtifactsCollected: "the collector runs every 10 minutes",
}

// arms are the crashes a point needs, in order: some points are reached only after an
// earlier crash left something to recover from.
func arms(point string) []string {
	switch point {
	case crashpoint.UpdateRunnerLostMarked:
		// The first crash leaves an Update bound to the dead manager's runner and still
		// Pending (a bound Update is begun without a write); the next manager claims it,
		// and crashes right after that write, leaving it Running under a dead runner: the
		// one after marks it lost.
		return []string{crashpoint.ExecutorClaimed, crashpoint.ExecutorClaimed, point}
	}
	return []string{point}
}

func pointsFromEnv(t *testing.T) []string {
	switch v := os.Getenv("CHAOS_POINTS"); v {
	case "":
		return quickPoints
	case "all":
		return crashpoint.All
	default:
		points := strings.Split(v, ",")
		for _, p := range points {
			if !slices.Contains(crashpoint.All, p) {
				t.Fatalf("CHAOS_POINTS: unknown point %q; known: %s", p, strings.Join(crashpoint.All, ", "))
			}
		}
		return points
	}
}

// At each named crash point, in turn, the manager SIGKILLs itself (a chaos build armed
// through crashpoint.Env) while one Stack lives its whole life: created under a Policy (so
// each change is previewed with a saved plan and judged), its outputs published, its
// Program changed, then deleted with destroyOnFinalize. After the crash the manager starts
// again, unarmed, and the life must still end as written: both programs applied, in order,
// each exactly once by the backend's history; the Stack and its resources gone after the
// destroy; no lock left; no pulumi process outliving a dead manager.
func TestManager_CrashPoints_EachPointRecovers(t *testing.T) {
	points := pointsFromEnv(t)
	dir := t.TempDir()
	// One kept Update per Stack: pruning happens on every change.
	m := newManager(t, dir, "--update-history", "1")

	var report []string
	for i, point := range points {
		if why, ok := unreached[point]; ok {
			report = append(report, fmt.Sprintf("%-32s not reached: %s", point, why))
			continue
		}
		ok := t.Run(strings.ReplaceAll(point, "/", "-"), func(t *testing.T) {
			report = append(report, crashAt(t, m, point, fmt.Sprintf("p%d", i), filepath.Join(dir, "files", strconv.Itoa(i))))
		})
		if !ok {
			break
		}
	}
	t.Logf("crash points × 1 run each:\n%s", strings.Join(report, "\n"))
}

// crashAt lives one Stack's life with the manager armed at point, and returns a report line.
func crashAt(t *testing.T, m *manager, point, name, files string) string {
	ctx := t.Context()
	ns := env.Namespace(t)
	pending := arms(point)
	var crashes []string
	// step waits for done, restarting the manager (armed with the next pending point, if
	// any) whenever it died at its armed point.
	step := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Minute); !done(); time.Sleep(200 * time.Millisecond) {
			if m.dead() {
				if !strings.Contains(tail(m.logPath, 4096), "crashpoint: SIGKILL at "+m.armed) {
					t.Fatalf("the manager died while %s, not at its armed point %s", what, m.armed)
				}
				crashes = append(crashes, m.armed+" ("+what+")")
				if left := processesUnder(m.dataDir); len(left) > 0 {
					t.Errorf("crash at %s: engine processes %v outlived the manager", m.armed, left)
				}
				m.armed = ""
				if len(pending) > 0 {
					m.armed, pending = pending[0], pending[1:]
				}
				m.start(t)
			}
			if time.Now().After(deadline) {
				t.Fatalf("still not done %s 3 minutes on (crashes so far: %v)", what, crashes)
			}
		}
	}
	// The previous point's manager, unarmed, makes way for an armed one.
	m.stop(t)
	m.armed, pending = pending[0], pending[1:]
	if point == crashpoint.LocksHealed {
		plantStaleLock(t, m.dataDir, ns, name)
	}
	m.start(t)

	create(ctx, t, &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "judge"}, Spec: v1alpha1.PolicySpec{
		Enforcement: v1alpha1.EnforcementAdvisory,
		Rego:        "package judge\n\ndeny contains msg if {\n\tsome step in input.steps\n\tstep.op == \"delete\"\n\tmsg := step.urn\n}\n",
	}})
	prog := program(ns, name)
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"out": jsonValue("${out.path}")}
	create(ctx, t, prog)
	st := m.stack(ns, name, files)
	st.Spec.Stackwright = &pulumiv1.StackwrightSpec{Outputs: &pulumiv1.OutputsExport{ConfigMapName: name + "-outputs"}}
	create(ctx, t, st)
	content := func(want string) func() bool {
		return func() bool {
			got, err := os.ReadFile(filepath.Join(files, "out.txt"))
			return err == nil && string(got) == want && ready(ctx, t, ns, name)
		}
	}
	step("deploying the first program", content(name))
	if point == crashpoint.EngineUpApplied {
		requireRecovered(t, ns)
	}

	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(prog), prog); err != nil {
		t.Fatal(err)
	}
	prog.Program.Resources["out"].Properties["content"] = jsonValue(name + " v2")
	if err := env.Client.Update(ctx, prog); err != nil {
		t.Fatal(err)
	}
	step("deploying the second program", content(name+" v2"))
	runs := succeededUpdates(t, m.dataDir)[name]

	if err := env.Client.Delete(ctx, st); err != nil {
		t.Fatal(err)
	}
	step("destroying", func() bool {
		_, err := os.Stat(filepath.Join(files, "out.txt"))
		return !exists(ctx, t, ns, name) && os.IsNotExist(err)
	})
	// The manager stays up, unarmed, for the next point.
	if m.armed != "" {
		t.Errorf("the life never reached %s (crashes: %v)", m.armed, crashes)
	}
	if locks := lockFiles(t, m.dataDir); slices.ContainsFunc(locks, func(l string) bool { return strings.Contains(l, "/"+ns+"/") }) {
		t.Errorf("locks left in the backend: %v", locks)
	}
	switch {
	case runs < 2:
		t.Errorf("the backend's history has %d succeeded updates of %s; want both programs applied", runs, name)
	case runs > 2:
		t.Errorf("the backend's history has %d succeeded updates of %s; want 2: an update was applied twice", runs, name)
	}
	return fmt.Sprintf("%-32s crashes: %d (%s); updates applied: %d (want 2)", point, len(crashes), strings.Join(crashes, ", "), runs)
}

// requireRecovered checks that an up found the run its lost predecessor completed in the
// backend's history, and that the lost Update's record says so.
func requireRecovered(t *testing.T, ns string) {
	t.Helper()
	var updates v1alpha1.UpdateList
	if err := env.Client.List(t.Context(), &updates, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, u := range updates.Items {
		if u.Status.Recovered == nil {
			continue
		}
		lost := &v1alpha1.Update{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: u.Status.Recovered.Update}, lost); err != nil {
			// Pruned once its retry succeeded (the manager keeps one Update per Stack).
			return
		}
		if c := apimeta.FindStatusCondition(lost.Status.Conditions, v1alpha1.ConditionComplete); lost.Status.Result != v1alpha1.UpdateResultSucceeded || c == nil || c.Reason != v1alpha1.ReasonRecovered {
			t.Errorf("the lost Update %s reads %s, %+v; want succeeded, reason Recovered", lost.Name, lost.Status.Result, c)
		}
		return
	}
	var seen []string
	for _, u := range updates.Items {
		seen = append(seen, fmt.Sprintf("%s (%s, %s): %s", u.Name, u.Spec.Type, u.Status.Result, u.Status.Message))
	}
	t.Errorf("no Update recovered the run that completed before the crash; the namespace's Updates:\n%s", strings.Join(seen, "\n"))
}

// plantStaleLock leaves, in the namespace's default backend, the lock a pulumi of this host
// that died with its manager would leave on the Stack's stack, sidecar and all.
func plantStaleLock(t *testing.T, dataDir, ns, name string) {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	pid := 1 << 22 // above any pid_max: no process has it
	dir := filepath.Join(dataDir, "state", ns, ".pulumi", "locks", "organization", name, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	lock := fmt.Sprintf(`{"pid":%d,"username":"root","hostname":%q,"timestamp":"2026-11-25T00:00:00Z"}`, pid, host)
	path := filepath.Join(dir, "5d6e7f80-1a2b-4c3d-9e8f-0a1b2c3d4e5f.json")
	if err := os.WriteFile(path, []byte(lock), 0o600); err != nil {
		t.Fatal(err)
	}
	// The attributes sidecar gocloud's fileblob writes next to every blob, lock included.
	if err := os.WriteFile(path+".attrs", []byte(`{"user.content_type":"application/json","user.metadata":null}`), 0o600); err != nil {
		t.Fatal(err)
	}
}
