package job_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/executor/job"
)

// pluginSource is a plugin server: it serves one tarball and counts what it is asked.
type pluginSource struct {
	url      string
	requests atomic.Int64
}

// sourcedPlugin is the one file pluginSource has, and its content (gzip magic first, as
// the cache checks).
const sourcedPlugin = "pulumi-resource-kubernetes-v4.25.0-alpha.1768448096+f47bc2d6-linux-amd64.tar.gz"

var sourcedContent = []byte("\x1f\x8b not really a provider")

func startPluginSource(ctx context.Context) *pluginSource {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	s := &pluginSource{url: "http://" + ln.Addr().String()}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if path.Base(r.URL.Path) != sourcedPlugin {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(sourcedContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return s
}

// Only the runner of an Update that is still running downloads through the manager's
// plugin cache, proving who it is with its Pod-bound token (a real TokenReview); the cache
// asks the plugin source once, and refuses what is not a plugin name.
func TestServer_Plugin_RunningUpdatesRunnersDownloadOnce(t *testing.T) {
	s := newScenario(t)
	u, j := s.heldUpdate("downloader")
	if args := j.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--"+job.PluginDownloadsFlag) {
		t.Errorf("runner arguments %q; want --%s on an install with a plugin source", args, job.PluginDownloadsFlag)
	}
	_, token, err := kubelet.startPod(t.Context(), &j)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test checks the server's answers, not its identity
	get := func(file, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, apiURL+"/v1/plugins/"+file, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	type answer struct {
		Code int
		Body string
	}
	var got []answer
	before := plugins.requests.Load()
	for _, file := range []string{sourcedPlugin, sourcedPlugin} {
		code, body := get(file, token)
		got = append(got, answer{code, body})
	}
	if diff := cmp.Diff([]answer{{200, string(sourcedContent)}, {200, string(sourcedContent)}}, got); diff != "" {
		t.Errorf("downloads (-want +got):\n%s", diff)
	}
	if n := plugins.requests.Load() - before; n != 1 {
		t.Errorf("the plugin source was asked %d times; want once", n)
	}
	for _, tc := range []struct {
		file, token string
		want        int
	}{
		{sourcedPlugin, "", http.StatusUnauthorized},
		{sourcedPlugin, "not-a-token", http.StatusUnauthorized},
		{"..%2F..%2Fetc%2Fpasswd", token, http.StatusBadRequest},
		{"pulumi-resource-kubernetes-v9.9.9-linux-amd64.tar.gz", token, http.StatusNotFound},
	} {
		if code, body := get(tc.file, tc.token); code != tc.want {
			t.Errorf("GET %s = %d %q; want %d", tc.file, code, body, tc.want)
		}
	}

	// Its Update over, the same runner gets nothing more.
	finish := u.DeepCopy()
	finish.Status.Phase = v1alpha1.UpdatePhaseFailed
	if err := env.Client.Status().Update(t.Context(), finish); err != nil {
		t.Fatal(err)
	}
	s.Eventually(func(g Gomega) {
		code, _ := get(sourcedPlugin, token)
		g.Expect(code).To(Equal(http.StatusGone))
	})
}
