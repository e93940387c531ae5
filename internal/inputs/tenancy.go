package inputs

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
)

// ReservedEnv is the list of environment variables a Stack may not set when its engine
// runs in the manager's process (the local executor). Each steers the engine or the
// process itself rather than the program: which binaries run (PATH, the loader's LD_*
// and DYLD_*, git's helpers), where the engine keeps plugins and credentials
// (PULUMI_HOME, HOME), which files it reads as a passphrase, whether it downloads
// plugins, how much of its own logs it keeps in the shared PULUMI_HOME, and which API
// server in-cluster clients reach with the manager's token (KUBERNETES_SERVICE_*,
// KUBERNETES_PORT*). In a runner Pod they only affect the tenant's own Pod, so the Job
// executor lets them through.
//
// Entries ending in "*" are prefixes. docs/operations.md ("Tenancy and security") and the
// guidance admission policy list the same names; a test holds the policy in step.
var ReservedEnv = []string{
	"PATH", "HOME", "TMPDIR", "SHELL",
	"LD_*", "DYLD_*",
	"GIT_*",
	"KUBERNETES_SERVICE_*", "KUBERNETES_PORT*", "KUBECONFIG",
	"PULUMI_HOME", "PULUMI_CONFIG_PASSPHRASE_FILE",
	"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION", "PULUMI_SKIP_UPDATE_CHECK",
	"PULUMI_AUTOMATION_API", "PULUMI_DEBUG_COMMANDS", "PULUMI_IGNORE_AMBIENT_PLUGINS",
	"PULUMI_LOG_ROTATION_*",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
	"GODEBUG", "NODE_OPTIONS", "PYTHONPATH", "PYTHONSTARTUP",
}

// Reserved reports whether ReservedEnv names key.
func Reserved(key string) bool {
	return slices.ContainsFunc(ReservedEnv, func(r string) bool {
		if p, ok := strings.CutSuffix(r, "*"); ok {
			return strings.HasPrefix(key, p)
		}
		return key == r
	})
}

// checkReservedEnv refuses, for a Stack whose engine runs in the manager, the variables
// of ReservedEnv from any of its sources: there they would steer the manager's process.
func checkReservedEnv(env map[string]string) error {
	var bad []string
	for k := range env {
		if Reserved(k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fault.Stall(pulumiv1.ReasonSpecInvalid, "the environment sets %s, which steer the engine in the manager's process and are refused under the local executor (docs/operations.md, Tenancy and security)", strings.Join(bad, ", "))
}

// checkFileBackend refuses, for a Stack whose engine runs in the manager, a file://
// backend outside its namespace's directory of stateRoot: that would be another tenant's
// state, opened with a passphrase the manager fills in.
func checkFileBackend(namespace, backend, stateRoot string) error {
	if stateRoot == "" {
		return nil
	}
	// The engine parses the URL, which reads the scheme case-insensitively.
	if scheme, _, _ := strings.Cut(backend, ":"); !strings.EqualFold(scheme, "file") {
		return nil
	}
	// The engine takes any spelling of the scheme (FILE://, file:/x); only the one this
	// check reads the path of is let through.
	rest, ok := strings.CutPrefix(backend, "file://")
	if !ok {
		return fault.Stall(pulumiv1.ReasonSpecInvalid, "backend %s: under the local executor a file backend must be written file://<path>, inside this namespace's state directory %s", backend, filepath.Join(filepath.Clean(stateRoot), namespace))
	}
	own := filepath.Join(filepath.Clean(stateRoot), namespace)
	if !within(own, fileBackendPath(rest)) {
		return fault.Stall(pulumiv1.ReasonSpecInvalid, "backend %s is outside this namespace's state directory %s: under the local executor a file:// backend must stay in it (or leave spec.backend empty to use it)", backend, own)
	}
	return nil
}

// fileBackendPath is the directory a file:// backend URL's remainder names, as the
// engine resolves it: the query is options, and a relative or ~ path is not under any
// directory the manager controls, so it is returned as given (and refused).
func fileBackendPath(rest string) string {
	p, _, _ := strings.Cut(rest, "?")
	if u, err := url.PathUnescape(p); err == nil {
		p = u
	}
	if !filepath.IsAbs(p) {
		return p
	}
	return filepath.Clean(p)
}

// within reports whether p is dir or inside it.
func within(dir, p string) bool {
	if !filepath.IsAbs(p) {
		return false
	}
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Passphrases keeps one generated secrets passphrase per namespace, so that no two
// tenants' stacks share a key. An installation from before passphrases were per namespace
// keeps its one shared passphrase (Shared) for every namespace, copied into each
// namespace's file: any stack there, on the default backend or another self-managed one,
// may be encrypted with it.
type Passphrases struct {
	// Dir holds one file per namespace, named after it.
	Dir string
	// Shared is the single passphrase file of earlier versions; "" if there was none.
	Shared string
}

// File returns the path of namespace's passphrase file, creating it on first use.
func (p *Passphrases) File(namespace string) (string, error) {
	if namespace == "" || strings.ContainsAny(namespace, `/\`) || namespace == "." || namespace == ".." {
		return "", fmt.Errorf("failed to choose passphrase file: invalid namespace %q", namespace)
	}
	path := filepath.Join(p.Dir, namespace)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("failed to read passphrase of namespace %s: %w", namespace, err)
	}
	value, err := p.initial()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return "", fmt.Errorf("failed to create %s: %w", p.Dir, err)
	}
	// Written whole under another name, then linked into place: a crash never leaves an
	// empty passphrase behind, and of two reconciles racing here the first one's stays
	// (a link, unlike a rename, fails when the name exists).
	tmp, err := os.CreateTemp(p.Dir, ".new-")
	if err != nil {
		return "", fmt.Errorf("failed to write passphrase of namespace %s: %w", namespace, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.Write(value)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), path)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("failed to write passphrase of namespace %s: %w", namespace, err)
	}
	return path, nil
}

// initial is a namespace's first passphrase: the shared one of an installation from
// earlier versions, else a new random one.
func (p *Passphrases) initial() ([]byte, error) {
	if p.Shared != "" {
		b, err := os.ReadFile(p.Shared)
		if err != nil {
			return nil, fmt.Errorf("failed to read shared passphrase: %w", err)
		}
		return b, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("failed to generate passphrase: %w", err)
	}
	return []byte(base64.RawURLEncoding.EncodeToString(b)), nil
}
