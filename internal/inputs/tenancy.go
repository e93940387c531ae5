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
// plugins, and which API server in-cluster clients reach with the manager's token
// (KUBERNETES_SERVICE_*, KUBERNETES_PORT*). In a runner Pod they only affect the
// tenant's own Pod, so the Job executor lets them through.
//
// Entries ending in "*" are prefixes. docs/operations.md ("Tenancy and security") and the
// guidance admission policy list the same names; a test holds them in step.
var ReservedEnv = []string{
	"PATH", "HOME", "TMPDIR", "SHELL",
	"LD_*", "DYLD_*",
	"GIT_*",
	"KUBERNETES_SERVICE_*", "KUBERNETES_PORT*", "KUBECONFIG",
	"PULUMI_HOME", "PULUMI_CONFIG_PASSPHRASE_FILE",
	"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION", "PULUMI_SKIP_UPDATE_CHECK",
	"PULUMI_AUTOMATION_API", "PULUMI_DEBUG_COMMANDS", "PULUMI_IGNORE_AMBIENT_PLUGINS",
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

// checkInManager refuses, for a Stack whose engine runs in the manager, what would reach
// beyond its own namespace there: a reserved environment variable from any of its
// sources, and a file:// backend outside the namespace's own state directory (which would
// be another tenant's state, opened with a passphrase the manager fills in).
func checkInManager(namespace string, spec *pulumiv1.StackSpec, env map[string]string, o Options) error {
	var bad []string
	for k := range env {
		if Reserved(k) {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fault.Stall(pulumiv1.ReasonSpecInvalid, "the environment sets %s, which steer the engine in the manager's process and are refused under the local executor (docs/operations.md, Tenancy and security)", strings.Join(bad, ", "))
	}
	if o.StateRoot == "" {
		return nil
	}
	backend := env[EnvBackendURL]
	if spec.Backend != "" {
		backend = spec.Backend
	}
	rest, ok := strings.CutPrefix(backend, "file://")
	if !ok {
		return nil
	}
	own := filepath.Join(filepath.Clean(o.StateRoot), namespace)
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
// tenants' stacks share a key. A namespace that already has state in the default backend
// from before passphrases were per namespace keeps the one shared passphrase it was
// encrypted with (Shared), copied into its own file.
type Passphrases struct {
	// Dir holds one file per namespace, named after it.
	Dir string
	// Shared is the single passphrase file of earlier versions; "" if there was none.
	Shared string
	// StateRoot is the default file:// backend's directory, one subdirectory per namespace.
	StateRoot string
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
	value, err := p.initial(namespace)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return "", fmt.Errorf("failed to create %s: %w", p.Dir, err)
	}
	// O_EXCL: of two reconciles racing here, the first passphrase stays.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return path, nil
	}
	if err == nil {
		_, err = f.Write(value)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("failed to write passphrase of namespace %s: %w", namespace, err)
	}
	return path, nil
}

// initial is a namespace's first passphrase: the shared one when the namespace already
// has state encrypted with it, else a new random one.
func (p *Passphrases) initial(namespace string) ([]byte, error) {
	if p.Shared != "" && p.StateRoot != "" {
		if _, err := os.Stat(filepath.Join(p.StateRoot, namespace)); err == nil {
			b, err := os.ReadFile(p.Shared)
			if err == nil {
				return b, nil
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("failed to read shared passphrase: %w", err)
			}
		}
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("failed to generate passphrase: %w", err)
	}
	return []byte(base64.RawURLEncoding.EncodeToString(b)), nil
}
