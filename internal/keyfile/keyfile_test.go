package keyfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestLoad_CreatesOnceThenReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "test.key")
	first, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != Size {
		t.Fatalf("key has %d bytes; want %d", len(first), Size)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v; want 0600", fi.Mode().Perm())
	}
	again, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Error("a second Load made a new key: every fingerprint under the old one would change")
	}
	other, err := Load(filepath.Join(t.TempDir(), "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, other) {
		t.Error("two keys are equal")
	}
}
