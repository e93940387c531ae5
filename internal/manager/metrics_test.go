package manager_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/manager"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// TestManager_Metrics_SeriesAfterAnUpdate scrapes the /metrics endpoint of a real manager
// after one Stack reached Ready and checks Stackwright's series describe that update.
func TestManager_Metrics_SeriesAfterAnUpdate(t *testing.T) {
	g := NewWithT(t)
	bin, err := repo.Bin()
	g.Expect(err).NotTo(HaveOccurred())
	if err := repo.RequireBinaries(bin, "pulumi", "pulumi-language-yaml"); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	opts := manager.DefaultOptions()
	opts.DataDir, opts.PulumiBin = t.TempDir(), bin
	opts.MetricsAddr, opts.ProbeAddr = freeAddr(t), "0"
	opts.WatchNamespaces = []string{ns}
	opts.SeveralPerProcess = true // the package's other tests start managers too
	startManager(t, env.Config, opts)

	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"greeting": {Raw: []byte(`"hello"`)}}
	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
		Spec:       pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "hello"}},
	}
	g.Expect(env.Client.Create(t.Context(), prog)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), stack)).To(Succeed())
	g.Eventually(func(g Gomega) {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(stack), st)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "conditions: %v", st.Status.Conditions)
	}).WithTimeout(3 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())

	want := []string{
		`stackwright_updates_total{namespace="` + ns + `",operation="up",result="succeeded"} 1`,
		`stackwright_update_duration_seconds_count{namespace="` + ns + `",operation="up",result="succeeded"} 1`,
		`stackwright_stacks{namespace="` + ns + `",state="ready"} 1`,
		`stackwright_stacks{namespace="` + ns + `",state="stalled"} 0`,
		`stackwright_stack_last_success_timestamp_seconds{namespace="` + ns + `",stack="hello"} `,
		`stackwright_executor_running_updates{executor="local"} `,
		`stackwright_executor_queued_updates{executor="local"} `,
		`stackwright_engine_cpu_seconds_count{operation="up"} `,
		`stackwright_source_resolve_duration_seconds_count{kind="Program"} `,
	}
	g.Eventually(func(g Gomega) {
		resp, err := http.Get("http://" + opts.MetricsAddr + "/metrics")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		for _, series := range want {
			g.Expect(hasLine(string(body), series)).To(BeTrue(), "no line starting with %s in:\n%s", series, stackwrightLines(string(body)))
		}
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

func hasLine(text, prefix string) bool {
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

func stackwrightLines(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "stackwright_") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// freeAddr is a loopback address with a port nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
