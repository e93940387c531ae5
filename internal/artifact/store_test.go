package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := NewStore(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatalf("NewStore() = %v", err)
	}
	return s
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// files lists the store's directories: only complete artifacts, no temp leftovers.
func files(t *testing.T, s *Store) []string {
	t.Helper()
	var got []string
	for _, sub := range []string{"sha256", "tmp"} {
		entries, err := os.ReadDir(filepath.Join(s.Dir(), sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			got = append(got, sub+"/"+e.Name())
		}
	}
	return got
}

func TestStore_Put_IdempotentAndContentAddressed(t *testing.T) {
	s := newStore(t)
	content := []byte("tarball bytes")
	want := sha(content)
	for i := range 2 {
		got, err := s.Put(bytes.NewReader(content), 1<<20)
		if err != nil {
			t.Fatalf("Put() #%d = %v", i, err)
		}
		if got != want {
			t.Fatalf("Put() #%d = %s; want %s", i, got, want)
		}
	}
	if diff := cmp.Diff([]string{"sha256/" + want[len("sha256:"):] + ".tar.gz"}, files(t, s)); diff != "" {
		t.Errorf("store files (-want +got):\n%s", diff)
	}
	if !s.Has(want) {
		t.Errorf("Has(%s) = false after Put", want)
	}
	rc, err := s.Open(want)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, _ := io.ReadAll(rc)
	if !bytes.Equal(got, content) {
		t.Errorf("Open() read %q; want %q", got, content)
	}
}

func TestStore_Put_Limits(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		max     int64
		wantErr error
	}{
		{name: "exactly the limit", size: 10, max: 10},
		{name: "one byte over the limit", size: 11, max: 10, wantErr: ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			_, err := s.Put(bytes.NewReader(make([]byte, tt.size)), tt.max)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Put() = %v; want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil && len(files(t, s)) != 0 {
				t.Errorf("a refused Put left %v behind", files(t, s))
			}
		})
	}
}

func TestStore_PutVerified_MismatchLeavesNothing(t *testing.T) {
	content := []byte("downloaded")
	tests := []struct {
		name    string
		want    string
		wantErr error
	}{
		{name: "matching digest", want: sha(content)},
		{name: "other content's digest", want: sha([]byte("something else")), wantErr: ErrDigestMismatch},
		{name: "malformed digest", want: "sha256:../../etc/passwd", wantErr: ErrInvalidDigest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			err := s.PutVerified(bytes.NewReader(content), 1<<20, tt.want)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("PutVerified() = %v; want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil {
				if !s.Has(tt.want) {
					t.Errorf("Has(%s) = false after a verified Put", tt.want)
				}
				return
			}
			if got := files(t, s); len(got) != 0 {
				t.Errorf("refused PutVerified left %v behind", got)
			}
		})
	}
}

func TestStore_Open_RejectsBadDigests(t *testing.T) {
	s := newStore(t)
	valid := sha([]byte("x"))
	tests := []struct {
		name    string
		digest  string
		wantErr error
	}{
		{name: "empty", digest: "", wantErr: ErrInvalidDigest},
		{name: "no algorithm", digest: valid[len("sha256:"):], wantErr: ErrInvalidDigest},
		{name: "other algorithm", digest: "sha512:" + valid[len("sha256:"):], wantErr: ErrInvalidDigest},
		{name: "uppercase hex", digest: strings.ToUpper(valid[:len("sha256:")+2]) + valid[len("sha256:")+2:], wantErr: ErrInvalidDigest},
		{name: "path traversal", digest: "sha256:../../../../etc/passwd", wantErr: ErrInvalidDigest},
		{name: "path separator at full length", digest: "sha256:" + strings.Repeat("a", 30) + "/" + strings.Repeat("a", 33), wantErr: ErrInvalidDigest},
		{name: "too short", digest: valid[:len(valid)-1], wantErr: ErrInvalidDigest},
		{name: "valid but absent", digest: valid, wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := s.Open(tt.digest)
			if err == nil {
				rc.Close()
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Open(%q) = %v; want %v", tt.digest, err, tt.wantErr)
			}
			if s.Has(tt.digest) {
				t.Errorf("Has(%q) = true", tt.digest)
			}
		})
	}
}

