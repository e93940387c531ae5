package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var fuzzLimits = Limits{MaxBytes: 1 << 20, MaxFiles: 16}

// canaries are absolute paths the seeds try to reach through absolute symlinks.
var canaries = []string{"/etc/stackwright-fuzz-canary", "/tmp/stackwright-fuzz-canary"}

// FuzzExtract feeds Extract arbitrary archives. Inputs that are not gzip are gzipped first,
// so the fuzzer mutates tar structure instead of mostly breaking gzip checksums; gzip
// inputs are passed through to exercise the decompressor too.
//
// Property: Extract never panics and never creates anything outside its directory (a
// sibling sentinel directory stays empty and nothing new appears next to it); on failure
// the directory it created is gone; on success every symlink inside resolves inside.
func FuzzExtract(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		// Without the two zero blocks that end a tar (readers accept a clean EOF instead)
		// seeds are smaller, and so are the inputs the fuzzer minimises.
		f.Add(trimTrailer(seed))
	}
	// One directory per worker process, not t.TempDir per input: minimising a new input
	// runs the function thousands of times, and directory churn dominated its cost.
	base := f.TempDir()
	sentinel := filepath.Join(base, "sentinel")
	if err := os.Mkdir(sentinel, 0o755); err != nil {
		f.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(nil, gzip.NoCompression)
	f.Fuzz(func(t *testing.T, data []byte) {
		if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			var buf bytes.Buffer
			zw.Reset(&buf)
			_, _ = zw.Write(data)
			_ = zw.Close()
			data = buf.Bytes()
		}
		out := filepath.Join(base, "out")
		defer os.RemoveAll(out)

		err := Extract(bytes.NewReader(data), out, fuzzLimits)

		requireOnly(t, sentinel)
		for _, c := range canaries {
			if _, err := os.Lstat(c); err == nil {
				t.Fatalf("%s exists: extraction escaped its directory", c)
			}
		}
		if err != nil {
			requireOnly(t, base, "sentinel")
			return
		}
		requireOnly(t, base, "out", "sentinel")
		requireLinksInside(t, out)
	})
}

func trimTrailer(b []byte) []byte {
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		return b
	}
	zero := make([]byte, 512)
	for len(b) >= 512 && bytes.Equal(b[len(b)-512:], zero) {
		b = b[:len(b)-512]
	}
	return b
}

// requireLinksInside resolves every symlink under root the way a program reading the
// tree would; dangling links and loops cannot lead anywhere, so they pass.
func requireLinksInside(t *testing.T, root string) {
	t.Helper()
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		resolved, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil //nolint:nilerr // a dangling link or a loop resolves nowhere
		}
		if resolved != realRoot && !strings.HasPrefix(resolved, realRoot+string(filepath.Separator)) {
			t.Errorf("symlink %s resolves to %s, outside %s", p, resolved, realRoot)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func fuzzSeeds(tb testing.TB) [][]byte {
	// Small seeds keep the fuzzer's minimisation of new inputs short.
	many := make([]tentry, 20)
	for i := range many {
		many[i] = reg(strings.Repeat("d/", i%3)+string(rune('a'+i)), "")
	}
	valid, err := Pack(map[string][]byte{"Pulumi.yaml": []byte("name: x\nruntime: yaml\n"), "src/a.txt": []byte("a")})
	if err != nil {
		tb.Fatal(err)
	}
	return [][]byte{
		// Valid archives.
		valid,
		tarBytes(tb, dir("./"), dir("src/"), reg("src/main.yaml", "m"), symlink("link", "src/main.yaml")),
		tarBytes(tb, reg("node_modules/t/bin/tsc", "js"), symlink("node_modules/.bin/tsc", "../t/bin/tsc")),
		tarBytes(tb, tentry{name: "pax_global_header", typ: tar.TypeXGlobalHeader, pax: map[string]string{"comment": "abc"}}, reg("f", "x")),
		// Zip slip and absolute paths.
		tarBytes(tb, reg("../sentinel/x", "pwned")),
		tarBytes(tb, reg("a/../../sentinel/x", "pwned")),
		tarBytes(tb, reg("/etc/stackwright-fuzz-canary", "pwned")),
		// Write through symlinks: absolute, escaping, in-root, and the dot-dot-through-link trick.
		tarBytes(tb, symlink("etc", "/etc"), reg("etc/stackwright-fuzz-canary", "pwned")),
		tarBytes(tb, symlink("tmp", "/tmp"), reg("tmp/stackwright-fuzz-canary", "pwned")),
		tarBytes(tb, symlink("s", "../sentinel"), reg("s/x", "pwned")),
		tarBytes(tb, symlink("self", "."), symlink("up", "self/.."), reg("up/sentinel/x", "pwned")),
		tarBytes(tb, dir("sub/"), symlink("d", "sub"), reg("d/f", "x")),
		tarBytes(tb, reg("real", "1"), symlink("l", "real"), reg("l", "2")),
		// Hard links, devices.
		tarBytes(tb, tentry{name: "h", typ: tar.TypeLink, link: "../sentinel/x"}),
		tarBytes(tb, reg("f", "1"), tentry{name: "h", typ: tar.TypeLink, link: "f"}),
		tarBytes(tb, tentry{name: "null", typ: tar.TypeChar}),
		tarBytes(tb, tentry{name: "sda", typ: tar.TypeBlock}),
		tarBytes(tb, tentry{name: "pipe", typ: tar.TypeFifo}),
		// Sizes and counts.
		tarBytes(tb, tentry{name: "huge", typ: tar.TypeReg, body: "x", declared: 1 << 40}),
		tarBytes(tb, many...),
		nulNameTar(tb),
		// Broken gzip.
		valid[:len(valid)/2],
		append(bytes.Clone(valid[:10]), bytes.Repeat([]byte{0}, 64)...),
	}
}

// TestFuzzExtract_Seeds_CoverEachDefence keeps the seed corpus honest: each hostile seed
// must be refused by Extract itself, not merely by the property checks.
func TestFuzzExtract_Seeds_CoverEachDefence(t *testing.T) {
	seeds := fuzzSeeds(t)
	for i, seed := range seeds {
		data := trimTrailer(seed)
		if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			data = gz(t, data)
		}
		err := Extract(bytes.NewReader(data), filepath.Join(t.TempDir(), "out"), fuzzLimits)
		wantOK := i < 4 // the valid archives come first
		if (err == nil) != wantOK {
			t.Errorf("seed %d: Extract() = %v; want success=%v", i, err, wantOK)
		}
	}
}
