package manager_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestManager_Metrics_SeriesAfterAnUpdate scrapes the /metrics endpoint of a real manager
// after one Stack reached Ready and checks Stackwright's series describe that update.
func TestManager_Metrics_SeriesAfterAnUpdate(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	opts := testOptions(t)
	opts.MetricsAddr = freeAddr(t)
	opts.WatchNamespaces = []string{ns}
	startManager(t, env.Config, opts)
	waitReady(t, createHello(t, ns, "hello", nil), "the Stack never became Ready")

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
