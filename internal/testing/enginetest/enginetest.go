package enginetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"

	"github.com/stackwright/stackwright/internal/testing/repo"
)

// Passphrase encrypts stack secrets in tests; it protects nothing and is not a secret.
const Passphrase = "stackwright-test-passphrase"

// ProviderRootEnv names the variable from which the test provider
// (pulumi-resource-stackwright-testing) takes the directory its File resources live in.
const ProviderRootEnv = "STACKWRIGHT_TESTING_ROOT"

// Env is one test's isolated Pulumi installation.
type Env struct {
	// Bin holds pulumi, the YAML language host and the test provider.
	Bin string
	// Home is PULUMI_HOME.
	Home string
	// Backend is the file:// URL of the state backend.
	Backend string
	// Files is where the test provider creates files (STACKWRIGHT_TESTING_ROOT).
	Files string
	// Command is the pulumi CLI from Bin, version-checked against the Automation API.
	Command auto.PulumiCommand
}

// New prepares an isolated Pulumi environment under t.TempDir, failing the test with an
// instruction to run `make tools` when the binaries are missing.
func New(t testing.TB) *Env {
	t.Helper()
	bin, err := repo.Bin()
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.RequireBinaries(bin, "pulumi", "pulumi-language-yaml", "pulumi-resource-stackwright-testing"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &Env{
		Bin:     bin,
		Home:    filepath.Join(dir, "home"),
		Backend: "file://" + filepath.Join(dir, "state"),
		Files:   filepath.Join(dir, "files"),
	}
	for _, d := range []string{e.Home, filepath.Join(dir, "state"), e.Files} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatalf("failed to create %s: %v", d, err)
		}
	}
	// NewPulumiCommand expects <Root>/bin/pulumi.
	e.Command, err = auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: filepath.Dir(bin)})
	if err != nil {
		t.Fatalf("failed to use %s/pulumi: %v", bin, err)
	}
	return e
}

// EnvVars is the environment every pulumi invocation of this Env runs with. PATH starts
// with Bin so the CLI finds the YAML language host and the test provider as ambient plugins.
func (e *Env) EnvVars() map[string]string {
	return map[string]string{
		"PATH":                     e.Bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"PULUMI_BACKEND_URL":       e.Backend,
		"PULUMI_CONFIG_PASSPHRASE": Passphrase,
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
		"PULUMI_SKIP_UPDATE_CHECK":                    "true",
		ProviderRootEnv:                               e.Files,
	}
}

// WorkspaceOptions returns the Automation API options that bind a LocalWorkspace in
// workDir to this Env.
func (e *Env) WorkspaceOptions(workDir string) []auto.LocalWorkspaceOption {
	return []auto.LocalWorkspaceOption{
		auto.WorkDir(workDir),
		auto.Pulumi(e.Command),
		auto.PulumiHome(e.Home),
		auto.EnvVars(e.EnvVars()),
		auto.SecretsProvider("passphrase"),
	}
}
