package engine

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The example of AWS's Signature Version 4 documentation for S3 ("GET Object", signed in
// the Authorization header): the signer must produce its very signature.
func TestSignS3_AWSDocumentationExample(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "https://examplebucket.s3.amazonaws.com/test.txt", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Range", "bytes=0-9")
	signS3(req, "us-east-1", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC))
	want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, " +
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, " +
		"Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
	if got := req.Header.Get("Authorization"); got != want {
		t.Errorf("Authorization:\n got %s\nwant %s", got, want)
	}
}

func TestParseS3Backend_ObjectURL(t *testing.T) {
	const key = ".pulumi/locks/organization/p/dev/1.json"
	tests := []struct {
		name    string
		backend string
		env     map[string]string
		want    string
	}{
		{name: "aws virtual host in the url's region", backend: "s3://state?region=eu-west-1", want: "https://state.s3.eu-west-1.amazonaws.com/" + key},
		{name: "aws region from the environment", backend: "s3://state/team", env: map[string]string{"AWS_REGION": "ap-south-1"}, want: "https://state.s3.ap-south-1.amazonaws.com/" + key},
		{name: "own server, path style", backend: "s3://state?endpoint=http://10.0.0.7:7070&region=us-east-1&use_path_style=true", want: "http://10.0.0.7:7070/state/" + key},
		{name: "own server without scheme, ssl disabled, old flag names", backend: "s3://state?endpoint=minio:9000&disableSSL=true&s3ForcePathStyle=true", want: "http://minio:9000/state/" + key},
		{name: "own server without scheme defaults to https", backend: "s3://state?endpoint=s3.example.com", want: "https://state.s3.example.com/" + key},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			loc, err := parseS3Backend(tc.backend, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, loc.objectURL(key).String()); diff != "" {
				t.Errorf("object URL (-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{"file:///tmp/state", "s3://", "gs://state"} {
		if _, err := parseS3Backend(bad, nil); err == nil {
			t.Errorf("parseS3Backend(%q) = nil error; want one", bad)
		}
	}
}

// Only lock objects of the backend's bucket are ever deleted, whatever the conflict says.
func TestRun_RemoveS3Locks_RefusesWhatIsNotALock(t *testing.T) {
	x := &run{env: map[string]string{
		"PULUMI_BACKEND_URL": "s3://state?endpoint=http://127.0.0.1:1&use_path_style=true",
		"AWS_ACCESS_KEY_ID":  "a", "AWS_SECRET_ACCESS_KEY": "s",
	}}
	for name, locks := range map[string][]string{
		"another bucket":  {"s3://other/.pulumi/locks/organization/p/dev/1.json"},
		"not a lock":      {"s3://state/.pulumi/stacks/p/dev.json"},
		"no lock at all":  nil,
		"lock-like stack": {"s3://state/.pulumi/stacks/.pulumi/locks.json.bak"},
		"not s3":          {"gs://state/.pulumi/locks/organization/p/dev/1.json"},
	} {
		t.Run(name, func(t *testing.T) {
			err := x.removeS3Locks(t.Context(), locks)
			if err == nil || strings.Contains(err.Error(), "127.0.0.1") {
				t.Errorf("removeS3Locks = %v; want a refusal before any request", err)
			}
		})
	}
	x.env["AWS_ACCESS_KEY_ID"] = ""
	if err := x.removeS3Locks(t.Context(), []string{"s3://state/.pulumi/locks/organization/p/dev/1.json"}); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("removeS3Locks without credentials = %v; want it to say so", err)
	}
}
