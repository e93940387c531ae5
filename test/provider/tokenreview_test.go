package provider

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// fakeTokenReviews answers TokenReviews like the API server: token "aws-token" belongs to
// ServiceAccount team/deployer and is valid for sts.amazonaws.com only; "lying-token" is
// reported authenticated for another audience than asked, as no real server would.
func fakeTokenReviews(t *testing.T) {
	t.Helper()
	fakeInCluster(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Spec       struct {
				Token     string   `json:"token"`
				Audiences []string `json:"audiences"`
			} `json:"spec"`
		}
		if r.Method != http.MethodPost || r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" ||
			json.NewDecoder(r.Body).Decode(&review) != nil || review.APIVersion != "authentication.k8s.io/v1" || review.Kind != "TokenReview" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		status := map[string]any{"authenticated": false, "error": "invalid bearer token"}
		switch {
		case review.Spec.Token == "aws-token" && slices.Contains(review.Spec.Audiences, "sts.amazonaws.com"):
			status = map[string]any{
				"authenticated": true, "audiences": []string{"sts.amazonaws.com"},
				"user": map[string]any{"username": "system:serviceaccount:team:deployer"},
			}
		case review.Spec.Token == "aws-token":
			status["error"] = `[invalid bearer token, token audiences ["sts.amazonaws.com"] is invalid for the target audiences ["` + strings.Join(review.Spec.Audiences, `" "`) + `"]]`
		case review.Spec.Token == "lying-token":
			status = map[string]any{"authenticated": true, "audiences": []string{"other"}, "user": map[string]any{"username": "system:serviceaccount:team:deployer"}}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": status})
	}))
}

func TestTokenReview_Create_ReviewsTokenForAudience(t *testing.T) {
	fakeTokenReviews(t)
	dir := t.TempDir()
	for name, token := range map[string]string{"aws": "aws-token\n", "lying": "lying-token", "empty": " \n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", filepath.Join(dir, "aws"))
	t.Setenv("UNSET_TOKEN_FILE", "")
	for _, tc := range []struct {
		name    string
		args    TokenReviewArgs
		want    TokenReviewState
		wantErr string
	}{
		{
			name: "file",
			args: TokenReviewArgs{TokenFile: filepath.Join(dir, "aws"), Audience: "sts.amazonaws.com"},
			want: TokenReviewState{
				TokenFile: filepath.Join(dir, "aws"), Audience: "sts.amazonaws.com", Path: filepath.Join(dir, "aws"),
				Username: "system:serviceaccount:team:deployer", Audiences: []string{"sts.amazonaws.com"},
			},
		},
		{
			name: "env",
			args: TokenReviewArgs{TokenEnv: "AWS_WEB_IDENTITY_TOKEN_FILE", Audience: "sts.amazonaws.com"},
			want: TokenReviewState{
				TokenEnv: "AWS_WEB_IDENTITY_TOKEN_FILE", Audience: "sts.amazonaws.com", Path: filepath.Join(dir, "aws"),
				Username: "system:serviceaccount:team:deployer", Audiences: []string{"sts.amazonaws.com"},
			},
		},
		{
			name:    "another audience",
			args:    TokenReviewArgs{TokenFile: filepath.Join(dir, "aws"), Audience: "api://AzureADTokenExchange"},
			wantErr: `is not authenticated for audience "api://AzureADTokenExchange": [invalid bearer token, token audiences ["sts.amazonaws.com"] is invalid`,
		},
		{
			name:    "audience missing from the answer",
			args:    TokenReviewArgs{TokenFile: filepath.Join(dir, "lying"), Audience: "sts.amazonaws.com"},
			wantErr: `of system:serviceaccount:team:deployer is valid for audiences ["other"], not for "sts.amazonaws.com"`,
		},
		{
			name:    "variable not set",
			args:    TokenReviewArgs{TokenEnv: "UNSET_TOKEN_FILE", Audience: "sts.amazonaws.com"},
			wantErr: "environment variable UNSET_TOKEN_FILE is not set",
		},
		{
			name:    "no such file",
			args:    TokenReviewArgs{TokenFile: filepath.Join(dir, "missing"), Audience: "sts.amazonaws.com"},
			wantErr: "failed to read token: open " + filepath.Join(dir, "missing"),
		},
		{
			name:    "empty file",
			args:    TokenReviewArgs{TokenFile: filepath.Join(dir, "empty"), Audience: "sts.amazonaws.com"},
			wantErr: "is empty",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := (&TokenReview{}).Create(t.Context(), infer.CreateRequest[TokenReviewArgs]{Name: "review", Inputs: tc.args})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v; want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, resp.Output); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTokenReview_Create_WithoutRightToReviewFailsClearly(t *testing.T) {
	fakeInCluster(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","reason":"Forbidden","message":"tokenreviews.authentication.k8s.io is forbidden: User \"system:serviceaccount:team:default\" cannot create resource \"tokenreviews\" in API group \"authentication.k8s.io\" at the cluster scope"}`))
	}))
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("aws-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := (&TokenReview{}).Create(t.Context(), infer.CreateRequest[TokenReviewArgs]{Inputs: TokenReviewArgs{TokenFile: file, Audience: "sts.amazonaws.com"}})
	if err == nil || !strings.Contains(err.Error(), "failed to review token "+file+": Forbidden: tokenreviews.authentication.k8s.io is forbidden") {
		t.Fatalf("error = %v", err)
	}
}

func TestTokenReview_Check_ExactlyOneSource(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		inputs map[string]property.Value
		want   []string // properties with failures
	}{
		"file":                      {map[string]property.Value{"tokenFile": property.New("/t")}, nil},
		"env":                       {map[string]property.Value{"tokenEnv": property.New("T")}, nil},
		"neither":                   {map[string]property.Value{}, []string{"tokenFile"}},
		"both":                      {map[string]property.Value{"tokenFile": property.New("/t"), "tokenEnv": property.New("T")}, []string{"tokenFile"}},
		"unknown skips validation":  {map[string]property.Value{"tokenFile": property.New(property.Computed), "tokenEnv": property.New("T")}, nil},
		"empty audience is refused": {map[string]property.Value{"tokenFile": property.New("/t"), "audience": property.New("")}, []string{"audience"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			inputs := map[string]property.Value{"audience": property.New("sts.amazonaws.com")}
			for k, v := range tc.inputs {
				inputs[k] = v
			}
			resp, err := (&TokenReview{}).Check(t.Context(), checkRequest(inputs))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, failedProperties(resp.Failures)); diff != "" {
				t.Errorf("failures mismatch (-want +got):\n%s\nall failures: %v", diff, resp.Failures)
			}
		})
	}
}
