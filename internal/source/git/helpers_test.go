package git

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/source"
)

const testNamespace = "team"

// sshServer is an SSH server on 127.0.0.1 that accepts one public key and runs the real
// git-upload-pack for exec requests, the way git hosts do.
type sshServer struct {
	addr    string
	hostKey gossh.PublicKey
	execs   atomic.Int64
	// sent counts what endless advertisements wrote.
	sent atomic.Int64
}

func newSSHServer(t *testing.T, root string, allowed gossh.PublicKey) *sshServer {
	t.Helper()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostSigner, err := gossh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &gossh.ServerConfig{
		PublicKeyCallback: func(_ gossh.ConnMetadata, key gossh.PublicKey) (*gossh.Permissions, error) {
			if bytes.Equal(key.Marshal(), allowed.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("unknown public key")
		},
	}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &sshServer{addr: ln.Addr().String(), hostKey: hostSigner.PublicKey()}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serve(conn, cfg, root)
			}()
		}
	}()
	return s
}

func (s *sshServer) serve(conn net.Conn, cfg *gossh.ServerConfig, root string) {
	defer conn.Close()
	sc, chans, reqs, err := gossh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go gossh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(gossh.UnknownChannelType, "only sessions")
			continue
		}
		ch, requests, err := nc.Accept()
		if err != nil {
			return
		}
		go s.session(ch, requests, root)
	}
}

func (s *sshServer) session(ch gossh.Channel, requests <-chan *gossh.Request, root string) {
	defer ch.Close()
	for req := range requests {
		if req.Type != "exec" {
			_ = req.Reply(false, nil)
			continue
		}
		if len(req.Payload) < 4 {
			_ = req.Reply(false, nil)
			return
		}
		command := string(req.Payload[4:])
		repo, ok := strings.CutPrefix(command, "git-upload-pack ")
		if !ok {
			_ = req.Reply(false, nil)
			return
		}
		repo = filepath.Join(root, filepath.Clean("/"+strings.Trim(repo, "'")))
		_ = req.Reply(true, nil)
		s.execs.Add(1)
		if filepath.Base(repo) == endlessRepo {
			s.sent.Add(advertiseForever(ch))
			return
		}
		cmd := exec.Command("git-upload-pack", repo)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return
		}
		cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
		status := uint32(0)
		if err := cmd.Start(); err != nil {
			status = 127
		} else {
			go func() {
				_, _ = io.Copy(stdin, ch)
				_ = stdin.Close()
			}()
			if err := cmd.Wait(); err != nil {
				status = 1
			}
		}
		var payload [4]byte
		binary.BigEndian.PutUint32(payload[:], status)
		_, _ = ch.SendRequest("exit-status", false, payload[:])
		return
	}
}

// sshKey returns a new client key as PEM (encrypted when passphrase is set) and its public
// half.
func sshKey(t *testing.T, passphrase string) ([]byte, gossh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = gossh.MarshalPrivateKey(priv, "test")
	} else {
		block, err = gossh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := gossh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block), sshPub
}

// knownHostsLine is the known_hosts entry of key for the server at addr.
func knownHostsLine(addr string, key gossh.PublicKey) string {
	return knownhosts.Line([]string{knownhosts.Normalize(addr)}, key) + "\n"
}

// fakeClock is a settable clock for listing ages.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is a Resolver over a fake API server holding objs, a fresh store and cache.
type fixture struct {
	resolver *Resolver
	clock    *fakeClock
	store    *artifact.Store
	cacheDir string
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	t.Helper()
	store, err := artifact.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	cacheDir := filepath.Join(t.TempDir(), "git")
	return &fixture{
		resolver: &Resolver{
			Client: fake.NewClientBuilder().WithObjects(objs...).Build(),
			Store:  store,
			Cache:  NewCacheWithLimits(cacheDir, DefaultCacheLimits),
			Now:    clock.Now,
		},
		clock:    clock,
		store:    store,
		cacheDir: cacheDir,
	}
}

