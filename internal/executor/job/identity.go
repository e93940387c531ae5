package job

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
)

// Variables through which cloud SDKs find a web identity token.
const (
	EnvAWSWebIdentityTokenFile = "AWS_WEB_IDENTITY_TOKEN_FILE"
	EnvAzureFederatedTokenFile = "AZURE_FEDERATED_TOKEN_FILE"
	EnvGoogleCredentials       = "GOOGLE_APPLICATION_CREDENTIALS"
)

// identityVolume is the projected volume holding every identity token of a runner Pod.
const identityVolume = "identity"

// identitySetup is what a Stack's identity tokens add to its runner: one projected volume
// with every token, the variables that tell the program where they are, and the Google
// credential configuration when a token is announced to Google.
type identitySetup struct {
	volume corev1.Volume
	mount  corev1.VolumeMount
	env    map[string]string
	// google is the content of GoogleCredentialsFile, nil when no token is announced to
	// Google.
	google []byte
}

// IdentityTokenPath is where token i of spec.stackwright.identityTokens is in the runner
// Pod. The index, not the audience, names the directory: audiences are URLs.
func IdentityTokenPath(i int) string {
	return path.Join(IdentityDir, strconv.Itoa(i), TokenFile)
}

// newIdentity returns what tokens add to a runner Pod, or nil when there are none. taken
// maps the variables the program's environment already has to where they come from: an
// announced variable that would silently replace one of them (or another token's) is
// refused, since either way one of the two settings would not be what runs.
func newIdentity(tokens []pulumiv1.IdentityToken, taken map[string]string, mode *int32) (*identitySetup, error) {
	if len(tokens) == 0 {
		return nil, nil
	}
	id := &identitySetup{
		volume: corev1.Volume{Name: identityVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: mode}}},
		mount:  corev1.VolumeMount{Name: identityVolume, MountPath: IdentityDir, ReadOnly: true},
		env:    map[string]string{},
	}
	setBy := map[string]string{}
	for i, t := range tokens {
		field := fmt.Sprintf("spec.stackwright.identityTokens[%d]", i)
		file := IdentityTokenPath(i)
		id.volume.Projected.Sources = append(id.volume.Projected.Sources, corev1.VolumeProjection{
			ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: t.Audience, ExpirationSeconds: ptr(t.Expiration()), Path: path.Join(strconv.Itoa(i), TokenFile),
			},
		})
		set := func(name, value string) error {
			if from, ok := taken[name]; ok {
				return fault.Stall(pulumiv1.ReasonSpecInvalid, "%s sets %s, which %s sets too: set it in one place only", field, name, from)
			}
			if prev, ok := id.env[name]; ok && prev != value {
				return fault.Stall(pulumiv1.ReasonSpecInvalid, "%s and %s both set %s", setBy[name], field, name)
			}
			id.env[name], setBy[name] = value, field
			return nil
		}
		var err error
		switch t.Announce {
		case pulumiv1.AnnounceAWS:
			err = set(EnvAWSWebIdentityTokenFile, file)
		case pulumiv1.AnnounceAzure:
			err = set(EnvAzureFederatedTokenFile, file)
		case pulumiv1.AnnounceGoogle:
			if err = set(EnvGoogleCredentials, path.Join(WorkDir, GoogleCredentialsFile)); err == nil {
				id.google, err = googleCredentials(t.Audience, file)
			}
		}
		if err == nil && t.Env != "" {
			err = set(t.Env, file)
		}
		if err != nil {
			return nil, err
		}
	}
	return id, nil
}

// googleCredentials is an external_account credential configuration, as `gcloud iam
// workload-identity-pools create-cred-config --credential-source-file` writes it: Google's
// client libraries exchange the token file's content at Google's STS for an access token
// of the federated principal, re-reading the file each time.
func googleCredentials(audience, tokenFile string) ([]byte, error) {
	type format struct {
		Type string `json:"type"`
	}
	type source struct {
		File   string `json:"file"`
		Format format `json:"format"`
	}
	b, err := json.MarshalIndent(struct {
		Type             string `json:"type"`
		Audience         string `json:"audience"`
		SubjectTokenType string `json:"subject_token_type"`
		TokenURL         string `json:"token_url"`
		CredentialSource source `json:"credential_source"`
	}{
		Type:             "external_account",
		Audience:         audience,
		SubjectTokenType: "urn:ietf:params:oauth:token-type:jwt",
		TokenURL:         "https://sts.googleapis.com/v1/token",
		CredentialSource: source{File: tokenFile, Format: format{Type: "text"}},
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("failed to encode Google credential configuration: %w", err)
	}
	return append(b, '\n'), nil
}

// programEnv says where each variable the program sees comes from, apart from identity
// tokens: the Stack's resolved environment, its workspaceTemplate's env, and what the
// runner passes on from its own.
func programEnv(resolved map[string]string, template []corev1.EnvVar) map[string]string {
	from := map[string]string{}
	for _, name := range podInheritEnv() {
		from[name] = "the runner Pod"
	}
	for _, e := range template {
		from[e.Name] = "spec.workspaceTemplate (env)"
	}
	for name := range resolved {
		from[name] = "the Stack's environment (envRefs, envs, envSecrets or backend settings)"
	}
	return from
}
