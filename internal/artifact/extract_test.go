package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExtract_Extract_AcceptsSafeArchives(t *testing.T) {
	tests := []struct {
		name    string
		entries []tentry
		want    map[string]string
	}{
		{
			name:    "files imply their directories",
			entries: []tentry{reg("a/b/c.txt", "c"), reg("top", "t")},
			want:    map[string]string{"a/": "", "a/b/": "", "a/b/c.txt": "c", "top": "t"},
		},
		{
			name:    "dot-slash names and explicit directories",
			entries: []tentry{dir("./"), dir("./src/"), reg("./src/main.yaml", "m")},
			want:    map[string]string{"src/": "", "src/main.yaml": "m"},
		},
		{
			name:    "repeated directory entries",
			entries: []tentry{dir("d/"), reg("d/f", "1"), dir("d/")},
			want:    map[string]string{"d/": "", "d/f": "1"},
		},
		{
			name:    "symlink to a sibling",
			entries: []tentry{reg("real/f", "1"), symlink("link", "real/f")},
			want:    map[string]string{"real/": "", "real/f": "1", "link": "-> real/f"},
		},
		{
			name: "symlink climbing no higher than its own directory",
			entries: []tentry{
				reg("node_modules/typescript/bin/tsc", "js"),
				symlink("node_modules/.bin/tsc", "../typescript/bin/tsc"),
			},
			want: map[string]string{
				"node_modules/": "", "node_modules/typescript/": "", "node_modules/typescript/bin/": "",
				"node_modules/typescript/bin/tsc": "js", "node_modules/.bin/": "",
				"node_modules/.bin/tsc": "-> ../typescript/bin/tsc",
			},
		},
		{
			name:    "symlink to the root itself",
			entries: []tentry{symlink("self", ".")},
			want:    map[string]string{"self": "-> ."},
		},
		{
			name:    "dangling symlink inside the root",
			entries: []tentry{symlink("later", "not/yet")},
			want:    map[string]string{"later": "-> not/yet"},
		},
		{
			name: "pax global header of git archive",
			entries: []tentry{
				{name: "pax_global_header", typ: tar.TypeXGlobalHeader, pax: map[string]string{"comment": "0123abcd"}},
				reg("Pulumi.yaml", "name: x"),
			},
			want: map[string]string{"Pulumi.yaml": "name: x"},
		},
		{
			name:    "empty archive",
			entries: nil,
			want:    map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			if err := Extract(bytes.NewReader(gz(t, tarBytes(t, tt.entries...))), out, Limits{}); err != nil {
				t.Fatalf("Extract() = %v; want success", err)
			}
			if diff := cmp.Diff(tt.want, tree(t, out)); diff != "" {
				t.Errorf("extracted tree (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExtract_Extract_RefusesHostileArchives(t *testing.T) {
	long := strings.Repeat("a/", 2500) + "f"
	tests := []struct {
		name    string
		archive func(t testing.TB) []byte // uncompressed unless gzipped already
		lim     Limits
		wantErr error
		// entry must be named in the error.
		entry string
	}{
		{name: "zip slip", archive: tarOf(reg("../x", "pwned")), wantErr: ErrUnsafeEntry, entry: "../x"},
		{name: "zip slip below a directory", archive: tarOf(reg("a/../../x", "pwned")), wantErr: ErrUnsafeEntry, entry: "a/../../x"},
		{name: "dot-dot component that stays inside", archive: tarOf(reg("a/../b", "x")), wantErr: ErrUnsafeEntry, entry: "a/../b"},
		{name: "absolute path", archive: tarOf(reg("/etc/stackwright-canary", "x")), wantErr: ErrUnsafeEntry, entry: "/etc/stackwright-canary"},
		{name: "name too long", archive: tarOf(reg(long, "x")), wantErr: ErrUnsafeEntry, entry: long},
		{name: "NUL in name", archive: nulNameTar, wantErr: tar.ErrHeader},
		{name: "symlink to an absolute path", archive: tarOf(symlink("etc", "/etc"), reg("etc/stackwright-canary", "x")), wantErr: ErrUnsafeEntry, entry: "etc"},
		{name: "symlink to the parent", archive: tarOf(symlink("up", "..")), wantErr: ErrUnsafeEntry, entry: "up"},
		{name: "symlink climbing above its depth", archive: tarOf(symlink("a/b/l", "../../../x")), wantErr: ErrUnsafeEntry, entry: "a/b/l"},
		{name: "symlink dot-dot through another symlink", archive: tarOf(symlink("self", "."), symlink("up", "self/..")), wantErr: ErrUnsafeEntry, entry: "up"},
		{name: "symlink with empty target", archive: tarOf(symlink("l", "")), wantErr: ErrUnsafeEntry, entry: "l"},
		{name: "write through an in-root symlink", archive: tarOf(dir("sub/"), symlink("d", "sub"), reg("d/f", "x")), wantErr: ErrUnsafeEntry, entry: "d/f"},
		{name: "directory through a symlink", archive: tarOf(dir("sub/"), symlink("d", "sub"), dir("d/x/")), wantErr: ErrUnsafeEntry, entry: "d/x/"},
		{name: "symlink below a symlink", archive: tarOf(symlink("d", "."), symlink("d/l", "x")), wantErr: ErrUnsafeEntry, entry: "d/l"},
		{name: "file replacing a symlink", archive: tarOf(reg("real", "1"), symlink("l", "real"), reg("l", "2")), wantErr: ErrUnsafeEntry, entry: "l"},
		{name: "directory replacing a symlink", archive: tarOf(dir("real/"), symlink("l", "real"), dir("l/")), wantErr: ErrUnsafeEntry, entry: "l/"},
		{name: "duplicate file", archive: tarOf(reg("f", "1"), reg("f", "2")), wantErr: ErrUnsafeEntry, entry: "f"},
		{name: "file replacing a directory", archive: tarOf(dir("d/"), reg("d", "x")), wantErr: ErrUnsafeEntry, entry: "d"},
		{name: "file replacing the root", archive: tarOf(reg(".", "x")), wantErr: ErrUnsafeEntry, entry: "."},
		{name: "hard link inside the root", archive: tarOf(reg("f", "1"), tentry{name: "h", typ: tar.TypeLink, link: "f"}), wantErr: ErrUnsafeEntry, entry: "h"},
		{name: "hard link escaping", archive: tarOf(tentry{name: "h", typ: tar.TypeLink, link: "../../../../etc/passwd"}), wantErr: ErrUnsafeEntry, entry: "h"},
		{name: "character device", archive: tarOf(tentry{name: "null", typ: tar.TypeChar}), wantErr: ErrUnsafeEntry, entry: "null"},
		{name: "block device", archive: tarOf(tentry{name: "sda", typ: tar.TypeBlock}), wantErr: ErrUnsafeEntry, entry: "sda"},
		{name: "fifo", archive: tarOf(tentry{name: "pipe", typ: tar.TypeFifo}), wantErr: ErrUnsafeEntry, entry: "pipe"},
		{name: "too many files", archive: tarOf(reg("a", ""), reg("b", ""), reg("c", "")), lim: Limits{MaxFiles: 2}, wantErr: ErrLimitExceeded, entry: "c"},
		{name: "too many implied directories", archive: tarOf(reg("a/b/c", "")), lim: Limits{MaxFiles: 2}, wantErr: ErrLimitExceeded, entry: "a/b/c"},
		{name: "file larger than the byte cap", archive: tarOf(reg("big", "0123456789x")), lim: Limits{MaxBytes: 10}, wantErr: ErrLimitExceeded, entry: "big"},
		{name: "files together larger than the byte cap", archive: tarOf(reg("a", "012345"), reg("b", "012345")), lim: Limits{MaxBytes: 10}, wantErr: ErrLimitExceeded, entry: "b"},
		{name: "huge declared size", archive: tarOf(tentry{name: "huge", typ: tar.TypeReg, body: "x", declared: 1 << 40}), wantErr: ErrLimitExceeded, entry: "huge"},
		{name: "declared size longer than the data", archive: tarOf(tentry{name: "short", typ: tar.TypeReg, body: "x", declared: 4096}), wantErr: io.ErrUnexpectedEOF},
		{name: "decompressed stream beyond its cap", archive: func(t testing.TB) []byte {
			return append(tarBytes(t, reg("f", "x")), make([]byte, 2<<20)...)
		}, lim: Limits{MaxBytes: 1, MaxFiles: 1}, wantErr: ErrLimitExceeded},
		{name: "not gzip", archive: func(testing.TB) []byte { return []byte("PK\x03\x04 zip, not gzip") }, wantErr: gzip.ErrHeader},
		{name: "truncated gzip", archive: func(t testing.TB) []byte {
			b := gz(t, tarBytes(t, reg("f", strings.Repeat("x", 4096))))
			return b[:len(b)-10]
		}, wantErr: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			sentinel := filepath.Join(base, "sentinel")
			if err := os.Mkdir(sentinel, 0o755); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(base, "out")
			data := tt.archive(t)
			if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) && !bytes.HasPrefix(data, []byte("PK")) {
				data = gz(t, data)
			}

			err := Extract(bytes.NewReader(data), out, tt.lim)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Extract() = %v; want an error wrapping %v", err, tt.wantErr)
			}
			if tt.entry != "" && !strings.Contains(err.Error(), strconv.Quote(tt.entry)) {
				t.Errorf("Extract() = %v; want the error to name entry %q", err, tt.entry)
			}
			requireOnly(t, base, "sentinel")
			requireOnly(t, sentinel)
			if _, err := os.Lstat("/etc/stackwright-canary"); err == nil {
				t.Fatal("/etc/stackwright-canary exists: extraction wrote outside its directory")
			}
		})
	}
}

func tarOf(entries ...tentry) func(t testing.TB) []byte {
	return func(t testing.TB) []byte { return tarBytes(t, entries...) }
}

// requireOnly fails unless dir holds exactly names.
func requireOnly(t testing.TB, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if names == nil {
		names = []string{}
	}
	if diff := cmp.Diff(names, got); diff != "" {
		t.Fatalf("%s holds (-want +got):\n%s", dir, diff)
	}
}

func TestExtract_Extract_TargetDirectory(t *testing.T) {
	valid := gz(t, tarBytes(t, reg("f", "x")))
	hostile := gz(t, tarBytes(t, reg("f", "x"), reg("../g", "y")))

	t.Run("existing empty directory is used and emptied again on failure", func(t *testing.T) {
		out := t.TempDir()
		if err := Extract(bytes.NewReader(hostile), out, Limits{}); !errors.Is(err, ErrUnsafeEntry) {
			t.Fatalf("Extract() = %v; want ErrUnsafeEntry", err)
		}
		requireOnly(t, out)
		if err := Extract(bytes.NewReader(valid), out, Limits{}); err != nil {
			t.Fatalf("Extract() = %v; want success", err)
		}
		requireOnly(t, out, "f")
	})
	t.Run("non-empty directory is refused and left alone", func(t *testing.T) {
		out := t.TempDir()
		if err := os.WriteFile(filepath.Join(out, "mine"), []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Extract(bytes.NewReader(valid), out, Limits{}); err == nil {
			t.Fatal("Extract() into a non-empty directory succeeded; want an error")
		}
		requireOnly(t, out, "mine")
	})
	t.Run("file in place of the directory is refused", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(out, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Extract(bytes.NewReader(valid), out, Limits{}); err == nil {
			t.Fatal("Extract() onto a file succeeded; want an error")
		}
	})
}

func TestExtract_Extract_Modes(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	archive := gz(t, tarBytes(t,
		tentry{name: "private/", typ: tar.TypeDir, mode: 0o700},
		tentry{name: "private/run.sh", typ: tar.TypeReg, body: "#!/bin/sh", mode: 0o4777},
		tentry{name: "data", typ: tar.TypeReg, body: "d", mode: 0o666},
	))
	if err := Extract(bytes.NewReader(archive), out, Limits{}); err != nil {
		t.Fatal(err)
	}
	got := map[string]os.FileMode{}
	for _, name := range []string{"private", "private/run.sh", "data"} {
		fi, err := os.Lstat(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		got[name] = fi.Mode() & (os.ModePerm | os.ModeSetuid)
	}
	// Directories stay writable so later entries fit; setuid and world-write never survive.
	want := map[string]os.FileMode{"private": 0o755, "private/run.sh": 0o755, "data": 0o644}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}
}

func TestExtract_Extract_UnboundedLimitsDoNotOverflow(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	lim := Limits{MaxBytes: math.MaxInt64, MaxFiles: math.MaxInt}
	if err := Extract(bytes.NewReader(gz(t, tarBytes(t, reg("f", "x")))), out, lim); err != nil {
		t.Fatalf("Extract() with the largest limits = %v", err)
	}
}
