package kubetest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/stackwright/stackwright/internal/scheme"
	"github.com/stackwright/stackwright/internal/testing/reapertest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// Env is a running control plane shared by the tests of one package.
type Env struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is an uncached client with Stackwright's types registered.
	Client client.Client
	// Scheme holds the built-in and Stackwright types.
	Scheme *runtime.Scheme

	restarts *restarts
}

// Hook starts something on the control plane for the whole package (a manager, say) and
// returns how to stop it.
type Hook func(*Env) (stop func(), err error)

// Main starts the control plane, stores it in *env, runs the hooks, runs the package's
// tests, stops what the hooks started and then the control plane, and exits with the
// tests' code. Call it from TestMain. The engine runs here start their CLI under a reaper
// (reapertest.Install), as the manager's do.
//
// Controller logs are kept in Logs, and printed too when STACKWRIGHT_TEST_LOG=1, which keeps
// `go test` output readable while still letting a failing suite be re-run with logs.
func Main(m *testing.M, env **Env, hooks ...Hook) {
	os.Exit(run(m, env, hooks))
}

// Logs holds everything the package's controllers logged, so tests can assert what never
// appears there (secret values).
var Logs = &syncBuffer{}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything logged so far.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fuzzing reports whether the test binary runs a fuzz target (-test.fuzz), as the
// coordinator or one of its workers.
func fuzzing() bool {
	flag.Parse()
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

func run(m *testing.M, env **Env, hooks []Hook) int {
	var logOut io.Writer = Logs
	if os.Getenv("STACKWRIGHT_TEST_LOG") == "1" {
		logOut = io.MultiWriter(Logs, os.Stderr)
	}
	// Debug level, so that assertions about what is never logged cover every log line.
	logf.SetLogger(zap.New(zap.WriteTo(logOut), zap.UseDevMode(true), zap.Level(zapcore.Level(-2))))

	if fuzzing() {
		// Fuzz targets are pure; a control plane per fuzz worker process would only slow
		// them down.
		return m.Run()
	}
	unreap, err := reapertest.Install()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: %v\n", err)
		return 1
	}
	defer unreap()
	te, e, err := start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: %v\n", err)
		return 1
	}
	*env = e
	code := 1
	var stops []func()
	for _, h := range hooks {
		stop, err := h(e)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: %v\n", err)
			break
		}
		stops = append(stops, stop)
	}
	if len(stops) == len(hooks) {
		code = m.Run()
	}
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	// envtest's Stop finds the processes Restart replaced long gone, and stops the others;
	// a restarted API server must be gone before it, a restarted etcd only after it.
	e.restarts.stop(APIServer)
	if err := te.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: failed to stop control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	e.restarts.stop(Etcd)
	return code
}

func start() (*envtest.Environment, *Env, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin")
	}
	if err := repo.RequireBinaries(assets, "kube-apiserver", "etcd"); err != nil {
		return nil, nil, err
	}
	s, err := scheme.New()
	if err != nil {
		return nil, nil, err
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                s,
	}
	cfg, err := te.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("failed to start control plane from %s: %w", assets, err)
	}
	// The default client-side limits (5 qps) would make envtest suites slower than the
	// server; they exist to protect shared clusters, not a throwaway test API server.
	cfg.QPS, cfg.Burst = 200, 400
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		_ = te.Stop()
		return nil, nil, fmt.Errorf("failed to create client: %w", err)
	}
	return te, &Env{Config: cfg, Client: c, Scheme: s, restarts: &restarts{procs: map[Component]*restarted{}}}, nil
}

// Namespace creates a namespace with a generated name for one test. envtest runs no
// namespace controller, so it is not deleted afterwards; unique names keep tests apart.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("failed to create namespace: %v", err)
	}
	return ns.Name
}
