package job

import (
	"encoding/json"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/engine"
)

// What a runner Pod finds, and where. The work Secret and the token are mounted by the
// kubelet: the runner's ServiceAccount needs no rights at all.
const (
	// TokenAudience is the audience of the projected ServiceAccount token a runner
	// presents to the manager. The API server refuses it, so it grants nothing there.
	TokenAudience = "stackwright.dev/runner"
	// WorkDir holds the work Secret's files: WorkFile and ManagerCertFile.
	WorkDir = "/var/run/stackwright/work"
	// WorkFile is the JSON Work of the runner's Update.
	WorkFile = "work.json"
	// ManagerCertFile is the manager's serving certificate, which the runner pins.
	ManagerCertFile = "manager.crt"
	// TokenDir holds the projected token, in TokenFile.
	TokenDir  = "/var/run/stackwright/token"
	TokenFile = "token"
	// ScratchDir is the runner's writable emptyDir: HOME, PULUMI_HOME, the work tree.
	ScratchDir = "/tmp"
	// IdentityDir holds the Stack's identity tokens (spec.stackwright.identityTokens):
	// token i at IdentityDir/<i>/token. They sit apart from TokenDir so that the runner's
	// own token is never among what the program is pointed to.
	IdentityDir = "/var/run/secrets/stackwright.dev/identity"
	// GoogleCredentialsFile, in WorkDir, is the external_account credential configuration
	// of the identity token announced to Google.
	GoogleCredentialsFile = "google-credentials.json"

	// Paths of the manager's runner API.
	artifactPath   = "/v1/artifacts/"
	resultPath     = "/v1/results/"
	pluginsAPIPath = "/v1/plugins/"

	// PluginDownloadsFlag is the runner's flag that turns plugin downloads on.
	PluginDownloadsFlag = "plugin-downloads"
)

// Work is everything a runner needs to perform its Update, resolved by the manager with
// its own rights: the engine request (config, secrets and environment included) and the
// artifact to fetch. It travels in a Secret owned by the Update.
type Work struct {
	Namespace      string         `json:"namespace"`
	Update         string         `json:"update"`
	UpdateUID      string         `json:"updateUID"`
	ArtifactDigest string         `json:"artifactDigest"`
	ProjectDir     string         `json:"projectDir,omitempty"`
	Revision       string         `json:"revision,omitempty"`
	ManagerURL     string         `json:"managerURL"`
	Request        engine.Request `json:"request"`
}

// Result is what a runner reports: the Update's status as the runner filled it in
// (runner.Finish) and the outputs of a successful run.
type Result struct {
	UpdateUID string                   `json:"updateUID"`
	Status    v1alpha1.UpdateStatus    `json:"status"`
	Outputs   map[string]engine.Output `json:"outputs,omitempty"`
	// Plan is the update plan a preview with options.savePlan saved, and Steps its
	// planned operations with their inputs (secrets masked), for the policies.
	Plan  []byte        `json:"plan,omitempty"`
	Steps []engine.Step `json:"steps,omitempty"`
}

// decodeWork parses a Work document.
func decodeWork(b []byte) (*Work, error) {
	w := &Work{}
	if err := json.Unmarshal(b, w); err != nil {
		return nil, err
	}
	return w, nil
}
