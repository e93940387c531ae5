package stack_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/manager"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// One real manager (controllers, local executor, real pulumi engine) serves every test of
// the package; each test works in its own namespace.
var env *kubetest.Env

// managerDir is the package manager's data directory: a namespace's default backend is
// file://<managerDir>/state/<namespace>.
var managerDir string

func TestMain(m *testing.M) { kubetest.Main(m, &env, installFluxCRDs, kubetest.Manager(setupManager)) }

// installFluxCRDs installs the Flux source CRD fixtures before the manager starts, as in a
// cluster running Flux, so that the Stack controller watches Flux sources.
func installFluxCRDs(e *kubetest.Env) (func(), error) {
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "internal", "source", "flux", "testdata", "crds")
	if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("failed to install Flux CRDs: %w", err)
	}
	return func() {}, nil
}

func setupManager(ctx context.Context, e *kubetest.Env, dir string) (ctrl.Manager, error) {
	bin, err := repo.Bin()
	if err != nil {
		return nil, err
	}
	if err := repo.RequireBinaries(bin, "pulumi", "pulumi-language-yaml", "pulumi-resource-stackwright-testing"); err != nil {
		return nil, err
	}
	mgr, err := e.NewManager(ctrl.Options{})
	if err != nil {
		return nil, err
	}
	opts := manager.DefaultOptions()
	opts.DataDir, opts.PulumiBin = dir, bin
	managerDir = dir
	// Short retries keep failure scenarios to seconds; everything else is the production
	// default (three permanent failures stall a Stack).
	opts.RetryBase = time.Second
	// A run says Running once it has lasted a second, not ten: tests that hold a runner
	// slot with a sleeping run wait for it to read Running.
	opts.ReportRunningAfter = time.Second
	// Every test has a namespace of its own, and the tests trust each other.
	opts.NoTenantIsolation = true
	opts.Now = clock.Now
	opts.GitTransport = trustTestServers()
	announced = kubetest.NewRecorder(e.Client, announcesUpdate)
	opts.WrapRecorder = announced.Wrap
	if err := manager.Setup(ctx, mgr, opts); err != nil {
		return nil, err
	}
	return mgr, nil
}

// scenario is the harness's scenario for one test, spoken of in Stacks by name, with the
// directory the test provider writes the test's files to.
type scenario struct {
	kube  *kubetest.Scenario
	t     *testing.T
	g     Gomega
	ns    string
	files string
}

func newScenario(t *testing.T) *scenario {
	kube := env.Scenario(t)
	return &scenario{kube: kube, t: t, g: NewWithT(t), ns: kube.Namespace, files: t.TempDir()}
}

func (s *scenario) ctx() context.Context { return s.t.Context() }

func (s *scenario) create(obj client.Object) {
	s.t.Helper()
	s.kube.Create(obj)
}

// program returns a Program with the given resources and outputs.
func (s *scenario) program(name string, resources map[string]pulumiv1.Resource, outputs map[string]string) *pulumiv1.Program {
	p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}}
	p.Program.Resources = resources
	if len(outputs) > 0 {
		p.Program.Outputs = map[string]apiextensionsv1.JSON{}
		for k, v := range outputs {
			p.Program.Outputs[k] = jsonValue(v)
		}
	}
	return p
}

// stack returns a Stack on Program program whose test-provider files go to s.files. Each
// Stack has a pulumi stack of its own (named after it): Stacks of one namespace share its
// default backend, and two on one pulumi stack would contend for its lock.
func (s *scenario) stack(name, program string) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec: pulumiv1.StackSpec{
			Stack:             name,
			ProgramRef:        &pulumiv1.ProgramReference{Name: program},
			DestroyOnFinalize: true,
			EnvRefs: map[string]pulumiv1.ResourceRef{
				"STACKWRIGHT_TESTING_ROOT": literal(s.files),
			},
		},
	}
}

// get reads a Stack, failing through g: inside an eventually, pass the poll's Gomega so a
// miss retries instead of failing the test.
func (s *scenario) get(g Gomega, name string) *pulumiv1.Stack {
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: name}}
	g.Expect(s.kube.Get(st)).To(Succeed())
	return st
}

func (s *scenario) eventually(f func(g Gomega)) {
	s.t.Helper()
	s.kube.Eventually(f)
}

// waitCondition waits until the Stack's condition has the given status and reason (any
// reason when reason is "") for its current generation, and returns the Stack.
func (s *scenario) waitCondition(name, typ string, status metav1.ConditionStatus, reason string) *pulumiv1.Stack {
	s.t.Helper()
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: name}}
	s.kube.WaitCondition(st, typ, status, reason)
	return st
}

