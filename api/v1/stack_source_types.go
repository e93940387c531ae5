package v1

// GitSource fetches the program from a git repository. Its fields are inlined
// at the top level of the Stack spec, as in PKO.
type GitSource struct {
	// ProjectRepo is the URL of the git repository holding the Pulumi project.
	// +optional
	ProjectRepo string `json:"projectRepo,omitempty"`

	// Commit pins the revision to a commit SHA. Mutually exclusive with
	// branch; one of the two is required with projectRepo.
	// +optional
	Commit string `json:"commit,omitempty"`

	// Branch tracks a branch (short name or full ref such as refs/heads/main):
	// it is polled every resyncFrequencySeconds and each new commit is
	// deployed. Mutually exclusive with commit.
	// +optional
	Branch string `json:"branch,omitempty"`

	// RepoDir is the directory inside the repository that holds Pulumi.yaml.
	// +optional
	RepoDir string `json:"repoDir,omitempty"`

	// Shallow fetches only the wanted commit instead of the full history.
	// +optional
	Shallow bool `json:"shallow,omitempty"`

	// GitAuth configures credentials for the repository.
	// +optional
	GitAuth *GitAuthConfig `json:"gitAuth,omitempty"`

	// GitAuthSecret names a Secret whose keys select the authentication mode:
	// "sshPrivateKey" (+ optional "password"), else "accessToken", else
	// "username" + "password".
	// Deprecated: use gitAuth.
	// +optional
	GitAuthSecret string `json:"gitAuthSecret,omitempty"`
}

// GitAuthConfig holds git credentials. When several modes are set, the first
// of sshAuth, accessToken, basicAuth (PKO's order) is used.
type GitAuthConfig struct {
	// AccessToken is a personal access token, used over HTTPS.
	// +optional
	AccessToken *ResourceRef `json:"accessToken,omitempty"`

	// SSHAuth is an SSH private key with an optional passphrase.
	// +optional
	SSHAuth *SSHAuth `json:"sshAuth,omitempty"`

	// BasicAuth is a user name and password, used over HTTPS.
	// +optional
	BasicAuth *BasicAuth `json:"basicAuth,omitempty"`

	// GitHubApp authenticates as a GitHub App installation, in PKO's shape: short-lived
	// installation tokens are minted from the app's credentials and sent over HTTPS as
	// the password of user x-access-token. The API asked for them is
	// https://api.github.com for github.com repositories, and https://<host>/api/v3
	// (GitHub Enterprise Server) for any other host.
	// +optional
	GitHubApp *GitHubAppAuth `json:"githubApp,omitempty"`
}

// GitHubAppAuth is PKO's GitHub App credential: the app's ID, the installation's ID and
// the app's private key.
type GitHubAppAuth struct {
	// AppID is the app's numeric ID.
	AppID ResourceRef `json:"appID"`
	// InstallationID is the numeric ID of the app's installation on the repository's
	// owner.
	InstallationID ResourceRef `json:"installationID"`
	// PrivateKey is the app's PEM-encoded RSA private key.
	PrivateKey ResourceRef `json:"privateKey"`
}

// SSHAuth is SSH key authentication for git.
type SSHAuth struct {
	// SSHPrivateKey is the PEM-encoded private key.
	SSHPrivateKey ResourceRef `json:"sshPrivateKey"`

	// Password is the key's passphrase, if it has one.
	// +optional
	Password *ResourceRef `json:"password,omitempty"`
}

// BasicAuth is user name and password authentication for git.
type BasicAuth struct {
	// UserName is the user name.
	UserName ResourceRef `json:"userName"`

	// Password is the password or token.
	Password ResourceRef `json:"password"`
}

// FluxSource points at a Flux source object whose artifact holds the program.
type FluxSource struct {
	// SourceRef identifies the Flux source object in the Stack's namespace.
	SourceRef FluxSourceReference `json:"sourceRef"`

	// Dir is the directory inside the artifact that holds Pulumi.yaml.
	// +optional
	Dir string `json:"dir,omitempty"`
}

// FluxSourceReference identifies a Flux source object by API version, kind and
// name.
type FluxSourceReference struct {
	// APIVersion of the source, e.g. "source.toolkit.fluxcd.io/v1".
	APIVersion string `json:"apiVersion"`

	// Kind of the source, e.g. "GitRepository", "OCIRepository" or "Bucket".
	Kind string `json:"kind"`

	// Name of the source object.
	Name string `json:"name"`
}

// ProgramReference names a Program object in the Stack's namespace.
type ProgramReference struct {
	// Name of the Program.
	Name string `json:"name"`
}
