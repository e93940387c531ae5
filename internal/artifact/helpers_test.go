package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// tentry is one archive entry as a test writes it. A declared size different from the
// body makes a malformed entry; it must be the last one.
type tentry struct {
	name     string
	typ      byte
	body     string
	link     string
	mode     int64
	declared int64
	pax      map[string]string
}

func reg(name, body string) tentry { return tentry{name: name, typ: tar.TypeReg, body: body} }
func dir(name string) tentry       { return tentry{name: name, typ: tar.TypeDir} }
func symlink(name, target string) tentry {
	return tentry{name: name, typ: tar.TypeSymlink, link: target}
}

// tarBytes writes entries as an uncompressed tar. archive/tar's writer does not judge
// names or link targets, which is what lets tests build hostile archives with it.
func tarBytes(t testing.TB, entries ...tentry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		size := int64(len(e.body))
		if e.typ != tar.TypeReg {
			size = 0
		}
		if e.declared != 0 {
			size = e.declared
		}
		hdr := &tar.Header{Typeflag: e.typ, Name: e.name, Linkname: e.link, Mode: mode, Size: size, Devmajor: 1, Devminor: 3, PAXRecords: e.pax}
		if e.typ == tar.TypeXGlobalHeader {
			hdr = &tar.Header{Typeflag: e.typ, PAXRecords: e.pax}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("failed to write header %q: %v", e.name, err)
		}
		if e.declared != 0 {
			// The writer would refuse to close an entry shorter than declared: finish by hand.
			buf.WriteString(e.body)
			buf.Write(make([]byte, 1024+(512-len(e.body)%512)%512))
			return buf.Bytes()
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatalf("failed to write %q: %v", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("failed to close tar: %v", err)
	}
	return buf.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// nulNameTar is a tar whose PAX path record holds a NUL byte, which archive/tar's writer
// refuses to produce: the record is patched after writing.
func nulNameTar(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A non-ASCII name only fits a PAX path record, which is where the NUL goes.
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: "\u00e9vilZname", Mode: 0o644}
	if err := tw.WriteHeader(hdr); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.Replace(buf.Bytes(), []byte("\u00e9vilZname"), []byte("\u00e9vil\x00name"), 1)
}

// tree describes what a directory holds: file content, "dir/" for directories and
// "-> target" for symlinks.
func tree(t testing.TB, root string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			got[rel] = "-> " + target
		case d.IsDir():
			got[rel+"/"] = ""
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			got[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("failed to walk %s: %v", root, err)
	}
	return got
}