func (s *scenario) waitReady(name string) *pulumiv1.Stack {
	s.t.Helper()
	st := s.waitCondition(name, pulumiv1.ConditionReady, metav1.ConditionTrue, pulumiv1.ReasonProcessingCompleted)
	s.g.Expect(st.Status.ObservedGeneration).To(Equal(st.Generation))
	return st
}

// waitGone waits until the Stack is deleted (its finalizer released).
func (s *scenario) waitGone(st *pulumiv1.Stack) {
	s.t.Helper()
	s.kube.WaitGone(st)
}

func (s *scenario) updates(stack string) []v1alpha1.Update {
	var list v1alpha1.UpdateList
	if err := env.Client.List(s.ctx(), &list, client.InNamespace(s.ns)); err != nil {
		s.t.Errorf("failed to list Updates: %v", err)
	}
	var out []v1alpha1.Update
	for _, u := range list.Items {
		if u.Spec.StackName == stack {
			out = append(out, u)
		}
	}
	return out
}

func (s *scenario) readFile(rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join(s.files, rel))
	return string(b), err
}

// requireDestroyed fails the test unless the test-provider file rel is gone: the destroy
// removed it.
func (s *scenario) requireDestroyed(rel string) {
	s.t.Helper()
	if _, err := s.readFile(rel); !errors.Is(err, fs.ErrNotExist) {
		s.t.Errorf("%s survived destroy: %v", rel, err)
	}
}

func (s *scenario) patch(obj client.Object, mutate func()) {
	s.t.Helper()
	s.kube.Patch(obj, mutate)
}

func fileResource(path, content string) pulumiv1.Resource {
	return pulumiv1.Resource{
		Type:       "stackwright-testing:index:File",
		Properties: map[string]apiextensionsv1.JSON{"path": jsonValue(path), "content": jsonValue(content)},
	}
}

// randomResource generates a secret string of the given length once.
func randomResource(length int) pulumiv1.Resource {
	return pulumiv1.Resource{Type: "stackwright-testing:index:Random", Properties: map[string]apiextensionsv1.JSON{"length": jsonValue(length)}}
}

// flakyResource fails its first `failures` creates/updates and its first `failDeletes`
// deletes, counting attempts in files under the scenario's directory.
func flakyResource(failures, failDeletes int) pulumiv1.Resource {
	return pulumiv1.Resource{
		Type: "stackwright-testing:index:Flaky",
		Properties: map[string]apiextensionsv1.JSON{
			"failures": jsonValue(failures), "failDeletes": jsonValue(failDeletes), "counterFile": jsonValue("count"),
		},
	}
}

// secretRefOf refers to key of the Secret name.
func secretRefOf(name, key string) pulumiv1.ResourceRef {
	return pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorSecret, ResourceSelector: pulumiv1.ResourceSelector{Secret: &pulumiv1.SecretSelector{Name: name, Key: key}}}
}

func literal(v string) pulumiv1.ResourceRef {
	return pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorLiteral, ResourceSelector: pulumiv1.ResourceSelector{Literal: &pulumiv1.LiteralRef{Value: v}}}
}

func jsonValue(v any) apiextensionsv1.JSON {
	switch x := v.(type) {
	case string:
		return apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", x))}
	default:
		return apiextensionsv1.JSON{Raw: []byte(fmt.Sprint(x))}
	}
}

func secretOf(ns, name string, data map[string]string) *corev1.Secret {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
	return sec
}

// clock is the Stack controller's: the real time, moved forward by the one test running
// alone that needs a schedule to come due without waiting for it.
var clock offsetClock

type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// advance moves the clock forward by d until the test ends. Only a test that does not call
// t.Parallel may: the parallel ones, whose backoffs and windows it would shorten, run only
// after it.
func (c *offsetClock) advance(t *testing.T, d time.Duration) {
	c.offset.Add(int64(d))
	t.Cleanup(func() { c.offset.Add(-int64(d)) })
}

// trustTestServers returns a transport that trusts httptest's TLS servers. They all share
// one certificate, so trusting one lets every test's HTTPS git server be reached.
func trustTestServers() http.RoundTripper {
	probe := httptest.NewTLSServer(http.NotFoundHandler())
	defer probe.Close()
	pool := x509.NewCertPool()
	pool.AddCert(probe.Certificate())
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
}
