package git

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// sshRepo is a repository served over SSH with one accepted client key.
type sshRepo struct {
	server *sshServer
	url    string
	first  string
	key    []byte
}

func newSSHRepo(t *testing.T, passphrase string) *sshRepo {
	t.Helper()
	root := t.TempDir()
	_, first := gitserver.NewRepo(t, root, "infra", projectFiles1)
	key, pub := sshKey(t, passphrase)
	s := newSSHServer(t, root, pub)
	return &sshRepo{server: s, url: "ssh://git@" + s.addr + "/infra.git", first: first, key: key}
}

func TestResolver_Resolve_SSHKeyAuth(t *testing.T) {
	tests := []struct {
		name       string
		passphrase string
		auth       func(*sshRepo) (*pulumiv1.GitAuthConfig, string, client.Object)
	}{
		{
			name: "sshAuth with known_hosts next to the key",
			auth: func(r *sshRepo) (*pulumiv1.GitAuthConfig, string, client.Object) {
				return sshAuthFrom("ssh"), "", secret("ssh", map[string]string{"key": string(r.key), KnownHostsKey: knownHostsLine(r.server.addr, r.server.hostKey)})
			},
		},
		{
			name:       "sshAuth with a passphrase",
			passphrase: "key passphrase",
			auth: func(r *sshRepo) (*pulumiv1.GitAuthConfig, string, client.Object) {
				a := sshAuthFrom("ssh")
				a.SSHAuth.Password = ptr(secretRef("ssh", "passphrase"))
				return a, "", secret("ssh", map[string]string{"key": string(r.key), "passphrase": "key passphrase", KnownHostsKey: knownHostsLine(r.server.addr, r.server.hostKey)})
			},
		},
		{
			name: "gitAuthSecret with sshPrivateKey",
			auth: func(r *sshRepo) (*pulumiv1.GitAuthConfig, string, client.Object) {
				return nil, "legacy", secret("legacy", map[string]string{"sshPrivateKey": string(r.key), KnownHostsKey: knownHostsLine(r.server.addr, r.server.hostKey)})
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newSSHRepo(t, tc.passphrase)
			auth, legacy, obj := tc.auth(r)
			f := newFixture(t, obj)
			stack := newStack("app", pulumiv1.GitSource{ProjectRepo: r.url, Branch: "main", RepoDir: "infra/app", GitAuth: auth, GitAuthSecret: legacy})

			a := f.resolve(t, stack)

			if a.Revision != r.first {
				t.Errorf("Revision = %s, want %s", a.Revision, r.first)
			}
			if got := f.extract(t, a)["infra/app/Pulumi.yaml"]; got != projectFiles1["infra/app/Pulumi.yaml"] {
				t.Errorf("Pulumi.yaml = %q", got)
			}
			// The listing and the fetch share one SSH connection.
			if got := r.server.execs.Load(); got != 1 {
				t.Errorf("server ran git-upload-pack %d times, want 1", got)
			}
		})
	}
}

func TestResolver_Resolve_SSHFaults(t *testing.T) {
	r := newSSHRepo(t, "")
	_, otherHost := sshKey(t, "")
	otherKey, _ := sshKey(t, "")
	goodHosts := knownHostsLine(r.server.addr, r.server.hostKey)
	tests := []struct {
		name     string
		data     map[string]string
		auth     *pulumiv1.GitAuthConfig
		reason   string
		stalled  bool
		contains []string
	}{
		{
			name:     "no known_hosts",
			data:     map[string]string{"key": string(r.key)},
			reason:   pulumiv1.ReasonSpecInvalid,
			stalled:  true,
			contains: []string{`Secret "ssh" has no "known_hosts" key`, "ssh-keyscan"},
		},
		{
			name:     "known_hosts with another key for the host",
			data:     map[string]string{"key": string(r.key), KnownHostsKey: knownHostsLine(r.server.addr, otherHost)},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{"host key does not match", `Secret "ssh"`},
		},
		{
			name:     "known_hosts without the host",
			data:     map[string]string{"key": string(r.key), KnownHostsKey: knownHostsLine("192.0.2.1:22", r.server.hostKey)},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{"no host key for 127.0.0.1"},
		},
		{
			name:     "key the server does not accept",
			data:     map[string]string{"key": string(otherKey), KnownHostsKey: goodHosts},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`refused the credentials from Secret "ssh"`},
		},
		{
			name:     "not a private key",
			data:     map[string]string{"key": "garbage", KnownHostsKey: goodHosts},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`SSH private key from Secret "ssh"`},
		},
		{
			name:     "literal key has no known_hosts",
			auth:     &pulumiv1.GitAuthConfig{SSHAuth: &pulumiv1.SSHAuth{SSHPrivateKey: literalRef(string(r.key))}},
			reason:   pulumiv1.ReasonSpecInvalid,
			stalled:  true,
			contains: []string{"not a Secret reference"},
		},
		{
			name:     "no credentials",
			auth:     &pulumiv1.GitAuthConfig{},
			reason:   pulumiv1.ReasonSpecInvalid,
			stalled:  true,
			contains: []string{"must set one of"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.data != nil {
				objs = append(objs, secret("ssh", tc.data))
			}
			auth := tc.auth
			if auth == nil {
				auth = sshAuthFrom("ssh")
			}
			f := newFixture(t, objs...)
			_, err := f.resolver.Resolve(ctx(t), newStack("app", pulumiv1.GitSource{ProjectRepo: r.url, Branch: "main", GitAuth: auth}))
			wantFault(t, err, tc.reason, tc.stalled, tc.contains, []string{string(r.key), "PRIVATE KEY"})
		})
	}
}
