package engine

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackwright/stackwright/internal/testing/repo"
	"github.com/stackwright/stackwright/internal/testing/s3tenants"
)

// objectStore is a self-managed backend served by an emulator on 127.0.0.1 for one test:
// the backend URL and the credentials a run needs for it, and how the test puts and looks
// for objects in its one bucket, "state", behind the CLI's back.
type objectStore struct {
	backend string
	env     map[string]string
	put     func(t *testing.T, key, content string)
	exists  func(t *testing.T, key string) bool
}

// On s3://, gs:// and azblob:// backends, a lock left by a pulumi killed while creating its
// stack (which `pulumi cancel` cannot clear) is deleted by stackwright-unlock once its holder
// is proven gone, with the run's credentials, and the update goes on; a live holder's lock
// stays. Each backend is a real emulator the real CLI works against.
func TestEngine_Run_StaleLockWithoutStackInObjectStoreIsHealed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, bin string) objectStore
	}{
		{name: "s3", start: startS3},
		{name: "gs", start: startGCS},
		{name: "azblob", start: startAzurite},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, filesProgram)
			if err := repo.RequireBinaries(f.env.Bin, UnlockName); err != nil {
				t.Fatal(err)
			}
			store := tc.start(t, f.env.Bin)
			ctx := testContext(t)
			r := f.request(OpUp)
			r.Env = maps.Clone(r.Env)
			r.Env["PULUMI_BACKEND_URL"] = store.backend
			maps.Copy(r.Env, store.env)
			r.StaleLocalLocks = true
			host, err := os.Hostname()
			if err != nil {
				t.Fatal(err)
			}
			const lock = ".pulumi/locks/organization/enginetest/dev/6f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0.json"
			plant := func(pid int) {
				store.put(t, lock, fmt.Sprintf(`{"pid":%d,"username":"nonroot","hostname":%q,"timestamp":"2026-11-26T10:00:00Z"}`, pid, host))
			}

			plant(os.Getpid())
			if _, err := f.eng.Run(ctx, r); Classify(err) != ClassConflict {
				t.Fatalf("up on the lock of a live local process: Classify(%v) = %q; want Conflict", err, Classify(err))
			}
			if !store.exists(t, lock) {
				t.Fatal("the lock of a live local process was removed")
			}

			plant(1 << 22) // above any pid_max: no process has it
			f.mustRun(ctx, r)
			f.requireContent("a.txt", "hello")
			if store.exists(t, lock) {
				t.Error("the stale lock is still in the backend")
			}
			if !strings.Contains(f.log.String(), "removed 1 stale lock(s) held by process(es) that are gone") {
				t.Errorf("the log does not say the lock was removed:\n%s", f.log)
			}
			if !store.exists(t, ".pulumi/stacks/enginetest/dev.json") {
				t.Error("no stack state in the backend")
			}
		})
	}
}

// A tenant's keys that reach only its own prefix of a bucket (the default backend's shape,
// as docs/operations.md recommends and s3tenants sets up on versitygw) deploy there; the
// same run with them on another tenant's prefix fails with the server's AccessDenied in its
// Message, which is what the Update reports, and as Permanent: retrying cannot help.
func TestEngine_Run_OtherTenantsS3PrefixIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, filesProgram)
	srv := s3tenants.Start(t)
	const bucket = "tenants"
	a, b := s3tenants.NewTenant("team-a"), s3tenants.NewTenant("team-b")
	if err := s3tenants.Setup(t.Context(), srv.Root, bucket, a, b); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	run := func(keys s3tenants.Tenant, prefix string) (Result, error) {
		r := f.request(OpUp)
		r.Env = maps.Clone(r.Env)
		r.Env["PULUMI_BACKEND_URL"] = srv.BackendURL(bucket, prefix)
		r.Env["AWS_ACCESS_KEY_ID"], r.Env["AWS_SECRET_ACCESS_KEY"] = keys.Access, keys.Secret
		return f.eng.Run(ctx, r)
	}

	if _, err := run(b, b.Prefix); err != nil {
		t.Fatalf("team-b on its own prefix: %v\nmessage: %s", err, Message(err))
	}
	_, err := run(a, b.Prefix)
	if err == nil {
		t.Fatal("team-a's keys ran an up on team-b's prefix")
	}
	if msg := Message(err); !strings.Contains(msg, "api error AccessDenied") {
		t.Errorf("Message = %q; want the server's AccessDenied", msg)
	}
	if c := Classify(err); c != ClassPermanent {
		t.Errorf("Classify = %q; want %q", c, ClassPermanent)
	}
}

// serve starts bin with args for the test, and returns once addr accepts connections. Its
// output is shown if the test fails.
func serve(t *testing.T, addr, bin string, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), out.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening on %s after 30 s: %v", filepath.Base(bin), addr, err)
		}
	}
}

