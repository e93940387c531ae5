package engine

import (
	"slices"
	"testing"
)

func TestRun_SecretValues_CredentialsButNotSwitches(t *testing.T) {
	x := &run{
		req: Request{Config: map[string]ConfigValue{
			"app:password": {Value: []byte(`"s3cr3t-config"`), Secret: true},
			"app:replicas": {Value: []byte(`3`)},
		}},
		env: map[string]string{
			"PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
			"DISABLE_SECRET_SCAN":                      "FALSE",
			"AWS_SECRET_ACCESS_KEY":                    "wJalrXUtnFEMI",
			"GITHUB_TOKEN":                             "ghp_abcdef",
			"PULUMI_BACKEND_URL":                       "s3://state?region=us-east-1",
		},
	}
	got := x.secretValues()
	for _, want := range []string{`"s3cr3t-config"`, "s3cr3t-config", "wJalrXUtnFEMI", "ghp_abcdef"} {
		if !slices.Contains(got, want) {
			t.Errorf("secretValues() = %q; want it to hold %q", got, want)
		}
	}
	for _, never := range []string{"true", "FALSE", "3", "s3://state?region=us-east-1"} {
		if slices.Contains(got, never) {
			t.Errorf("secretValues() = %q; %q is no secret", got, never)
		}
	}
}
