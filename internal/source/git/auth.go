package git

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/inputs"
	"github.com/stackwright/stackwright/internal/source/git/githubapp"
)

// Keys of the deprecated spec.gitAuthSecret, as PKO reads them: sshPrivateKey (with an
// optional key passphrase in password) wins over accessToken, which wins over
// username + password.
const (
	keySSHPrivateKey = "sshPrivateKey"
	keyPassword      = "password"
	keyAccessToken   = "accessToken"
	keyUsername      = "username"
)

// KnownHostsKey is the key, in the Secret that holds the SSH private key, with the SSH
// server's host keys in OpenSSH known_hosts format (what `ssh-keyscan <host>` prints;
// hashed entries and [host]:port patterns work). PKO had no equivalent: it relied on the
// workspace image's ~/.ssh/known_hosts. Flux names the same key known_hosts. Host keys are
// never skipped: without this key SSH sources are refused.
const KnownHostsKey = "known_hosts"

// tokenUsername is the HTTP user name sent with an access token. Git hosts ignore it but
// refuse an empty one; PKO (through the Automation API) sends "git".
const tokenUsername = "git"

// authMethod says how credentials are presented to the server.
type authMethod int

const (
	authNone authMethod = iota
	authToken
	authBasic
	authSSH
	// authGitHubApp mints installation tokens from a GitHub App's credentials (see
	// package githubapp) and presents them like an access token.
	authGitHubApp
)

// credentials are the resolved git credentials of a Stack. They stay in memory: what reaches
// the disk or a cache key is an HMAC of them (see Cache).
type credentials struct {
	method authMethod
	// field is the spec field that chose them, for messages.
	field string
	// secrets are the names of the Secrets that supplied them, for messages.
	secrets []string

	username   string
	password   string // basic password or access token
	privateKey []byte // SSH key, or the GitHub App's PEM RSA key
	// appID and installationID are the GitHub App's (authGitHubApp).
	appID, installationID int64
	passphrase            string
	knownHosts            []byte
	// knownHostsMissing explains why SSH host keys are unavailable; it is reported only if
	// the repository URL turns out to use SSH.
	knownHostsMissing string
}

// origin names where the credentials came from, for messages that must say which Secret
// to fix without revealing what it holds.
func (c *credentials) origin() string {
	switch len(c.secrets) {
	case 0:
		return "the literal values in " + c.field
	case 1:
		return fmt.Sprintf("Secret %q (%s)", c.secrets[0], c.field)
	}
	quoted := make([]string, len(c.secrets))
	for i, s := range c.secrets {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("Secrets %s (%s)", strings.Join(quoted, ", "), c.field)
}

// sensitive lists the values that must never appear in a message: a private key's lines
// too, since a parser quoting one line would not quote the whole key.
func (c *credentials) sensitive() []string {
	out := []string{c.password, c.passphrase, string(c.privateKey)}
	for line := range strings.SplitSeq(string(c.privateKey), "\n") {
		if line = strings.TrimSpace(line); len(line) >= 16 && !strings.HasPrefix(line, "-----") {
			out = append(out, line)
		}
	}
	return out
}

// secretReader reads a Stack's git credentials: Secrets and literals only, through the
// inputs' reference reader (a missing Secret or key is SourceUnavailable).
type secretReader struct {
	*inputs.Refs
}

// ref reads a ResourceRef. Only Secret and Literal references are accepted: Env and FS
// would read the manager's own environment and files, which Stack authors must not reach
// (internal/inputs refuses them too unless the manager opts in, and git credentials have
// no reason to come from there).
func (r secretReader) ref(ref *pulumiv1.ResourceRef, field string) (string, error) {
	if ref.Type == pulumiv1.ResourceSelectorEnv || ref.Type == pulumiv1.ResourceSelectorFS {
		return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "%s: git credentials must come from a Secret or a literal, not from references of type %s (they would read the manager's own environment or files)", field, ref.Type)
	}
	return r.Ref(*ref, field)
}

// resolveCredentials reads the git credentials a Stack's (or a StackSet generator's)
// gitAuth or gitAuthSecret name in namespace ns. gitAuth wins over the deprecated
// gitAuthSecret: PKO's workspace applies gitAuth last, so that is what its clones used.
func resolveCredentials(ctx context.Context, c client.Reader, ns string, auth *pulumiv1.GitAuthConfig, authSecret string) (*credentials, error) {
	r := secretReader{inputs.NewRefs(ctx, c, ns, inputs.Options{}, pulumiv1.ReasonSourceUnavailable)}
	var (
		cred *credentials
		err  error
	)
	switch {
	case auth != nil:
		cred, err = r.gitAuth(auth)
	case authSecret != "":
		cred, err = r.gitAuthSecret(authSecret)
	default:
		return &credentials{method: authNone}, nil
	}
	if err != nil {
		return nil, err
	}
	cred.secrets = r.SecretNames()
	return cred, nil
}

