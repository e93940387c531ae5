package git

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/skeema/knownhosts"
	gossh "golang.org/x/crypto/ssh"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
)

// dialTimeout bounds an SSH connection attempt; go-git's SSH transport dials without the
// caller's context.
const dialTimeout = 30 * time.Second

// parseURL accepts the URLs go-git can fetch from over the network. file:// URLs and local
// paths are refused: they would let any Stack author read repositories (or anything git
// can open) on the manager's own disk.
func parseURL(raw string) (*transport.Endpoint, error) {
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.projectRepo %q is not a git URL: %v", redactURL(raw), err)
	}
	switch ep.Protocol {
	case "https", "http", "ssh", "git":
		return ep, nil
	case "file":
		return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.projectRepo %q is a local path: only https, http, ssh and git URLs are allowed", redactURL(raw))
	}
	return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.projectRepo %q uses the unsupported protocol %q", redactURL(raw), ep.Protocol)
}

// redactURL hides a password embedded in a URL, so messages can name the repository.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "redacted")
			return u.String()
		}
	}
	return raw
}

// authFor turns credentials into a go-git auth method for ep, refusing combinations that
// cannot work (SSH keys over HTTPS, passwords over SSH, SSH without host keys).
func authFor(ep *transport.Endpoint, cred *credentials, tmpDir string) (transport.AuthMethod, error) {
	isSSH := ep.Protocol == "ssh"
	switch cred.method {
	case authNone:
		if isSSH {
			return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.projectRepo is an SSH URL: set spec.gitAuth.sshAuth (with the server's host keys under %q in the key's Secret)", KnownHostsKey)
		}
		return nil, nil
	case authToken, authBasic:
		if isSSH {
			return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "%s gives a user name and password or token, which only work with https URLs, but spec.projectRepo is an SSH URL", cred.field)
		}
		if ep.Protocol == "git" {
			return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "%s gives credentials, but git:// URLs cannot carry any", cred.field)
		}
		return &githttp.BasicAuth{Username: cred.username, Password: cred.password}, nil
	case authGitHubApp:
		if ep.Protocol != "https" && ep.Protocol != "http" {
			return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "%s gives GitHub App installation tokens, which only work with https URLs, but spec.projectRepo uses %s", cred.field, ep.Protocol)
		}
		// Each session gets the token of the moment (remote.sessionAuth).
		return nil, nil
	case authSSH:
		if !isSSH {
			return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "%s gives an SSH key, which only works with SSH URLs (ssh://... or git@host:path), but spec.projectRepo uses %s", cred.field, ep.Protocol)
		}
		return newSSHAuth(ep, cred, tmpDir)
	}
	return nil, fmt.Errorf("failed to build git auth: unknown method %d", cred.method)
}

// sshAuth authenticates with one private key and verifies the server against known_hosts.
// It implements go-git's ssh.AuthMethod; go-git only consults its own known_hosts files
// when the auth method brings no host key callback.
type sshAuth struct {
	user         string
	signer       gossh.Signer
	hostKeys     *knownhosts.HostKeyDB
	hostWithPort string
}

func newSSHAuth(ep *transport.Endpoint, cred *credentials, tmpDir string) (*sshAuth, error) {
	if len(cred.knownHosts) == 0 {
		return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "%s", cred.knownHostsMissing)
	}
	var (
		signer gossh.Signer
		err    error
	)
	if cred.passphrase != "" {
		signer, err = gossh.ParsePrivateKeyWithPassphrase(cred.privateKey, []byte(cred.passphrase))
	} else {
		signer, err = gossh.ParsePrivateKey(cred.privateKey)
	}
	if err != nil {
		var missing *gossh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, fault.Retry(pulumiv1.ReasonSourceUnavailable, "the SSH private key from %s is protected by a passphrase, but none is given", cred.origin())
		}
		// Parse errors describe the format, never the key.
		return nil, fault.Retry(pulumiv1.ReasonSourceUnavailable, "the SSH private key from %s cannot be used: %v", cred.origin(), err)
	}
	hostKeys, err := parseKnownHosts(cred.knownHosts, tmpDir)
	if err != nil {
		return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "the %q key of %s is not valid known_hosts content: %v", KnownHostsKey, cred.origin(), err)
	}
	user := ep.User
	if user == "" {
		// PKO (through the Automation API) always logs in as "git"; a user in the URL is
		// more specific and equal to it for every major host.
		user = "git"
	}
	port := ep.Port
	if port == 0 {
		port = 22
	}
	return &sshAuth{user: user, signer: signer, hostKeys: hostKeys, hostWithPort: net.JoinHostPort(ep.Host, strconv.Itoa(port))}, nil
}

// parseKnownHosts parses known_hosts content. The parsers (x/crypto's and skeema's, which
// adds the host key algorithms to offer) only read files, so the content goes through a
// short-lived file; host keys are public, so that file holds nothing secret.
func parseKnownHosts(content []byte, tmpDir string) (*knownhosts.HostKeyDB, error) {
	f, err := os.CreateTemp(tmpDir, "known_hosts-*")
	if err != nil {
		return nil, fmt.Errorf("failed to create known_hosts file: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(content); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("failed to write known_hosts file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("failed to write known_hosts file: %w", err)
	}
	db, err := knownhosts.NewDB(f.Name())
	if err != nil {
		// The error names the temp file; what matters is the line.
		return nil, errors.New(strings.ReplaceAll(err.Error(), f.Name(), KnownHostsKey))
	}
	return db, nil
}

func (a *sshAuth) Name() string   { return "ssh-public-keys" }
func (a *sshAuth) String() string { return fmt.Sprintf("user: %s, name: %s", a.user, a.Name()) }

// ClientConfig implements go-git's ssh.AuthMethod. The host key algorithms are limited to
// those known_hosts has for this host; otherwise the server might present another of its
// keys, which would be reported as a mismatch.
func (a *sshAuth) ClientConfig() (*gossh.ClientConfig, error) {
	return &gossh.ClientConfig{
		User:              a.user,
		Auth:              []gossh.AuthMethod{gossh.PublicKeys(a.signer)},
		HostKeyCallback:   a.hostKeys.HostKeyCallback(),
		HostKeyAlgorithms: a.hostKeys.HostKeyAlgorithms(a.hostWithPort),
		Timeout:           dialTimeout,
	}, nil
}
