package provider

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// RootEnvVar names the environment variable holding the directory below which
// File and Flaky resources keep their files.
const RootEnvVar = "STACKWRIGHT_TESTING_ROOT"

// cleanRelPath validates a user-supplied path that must stay inside the root
// directory and returns its cleaned, slash-separated form.
func cleanRelPath(path string) (string, error) {
	if path == "" {
		return "", errors.New("path must not be empty")
	}
	if filepath.IsAbs(path) || strings.HasPrefix(path, "/") || strings.HasPrefix(path, `\`) {
		return "", fmt.Errorf("path %q is absolute; it must be relative to $%s", path, RootEnvVar)
	}
	clean := filepath.ToSlash(filepath.Clean(filepath.FromSlash(path)))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("path %q escapes $%s via %q", path, RootEnvVar, "..")
	}
	if clean == "." {
		return "", fmt.Errorf("path %q names the root directory itself, not a file in it", path)
	}
	return clean, nil
}

// rootDir returns the root directory configured through [RootEnvVar].
func rootDir() (string, error) {
	root := os.Getenv(RootEnvVar)
	if root == "" {
		return "", fmt.Errorf("environment variable %s is not set; the stackwright-testing provider "+
			"needs it to know where to keep its files", RootEnvVar)
	}
	return root, nil
}

// resolvePath validates path and joins it onto root.
func resolvePath(root, path string) (string, error) {
	clean, err := cleanRelPath(path)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, filepath.FromSlash(clean)), nil
}

// resolveUnderRoot validates path and joins it onto the configured root.
func resolveUnderRoot(path string) (string, error) {
	root, err := rootDir()
	if err != nil {
		return "", err
	}
	return resolvePath(root, path)
}
