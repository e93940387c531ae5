package keyfile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Size is the length of every key, in bytes.
const Size = 32

// Load reads the key at path, creating it (random, 0600, written whole) on first use.
func Load(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err == nil && len(key) == Size {
		return key, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("failed to read key %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create directory of key %s: %w", path, err)
	}
	key = make([]byte, Size)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("failed to generate key %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+"-*")
	if err != nil {
		return nil, fmt.Errorf("failed to write key %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(key); err != nil {
		_ = tmp.Close()
		return nil, fmt.Errorf("failed to write key %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("failed to write key %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("failed to write key %s: %w", path, err)
	}
	return key, nil
}
