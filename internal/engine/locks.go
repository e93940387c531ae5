package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ClearStaleLocks removes the update locks of a self-managed file:// backend that were
// taken by processes proven gone: those whose host name starts with one of hosts (a
// runner Pod's host name is its Pod name, unique to one run). Only the caller can prove a
// holder gone, and it must: removing a live holder's lock lets two updates corrupt one
// stack. Other backends' locks are left alone (Pulumi Cloud releases a dead update's lease
// by itself; object-store backends are not handled yet). It returns the removed locks'
// paths relative to the backend.
func ClearStaleLocks(backendURL string, hosts []string) ([]string, error) {
	root, ok := strings.CutPrefix(backendURL, "file://")
	if !ok || root == "" || len(hosts) == 0 {
		return nil, nil
	}
	root, _, _ = strings.Cut(root, "?")
	locks := filepath.Join(root, ".pulumi", "locks")
	var removed []string
	err := filepath.WalkDir(locks, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || filepath.Ext(path) != ".json" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var lock struct {
			Hostname string `json:"hostname"`
		}
		// A lock that names no holder cannot be proven stale: it stays.
		if jerr := json.Unmarshal(b, &lock); jerr != nil || lock.Hostname == "" {
			return nil //nolint:nilerr // see above
		}
		for _, h := range hosts {
			if strings.HasPrefix(lock.Hostname, h) {
				if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				rel, _ := filepath.Rel(root, path)
				removed = append(removed, rel)
				break
			}
		}
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("failed to clear stale locks in %s: %w", locks, err)
	}
	return removed, nil
}
