package job

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/internal/engine"
)

// The runner's proxy forwards the CLI's downloads to the manager with the runner's token,
// and writes the manager's reason for a refusal where the Update's log shows it.
func TestPodRunner_PluginProxy_ForwardsWithTokenAndLogsRefusals(t *testing.T) {
	const (
		token = "runner-token"
		file  = "pulumi-resource-kubernetes-v4.25.0-alpha.1+f47bc2d6-linux-amd64.tar.gz"
	)
	var asked []string
	manager := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		asked = append(asked, r.URL.EscapedPath())
		switch strings.TrimPrefix(r.URL.Path, pluginsAPIPath) {
		case file:
			_, _ = w.Write([]byte("tarball"))
		default:
			http.Error(w, "plugin not found at the plugin source: pulumi-resource-kubernetes-v9.9.9-linux-amd64.tar.gz (404 Not Found)", http.StatusNotFound)
		}
	}))
	defer manager.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &PodRunner{TokenFile: tokenFile}
	tail := engine.NewTail(4096)
	proxy, err := p.startPluginProxy(t.Context(), manager.Client(), &Work{ManagerURL: manager.URL}, tail)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(strings.TrimSuffix(proxy.url, "/plugins") + path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// As the CLI asks: the file name query-escaped.
	if code, body := get("/plugins/" + strings.ReplaceAll(file, "+", "%2B")); code != http.StatusOK || body != "tarball" {
		t.Errorf("download = %d %q; want 200 and the manager's file", code, body)
	}
	if code, _ := get("/plugins/pulumi-resource-kubernetes-v9.9.9-linux-amd64.tar.gz"); code != http.StatusNotFound {
		t.Errorf("absent plugin = %d; want the manager's 404", code)
	}
	for _, path := range []string{"/plugins/", "/other/" + file, "/plugins/a/b"} {
		if code, _ := get(path); code != http.StatusNotFound {
			t.Errorf("GET %s = %d; want 404 without asking the manager", path, code)
		}
	}
	want := []string{pluginsAPIPath + file, pluginsAPIPath + "pulumi-resource-kubernetes-v9.9.9-linux-amd64.tar.gz"}
	if diff := cmp.Diff(want, asked); diff != "" {
		t.Errorf("the manager was asked (-want +got):\n%s", diff)
	}
	if !strings.Contains(tail.String(), "the manager's plugin cache answered 404 Not Found: plugin not found at the plugin source") {
		t.Errorf("log = %q; want the manager's reason", tail.String())
	}
	env := proxy.downloadEnv(map[string]string{"PULUMI_SKIP_UPDATE_CHECK": "true"})
	if env[envDisableAcquisition] != "false" || env[envDownloadOverrides] != pulumiPluginSource+"="+proxy.url {
		t.Errorf("download environment = %v", env)
	}
}
