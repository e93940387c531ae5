package git

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
)

// Faults say what to fix, with the reason the Stack's conditions need, and never carry a
// credential.
func TestResolver_Resolve_Faults(t *testing.T) {
	h := newHTTPRepo(t)
	good := h.secret
	wrong := secret("wrong-creds", map[string]string{"username": testUser, "password": "not-the-password"})
	tests := []struct {
		name     string
		src      pulumiv1.GitSource
		objs     []client.Object
		reason   string
		stalled  bool
		contains []string
	}{
		{
			name:     "wrong password names the Secret",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuth: basicAuth("wrong-creds")},
			objs:     []client.Object{wrong},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`Secret "wrong-creds"`, "refused the credentials"},
		},
		{
			name:     "no credentials for a private repository",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main"},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{"requires credentials"},
		},
		{
			name:     "missing Secret",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuth: basicAuth("absent")},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`Secret "absent"`, "not found"},
		},
		{
			name:     "missing key",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuth: &pulumiv1.GitAuthConfig{BasicAuth: &pulumiv1.BasicAuth{UserName: secretRef("git-creds", "username"), Password: secretRef("git-creds", "pass")}}},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`Secret "git-creds" has no key "pass"`},
		},
		{
			name:     "gitAuthSecret without known keys",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuthSecret: "odd"},
			objs:     []client.Object{secret("odd", map[string]string{"token": "x"})},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`Secret "odd"`, `"accessToken"`},
		},
		{
			name: "cross-namespace Secret",
			src: pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuth: &pulumiv1.GitAuthConfig{AccessToken: &pulumiv1.ResourceRef{
				Type: pulumiv1.ResourceSelectorSecret, ResourceSelector: pulumiv1.ResourceSelector{Secret: &pulumiv1.SecretSelector{Namespace: "other", Name: "t", Key: "k"}},
			}}},
			reason:   pulumiv1.ReasonCrossNamespaceReference,
			stalled:  true,
			contains: []string{"other/t"},
		},
		{
			name: "Env reference",
			src: pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuth: &pulumiv1.GitAuthConfig{AccessToken: &pulumiv1.ResourceRef{
				Type: pulumiv1.ResourceSelectorEnv, ResourceSelector: pulumiv1.ResourceSelector{Env: &pulumiv1.EnvSelector{Name: "HOME"}},
			}}},
			reason:   pulumiv1.ReasonSpecInvalid,
			stalled:  true,
			contains: []string{"spec.gitAuth.accessToken", "Env"},
		},
		{
			name:     "nonexistent branch",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "feature/nope", GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{`branch "feature/nope" not found`},
		},
		{
			name:     "nonexistent repository",
			src:      pulumiv1.GitSource{ProjectRepo: h.server.URL + "/nope.git", Branch: "main", GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{"nope.git"},
		},
		{
			name:     "unreachable server",
			src:      pulumiv1.GitSource{ProjectRepo: "http://127.0.0.1:1/infra.git", Branch: "main", GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{"127.0.0.1:1", "connection refused"},
		},
		{
			name:     "unknown commit",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Commit: strings.Repeat("ab", 20), GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSourceUnavailable,
			contains: []string{"commit " + strings.Repeat("ab", 20) + " not found"},
		},
		{
			name:     "abbreviated commit",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Commit: h.first[:7], GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSpecInvalid,
			stalled:  true,
			contains: []string{"abbreviated", "40-character"},
		},
		{
			name:     "repoDir climbing out",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", RepoDir: "infra/../../etc", GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSpecInvalid,
			stalled:  true,
			contains: []string{"infra/../../etc"},
		},
		{
			name:     "repoDir missing at the commit",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", RepoDir: "infra/missing", GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSpecInvalid,
			stalled:  true,
			contains: []string{`"infra/missing" does not exist at commit ` + h.first},
		},
		{
			name:     "repoDir without Pulumi.yaml",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", RepoDir: "shared", GitAuth: basicAuth("git-creds")},
			objs:     []client.Object{good},
			reason:   pulumiv1.ReasonSpecInvalid,
			stalled:  true,
			contains: []string{`spec.repoDir "shared" has no Pulumi.yaml at commit ` + h.first},
		},
		{
			name:     "local path",
			src:      pulumiv1.GitSource{ProjectRepo: h.repo.Bare, Branch: "main"},
			reason:   pulumiv1.ReasonSpecInvalid,
			stalled:  true,
			contains: []string{"local path"},
		},
		{
			name:     "SSH key for an https URL",
			src:      pulumiv1.GitSource{ProjectRepo: h.url, Branch: "main", GitAuth: sshAuthFrom("ssh")},
			objs:     []client.Object{secret("ssh", map[string]string{"key": "k", KnownHostsKey: "x"})},
			reason:   pulumiv1.ReasonSpecInvalid,
			stalled:  true,
			contains: []string{"only works with SSH URLs"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objs...)
			_, err := f.resolver.Resolve(ctx(t), newStack("app", tc.src))
			wantFault(t, err, tc.reason, tc.stalled, tc.contains, []string{testPassword, "not-the-password", testToken})
		})
	}
}

// A tree beyond the manager's limits stalls with the limit in the message rather than
// filling the disk.
func TestResolver_Resolve_TreeOverLimits(t *testing.T) {
	h := newHTTPRepo(t)
	tests := []struct {
		name     string
		limits   artifact.Limits
		contains string
	}{
		{name: "too many files", limits: artifact.Limits{MaxFiles: 3}, contains: "more than 3 files and directories"},
		{name: "too many bytes", limits: artifact.Limits{MaxBytes: 10}, contains: "more than 10 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, h.secret)
			f.resolver.Limits = tc.limits
			_, err := f.resolver.Resolve(ctx(t), h.branchStack("app", "main"))
			wantFault(t, err, pulumiv1.ReasonSpecInvalid, true, []string{tc.contains, h.first}, nil)
		})
	}
}