func TestStore_Put_ConcurrentSameContent(t *testing.T) {
	s := newStore(t)
	content := bytes.Repeat([]byte("concurrent "), 50000)
	want := sha(content)
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	digests := make([]string, n)
	for i := range n {
		wg.Go(func() {
			digests[i], errs[i] = s.Put(bytes.NewReader(content), 1<<30)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || digests[i] != want {
			t.Errorf("Put #%d = %s, %v; want %s", i, digests[i], errs[i], want)
		}
	}
	if diff := cmp.Diff([]string{"sha256/" + want[len("sha256:"):] + ".tar.gz"}, files(t, s)); diff != "" {
		t.Errorf("store files (-want +got):\n%s", diff)
	}
	rc, err := s.Open(want)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, _ := io.ReadAll(rc)
	if sha(got) != want {
		t.Errorf("stored content hashes to %s; want %s", sha(got), want)
	}
}

func TestStore_Extract_VerifiesContent(t *testing.T) {
	s := newStore(t)
	b, err := Pack(map[string][]byte{"Pulumi.yaml": []byte("name: x\n")})
	if err != nil {
		t.Fatal(err)
	}
	digest, err := s.Put(bytes.NewReader(b), 1<<20)
	if err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "ok")
	if err := s.Extract(digest, out, Limits{}); err != nil {
		t.Fatalf("Extract() = %v", err)
	}
	if diff := cmp.Diff(map[string]string{"Pulumi.yaml": "name: x\n"}, tree(t, out)); diff != "" {
		t.Errorf("extracted (-want +got):\n%s", diff)
	}

	// Corrupt the stored file in place (a disk error, a hand edit): the archive is still
	// valid, so only the digest check can notice.
	other, err := Pack(map[string][]byte{"Pulumi.yaml": []byte("name: y\n")})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Dir(), "sha256", digest[len("sha256:"):]+".tar.gz")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, other, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := s.Extract(digest, bad, Limits{}); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("Extract() of a corrupted artifact = %v; want ErrDigestMismatch", err)
	}
	if _, err := os.Lstat(bad); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed Extract left %s behind (%v)", bad, err)
	}
}

func TestStore_Remove_Idempotent(t *testing.T) {
	s := newStore(t)
	digest, err := s.Put(strings.NewReader("x"), 10)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := s.Remove(digest); err != nil {
			t.Fatalf("Remove() #%d = %v", i, err)
		}
	}
	if s.Has(digest) {
		t.Error("Has() = true after Remove")
	}
	if err := s.Remove("sha256:.."); !errors.Is(err, ErrInvalidDigest) {
		t.Errorf("Remove(bad digest) = %v; want ErrInvalidDigest", err)
	}
}

func TestStore_NewStore_RemovesOnlyStaleTemps(t *testing.T) {
	s := newStore(t)
	tmp := filepath.Join(s.Dir(), "tmp")
	for _, name := range []string{"put-crashed", "put-running"} {
		if err := os.WriteFile(filepath.Join(tmp, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * staleTempAge)
	if err := os.Chtimes(filepath.Join(tmp, "put-crashed"), old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := NewStore(s.Dir()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"tmp/put-running"}, files(t, s)); diff != "" {
		t.Errorf("store files after reopening (-want +got):\n%s", diff)
	}
}

func TestStore_Put_UnboundedLimitDoesNotOverflow(t *testing.T) {
	s := newStore(t)
	if _, err := s.Put(strings.NewReader("x"), math.MaxInt64); err != nil {
		t.Fatalf("Put() with the largest limit = %v", err)
	}
}
