package job

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Variables of the Pulumi CLI that steer its plugin downloads.
const (
	envDisableAcquisition = "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"
	envDownloadOverrides  = "PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES"
)

// pulumiPluginSource matches the source the CLI gives a plugin that names no
// pluginDownloadURL (Pulumi's own providers, found on GitHub then get.pulumi.com). A
// plugin with a pluginDownloadURL of its own is fetched from there, with the Pod's own
// egress: the platform's cache only serves what its plugin source has.
const pulumiPluginSource = `^github://api\.github\.com/pulumi/pulumi-[^/]+$`

// pluginProxy is the runner's loopback door to the manager's plugin cache: the CLI
// downloads from a plain URL and cannot present the runner's token, so the runner takes
// its requests on 127.0.0.1 and forwards them, authenticated, to the manager.
type pluginProxy struct {
	srv *http.Server
	url string
}

// startPluginProxy serves on a loopback port until Close. Refusals the manager explains
// are written to log, so that the Update's log says why a download failed (the CLI
// reports only the HTTP status).
func (p *PodRunner) startPluginProxy(ctx context.Context, hc *http.Client, w *Work, log io.Writer) (*pluginProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("failed to listen for plugin downloads: %w", err)
	}
	handler := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		file, ok := strings.CutPrefix(r.URL.Path, "/plugins/")
		if !ok || r.Method != http.MethodGet || file == "" || strings.Contains(file, "/") {
			http.NotFound(rw, r)
			return
		}
		resp, err := p.call(r.Context(), hc, http.MethodGet, w.ManagerURL+pluginsAPIPath+url.PathEscape(file), nil)
		if err != nil {
			fmt.Fprintf(log, "plugin download %s: the manager did not answer: %v\n", file, err)
			http.Error(rw, "manager unreachable", http.StatusBadGateway)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			reason, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
			fmt.Fprintf(log, "plugin download %s: the manager's plugin cache answered %s: %s\n", file, resp.Status, strings.TrimSpace(string(reason)))
			http.Error(rw, resp.Status, resp.StatusCode)
			return
		}
		if resp.ContentLength >= 0 {
			rw.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
		}
		rw.Header().Set("Content-Type", "application/gzip")
		_, _ = io.Copy(rw, resp.Body)
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = srv.Serve(ln) }()
	return &pluginProxy{srv: srv, url: "http://" + ln.Addr().String() + "/plugins"}, nil
}

// Close stops the proxy.
func (x *pluginProxy) Close() { _ = x.srv.Close() }

// downloadEnv is env with the CLI's plugin downloads on and routed through the proxy.
func (x *pluginProxy) downloadEnv(env map[string]string) map[string]string {
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	out[envDisableAcquisition] = "false"
	out[envDownloadOverrides] = pulumiPluginSource + "=" + x.url
	return out
}