func (f *fixture) resolve(t *testing.T, stack *pulumiv1.Stack) source.Artifact {
	t.Helper()
	a, err := f.resolver.Resolve(ctx(t), stack)
	if err != nil {
		t.Fatalf("Resolve() = %v", err)
	}
	return a
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// extract unpacks the artifact and returns the files of its tree.
func (f *fixture) extract(t *testing.T, a source.Artifact) map[string]string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "x")
	if err := f.store.Extract(a.Digest, dir, artifact.DefaultLimits); err != nil {
		t.Fatalf("Extract(%s) = %v", a.Digest, err)
	}
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		got[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func secretRef(name, key string) pulumiv1.ResourceRef {
	return pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorSecret, ResourceSelector: pulumiv1.ResourceSelector{Secret: &pulumiv1.SecretSelector{Name: name, Key: key}}}
}

func literalRef(v string) pulumiv1.ResourceRef {
	return pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorLiteral, ResourceSelector: pulumiv1.ResourceSelector{Literal: &pulumiv1.LiteralRef{Value: v}}}
}

func basicAuth(secretName string) *pulumiv1.GitAuthConfig {
	return &pulumiv1.GitAuthConfig{BasicAuth: &pulumiv1.BasicAuth{UserName: secretRef(secretName, "username"), Password: secretRef(secretName, "password")}}
}

func sshAuthFrom(secretName string) *pulumiv1.GitAuthConfig {
	return &pulumiv1.GitAuthConfig{SSHAuth: &pulumiv1.SSHAuth{SSHPrivateKey: secretRef(secretName, "key")}}
}

func newStack(name string, src pulumiv1.GitSource) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec:       pulumiv1.StackSpec{Stack: "dev", GitSource: src},
	}
}

// wantFault checks that err is a fault with the reason and stall flag, whose message
// contains every string in contains and none in excludes.
func wantFault(t *testing.T, err error, reason string, stalled bool, contains, excludes []string) {
	t.Helper()
	f, ok := fault.As(err)
	if !ok {
		t.Fatalf("Resolve() = %v, want a %s fault", err, reason)
	}
	t.Logf("%s (stalled %t): %s", f.Reason, f.Stalled, f)
	if f.Reason != reason || f.Stalled != stalled {
		t.Errorf("fault = %s (stalled %t): %v; want %s (stalled %t)", f.Reason, f.Stalled, f, reason, stalled)
	}
	for _, s := range contains {
		if !strings.Contains(f.Error(), s) {
			t.Errorf("message %q does not contain %q", f.Error(), s)
		}
	}
	for _, s := range excludes {
		if s != "" && strings.Contains(f.Error(), s) {
			t.Errorf("message %q contains %q", f.Error(), s)
		}
	}
}

// endlessRepo is the repository name for which the test servers advertise refs forever.
const endlessRepo = "endless.git"

// advertiseForever writes a ref advertisement that never ends, as a hostile server would,
// until a write fails, and returns the bytes written.
func advertiseForever(w io.Writer) int64 {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	var n int64
	write := func(line string) bool {
		k, err := fmt.Fprintf(w, "%04x%s", len(line)+4, line)
		n += int64(k)
		return err == nil
	}
	if !write(sha + " HEAD\x00multi_ack side-band-64k ofs-delta\n") {
		return n
	}
	for i := 0; ; i++ {
		if !write(fmt.Sprintf("%s refs/heads/branch-%09d\n", sha, i)) {
			return n
		}
	}
}

// gitDaemon is a git:// server on 127.0.0.1: it runs the real git-upload-pack for a
// repository under its root, or advertises refs forever for endlessRepo, and records the
// host each request named.
type gitDaemon struct {
	addr  string
	mu    sync.Mutex
	hosts []string
	sent  atomic.Int64
}

func newGitDaemon(t *testing.T, root string) *gitDaemon {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &gitDaemon{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { d.serve(conn, root) })
		}
	})
	return d
}

func (d *gitDaemon) serve(conn net.Conn, root string) {
	defer conn.Close()
	var req packp.GitProtoRequest
	if err := req.Decode(conn); err != nil {
		return
	}
	d.mu.Lock()
	d.hosts = append(d.hosts, req.Host)
	d.mu.Unlock()
	repo := filepath.Join(root, filepath.Clean("/"+req.Pathname))
	if filepath.Base(repo) == endlessRepo {
		d.sent.Add(advertiseForever(conn))
		return
	}
	cmd := exec.Command("git-upload-pack", "--strict", repo)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	cmd.Stdin, cmd.Stdout = conn, conn
	_ = cmd.Run()
}

func (d *gitDaemon) requestHosts() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.hosts)
}