// gitAuth follows PKO's order when several modes are set: sshAuth, accessToken, basicAuth;
// githubApp when none of them is set.
func (r secretReader) gitAuth(a *pulumiv1.GitAuthConfig) (*credentials, error) {
	switch {
	case a.SSHAuth != nil:
		const field = "spec.gitAuth.sshAuth"
		key, err := r.ref(&a.SSHAuth.SSHPrivateKey, field+".sshPrivateKey")
		if err != nil {
			return nil, err
		}
		cred := &credentials{method: authSSH, field: field, privateKey: []byte(key)}
		if a.SSHAuth.Password != nil {
			if cred.passphrase, err = r.ref(a.SSHAuth.Password, field+".password"); err != nil {
				return nil, err
			}
		}
		if ref := a.SSHAuth.SSHPrivateKey; ref.Type == pulumiv1.ResourceSelectorSecret && ref.Secret != nil {
			if err := r.knownHosts(cred, ref.Secret.Name); err != nil {
				return nil, err
			}
		} else {
			cred.knownHostsMissing = fmt.Sprintf("SSH host keys are read from the %q key of the Secret that holds the private key, but %s.sshPrivateKey is not a Secret reference: store the key and its known_hosts in a Secret", KnownHostsKey, field)
		}
		return cred, nil
	case a.AccessToken != nil:
		const field = "spec.gitAuth.accessToken"
		token, err := r.ref(a.AccessToken, field)
		if err != nil {
			return nil, err
		}
		return &credentials{method: authToken, field: field, username: tokenUsername, password: token}, nil
	case a.BasicAuth != nil:
		const field = "spec.gitAuth.basicAuth"
		user, err := r.ref(&a.BasicAuth.UserName, field+".userName")
		if err != nil {
			return nil, err
		}
		pass, err := r.ref(&a.BasicAuth.Password, field+".password")
		if err != nil {
			return nil, err
		}
		return &credentials{method: authBasic, field: field, username: user, password: pass}, nil
	case a.GitHubApp != nil:
		return r.githubApp(a.GitHubApp)
	}
	return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.gitAuth must set one of sshAuth, accessToken, basicAuth or githubApp")
}

// githubApp reads a GitHub App's credentials. The IDs are GitHub's numbers; anything else
// in their Secret keys is a Secret to fix, retried like a missing key. The values are not
// quoted back: a key mixed up with another could hold the private key.
func (r secretReader) githubApp(app *pulumiv1.GitHubAppAuth) (*credentials, error) {
	const field = "spec.gitAuth.githubApp"
	cred := &credentials{method: authGitHubApp, field: field, username: githubapp.Username}
	for _, id := range []struct {
		ref   *pulumiv1.ResourceRef
		field string
		out   *int64
	}{
		{&app.AppID, field + ".appID", &cred.appID},
		{&app.InstallationID, field + ".installationID", &cred.installationID},
	} {
		v, err := r.ref(id.ref, id.field)
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n <= 0 {
			where := id.field
			if id.ref.Secret != nil {
				where = fmt.Sprintf("%s (Secret %q, key %q)", id.field, id.ref.Secret.Name, id.ref.Secret.Key)
			}
			return nil, fault.Retry(pulumiv1.ReasonSourceUnavailable, "%s is not a GitHub ID (a positive whole number)", where)
		}
		*id.out = n
	}
	key, err := r.ref(&app.PrivateKey, field+".privateKey")
	if err != nil {
		return nil, err
	}
	cred.privateKey = []byte(key)
	return cred, nil
}

func (r secretReader) gitAuthSecret(name string) (*credentials, error) {
	const field = "spec.gitAuthSecret"
	s, err := r.Secret(name, field)
	if err != nil {
		return nil, err
	}
	switch {
	case has(s, keySSHPrivateKey):
		cred := &credentials{method: authSSH, field: field, privateKey: s.Data[keySSHPrivateKey], passphrase: string(s.Data[keyPassword])}
		return cred, r.knownHosts(cred, name)
	case has(s, keyAccessToken):
		return &credentials{method: authToken, field: field, username: tokenUsername, password: string(s.Data[keyAccessToken])}, nil
	case has(s, keyUsername):
		pass, err := r.SecretKey(name, keyPassword, field)
		if err != nil {
			return nil, err
		}
		return &credentials{method: authBasic, field: field, username: string(s.Data[keyUsername]), password: pass}, nil
	}
	return nil, fault.Retry(pulumiv1.ReasonSourceUnavailable, "Secret %q (%s) has none of the keys %q, %q or %q", name, field, keySSHPrivateKey, keyAccessToken, keyUsername)
}

// knownHosts reads the host keys next to the private key. Their absence is not an error
// yet: it only matters for ssh:// URLs, which the caller knows about.
func (r secretReader) knownHosts(cred *credentials, secret string) error {
	s, err := r.Secret(secret, cred.field)
	if err != nil {
		return err
	}
	if kh, ok := s.Data[KnownHostsKey]; ok && len(strings.TrimSpace(string(kh))) > 0 {
		cred.knownHosts = kh
		return nil
	}
	cred.knownHostsMissing = fmt.Sprintf("Secret %q has no %q key: SSH host keys are never skipped, so add the server's host keys to it in known_hosts format (for example the output of `ssh-keyscan <host>`)", secret, KnownHostsKey)
	return nil
}

func has(s *corev1.Secret, key string) bool {
	_, ok := s.Data[key]
	return ok
}