// freeAddr is a 127.0.0.1 address no one listens on (for servers that take no port 0).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// startS3 runs versitygw serving a directory (each subdirectory a bucket), where the test
// reads and writes objects as files.
func startS3(t *testing.T, bin string) objectStore {
	const access, secret = "engine-test-access", "engine-test-secret-key"
	if err := repo.RequireBinaries(bin, "versitygw"); err != nil {
		t.Fatal(err)
	}
	addr, dir := freeAddr(t), t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	serve(t, addr, filepath.Join(bin, "versitygw"), "--port", addr, "--access", access, "--secret", secret, "posix", "--nometa", dir)
	file := func(key string) string { return filepath.Join(dir, "state", filepath.FromSlash(key)) }
	return objectStore{
		backend: "s3://state?endpoint=http://" + addr + "&region=us-east-1&use_path_style=true",
		env:     map[string]string{"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret},
		put: func(t *testing.T, key, content string) {
			if err := os.MkdirAll(filepath.Dir(file(key)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file(key), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		exists: func(t *testing.T, key string) bool {
			_, err := os.Stat(file(key))
			return err == nil
		},
	}
}

// startGCS runs fake-gcs-server, in memory, speaking Google Cloud Storage's JSON API
// without authentication; the CLI finds it through STORAGE_EMULATOR_HOST and takes a
// static access token (GOOGLE_OAUTH_ACCESS_TOKEN, which it would send to Google).
func startGCS(t *testing.T, bin string) objectStore {
	if err := repo.RequireBinaries(bin, "fake-gcs-server"); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	serve(t, addr, filepath.Join(bin, "fake-gcs-server"), "-scheme", "http", "-host", host, "-port", port,
		"-backend", "memory", "-public-host", addr, "-external-url", "http://"+addr, "-log-level", "error")
	base := "http://" + addr
	request(t, http.MethodPost, base+"/storage/v1/b?project=engine-test", "application/json", `{"name":"state"}`, nil, http.StatusOK)
	// A backend URL's path is a prefix of every key (here as a team's share of a bucket).
	return objectStore{
		backend: "gs://state/team-a",
		env:     map[string]string{"STORAGE_EMULATOR_HOST": addr, "GOOGLE_OAUTH_ACCESS_TOKEN": "engine-test-token"},
		put: func(t *testing.T, key, content string) {
			request(t, http.MethodPost, base+"/upload/storage/v1/b/state/o?uploadType=media&name="+url.QueryEscape("team-a/"+key), "application/json", content, nil, http.StatusOK)
		},
		exists: func(t *testing.T, key string) bool {
			return request(t, http.MethodGet, base+"/storage/v1/b/state/o/"+url.PathEscape("team-a/"+key), "", "", nil, http.StatusOK, http.StatusNotFound) == http.StatusOK
		},
	}
}

// Azurite's well-known development account.
const (
	azuriteAccount = "devstoreaccount1"
	azuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// startAzurite runs Azurite's Blob service, in memory, with its development account, which
// the CLI reaches with AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY and the URL's localemu,
// domain and protocol parameters.
func startAzurite(t *testing.T, bin string) objectStore {
	azurite := filepath.Join(bin, "azurite", "node_modules", ".bin", "azurite-blob")
	if _, err := os.Stat(azurite); err != nil {
		t.Fatalf("Azurite is not installed (make tools installs it with npm, which needs Node.js): %v", err)
	}
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	serve(t, addr, azurite, "--blobHost", host, "--blobPort", port, "--inMemoryPersistence",
		"--disableTelemetry", "--skipApiVersionCheck", "--loose", "--silent")
	base := "http://" + addr + "/" + azuriteAccount + "/state"
	azureRequest(t, http.MethodPut, base+"?restype=container", "", nil, http.StatusCreated)
	return objectStore{
		backend: "azblob://state?localemu=true&domain=" + addr + "&protocol=http",
		env:     map[string]string{"AZURE_STORAGE_ACCOUNT": azuriteAccount, "AZURE_STORAGE_KEY": azuriteKey},
		put: func(t *testing.T, key, content string) {
			azureRequest(t, http.MethodPut, base+"/"+key, content, map[string]string{"x-ms-blob-type": "BlockBlob"}, http.StatusCreated)
		},
		exists: func(t *testing.T, key string) bool {
			return azureRequest(t, http.MethodHead, base+"/"+key, "", nil, http.StatusOK, http.StatusNotFound) == http.StatusOK
		},
	}
}

// azureRequest sends a request to Azurite signed with its development account's shared
// key, and returns the status, failing the test unless it is one of want.
func azureRequest(t *testing.T, method, target, body string, headers map[string]string, want ...int) int {
	t.Helper()
	h := map[string]string{"x-ms-date": time.Now().UTC().Format(http.TimeFormat), "x-ms-version": "2021-08-06"}
	maps.Copy(h, headers)
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	length := ""
	if body != "" {
		length = fmt.Sprint(len(body))
	}
	// Shared Key's string to sign: the verb, eleven standard headers (all empty here but
	// Content-Length), the x-ms- headers, then the account and path, then the query.
	lines := []string{method, "", "", length, "", "", "", "", "", "", "", ""}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		lines = append(lines, k+":"+h[k])
	}
	resource := "/" + azuriteAccount + u.EscapedPath()
	q := u.Query()
	for _, k := range slices.Sorted(maps.Keys(q)) {
		resource += "\n" + k + ":" + strings.Join(q[k], ",")
	}
	key, err := base64.StdEncoding.DecodeString(azuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(strings.Join(append(lines, resource), "\n")))
	h["Authorization"] = "SharedKey " + azuriteAccount + ":" + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return request(t, method, target, "", body, h, want...)
}

// request sends one request and returns its status, failing the test unless it is one of
// want.
func request(t *testing.T, method, target, contentType, body string, headers map[string]string, want ...int) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if !slices.Contains(want, resp.StatusCode) {
		t.Fatalf("%s %s: %s: %s", method, target, resp.Status, b)
	}
	return resp.StatusCode
}
