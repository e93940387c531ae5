package s3tenants

import (
	"context"
	"encoding/json"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/internal/testing/repo"
)

const bucket = "stackwright-state"

// requireBinaries skips the test, saying how to build them, when names are not in ./bin,
// and returns ./bin.
func requireBinaries(t *testing.T, names ...string) string {
	t.Helper()
	bin, err := repo.Bin()
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.RequireBinaries(bin, names...); err != nil {
		t.Skipf("skipped: %v", err)
	}
	return bin
}

func TestPolicy_Prefix_RefusesEmptySlashOrWildcard(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		prefix string
		ok     bool
	}{
		{name: "namespaceName", prefix: "team-a", ok: true},
		{name: "empty", prefix: ""},
		{name: "slash", prefix: "team-a/"},
		{name: "nested", prefix: "team/a"},
		{name: "star", prefix: "team-*"},
		{name: "questionMark", prefix: "team-?"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			policy, err := Policy(bucket, Tenant{Prefix: tt.prefix, Access: "a", Secret: "s"})
			if tt.ok != (err == nil) {
				t.Fatalf("Policy(%q) = %v; want ok %v", tt.prefix, err, tt.ok)
			}
			if tt.ok && !json.Valid(policy) {
				t.Fatalf("Policy(%q) is not JSON:\n%s", tt.prefix, policy)
			}
		})
	}
}

// A tenant's keys read, write, copy, list and delete under its own prefix, and are refused
// (AccessDenied, or a bare 403 for HEAD) everything else: another tenant's objects and
// listings, the whole bucket's listing, a listing of its bare prefix (which would show the
// names of team-ab's objects to team-a), a key that climbs out of its prefix with "..", and
// the bucket's policy. Nothing of the other tenant's changes.
func TestSetup_ObjectRequests_TenantReachesOnlyItsPrefix(t *testing.T) {
	t.Parallel()
	requireBinaries(t, "versitygw")
	srv := Start(t)
	ctx := t.Context()
	a, b, ab := NewTenant("team-a"), NewTenant("team-b"), NewTenant("team-ab")
	// Tenants come one after another, as namespaces do in the end-to-end tests: the bucket
	// and the users already there are kept, the policy replaced by one for all.
	if err := Setup(ctx, srv.Root, bucket, a); err != nil {
		t.Fatal(err)
	}
	if err := Setup(ctx, srv.Root, bucket, a, b, ab); err != nil {
		t.Fatal(err)
	}
	const meta = "/.pulumi/meta.yaml"
	for _, tn := range []Tenant{a, b, ab} {
		if _, err := srv.Root.Do(ctx, Request{Method: http.MethodPut, Path: "/" + bucket + "/" + tn.Prefix + meta, Body: []byte("version: 1\n")}); err != nil {
			t.Fatal(err)
		}
	}
	// The bare prefix matters: listed by the root, "team-a" shows team-ab's objects.
	if l, err := srv.Root.List(ctx, bucket, "team-a", ""); err != nil || !slices.Contains(l.Keys, "team-ab"+meta) {
		t.Fatalf("the root's listing of the bare prefix team-a = %v, %v; want team-ab%s in it", l, err, meta)
	}

	for _, pair := range [][2]Tenant{{a, b}, {b, a}} {
		own, other := pair[0], pair[1]
		t.Run(own.Prefix, func(t *testing.T) {
			c := srv.Root.As(own.Access, own.Secret)
			object := func(key string) string { return "/" + bucket + "/" + key }
			get := func(key string) Request { return Request{Method: http.MethodGet, Path: object(key)} }
			list := func(prefix, delimiter string) func(context.Context) error {
				return func(ctx context.Context) error {
					_, err := c.List(ctx, bucket, prefix, delimiter)
					return err
				}
			}
			send := func(r Request) func(context.Context) error {
				return func(ctx context.Context) error {
					_, err := c.Do(ctx, r)
					return err
				}
			}
			// Everything allowing all to own, to be refused.
			grab, err := Policy(bucket, Tenant{Prefix: other.Prefix, Access: own.Access})
			if err != nil {
				t.Fatal(err)
			}
			for _, tt := range []struct {
				name   string
				do     func(context.Context) error
				denied bool
			}{
				{name: "PutOwnObject", do: send(Request{Method: http.MethodPut, Path: object(own.Prefix + "/.pulumi/stacks/p/dev.json"), Body: []byte("{}")})},
				{name: "GetOwnObject", do: send(get(own.Prefix + meta))},
				{name: "HeadOwnObject", do: send(Request{Method: http.MethodHead, Path: object(own.Prefix + meta)})},
				{name: "ListOwnPrefix", do: func(ctx context.Context) error {
					l, err := c.List(ctx, bucket, own.Prefix+"/", "")
					if err == nil && !slices.Contains(l.Keys, own.Prefix+meta) {
						t.Errorf("the listing of %s/ = %v; want %s%s in it", own.Prefix, l.Keys, own.Prefix, meta)
					}
					return err
				}},
				{name: "ListOwnDirectory", do: list(own.Prefix+"/.pulumi/", "/")},
				{name: "CopyWithinOwnPrefix", do: send(Request{Method: http.MethodPut, Path: object(own.Prefix + "/.pulumi/stacks/p/dev.json.bak"),
					Header: map[string]string{"x-amz-copy-source": bucket + "/" + own.Prefix + "/.pulumi/stacks/p/dev.json"}})},
				{name: "DeleteOwnObject", do: send(Request{Method: http.MethodDelete, Path: object(own.Prefix + "/.pulumi/stacks/p/dev.json.bak")})},

				{name: "GetOthersObject", do: send(get(other.Prefix + meta)), denied: true},
				{name: "HeadOthersObject", do: send(Request{Method: http.MethodHead, Path: object(other.Prefix + meta)}), denied: true},
				{name: "GetOthersMissingObject", do: send(get(other.Prefix + "/.pulumi/stacks/p/dev.json")), denied: true},
				{name: "GetOthersObjectThroughDotDot", do: send(get(own.Prefix + "/../" + other.Prefix + meta)), denied: true},
				{name: "PutOthersObject", do: send(Request{Method: http.MethodPut, Path: object(other.Prefix + meta), Body: []byte("version: 9\n")}), denied: true},
				{name: "DeleteOthersObject", do: send(Request{Method: http.MethodDelete, Path: object(other.Prefix + meta)}), denied: true},
				{name: "CopyOthersObjectIntoOwnPrefix", do: send(Request{Method: http.MethodPut, Path: object(own.Prefix + "/stolen.yaml"),
					Header: map[string]string{"x-amz-copy-source": bucket + "/" + other.Prefix + meta}}), denied: true},
				{name: "ListOthersPrefix", do: list(other.Prefix+"/", ""), denied: true},
				{name: "ListOthersDirectory", do: list(other.Prefix+"/.pulumi/", "/"), denied: true},
				{name: "ListWholeBucket", do: list("", ""), denied: true},
				{name: "ListWholeBucketByDirectory", do: list("", "/"), denied: true},
				{name: "ListBarePrefix", do: list(own.Prefix, ""), denied: true},
				{name: "GetBucketPolicy", do: send(Request{Method: http.MethodGet, Path: "/" + bucket, Query: url.Values{"policy": {""}}}), denied: true},
				{name: "PutBucketPolicy", do: send(Request{Method: http.MethodPut, Path: "/" + bucket, Query: url.Values{"policy": {""}}, Body: grab}), denied: true},
				{name: "DeleteBucketPolicy", do: send(Request{Method: http.MethodDelete, Path: "/" + bucket, Query: url.Values{"policy": {""}}}), denied: true},
				{name: "CreateBucket", do: send(Request{Method: http.MethodPut, Path: "/" + own.Prefix + "-own-bucket"}), denied: true},
			} {
				err := tt.do(ctx)
				switch {
				case !tt.denied && err != nil:
					t.Errorf("%s: %v; want it allowed", tt.name, err)
				case tt.denied && err == nil:
					t.Errorf("%s: allowed; want AccessDenied", tt.name)
				case tt.denied && Code(err) != "AccessDenied" && !strings.HasPrefix(tt.name, "Head"):
					t.Errorf("%s: %v; want AccessDenied", tt.name, err)
				case tt.denied && err.Error() != "status 403" && strings.HasPrefix(tt.name, "Head"):
					t.Errorf("%s: %v; want status 403", tt.name, err)
				}
			}
		})
	}

	// The other tenants' objects are as the root left them.
	for _, tn := range []Tenant{a, b, ab} {
		got, err := srv.Root.Do(ctx, Request{Method: http.MethodGet, Path: "/" + bucket + "/" + tn.Prefix + meta})
		if err != nil || string(got) != "version: 1\n" {
			t.Errorf("%s%s = %q, %v; want it unchanged", tn.Prefix, meta, got, err)
		}
	}
}

// Through the Pulumi CLI itself (the YAML language host, a program with one output): each
// tenant's keys create and update a stack under its own prefix, and every command with
// them on the other tenant's prefix fails with AccessDenied, leaving the bucket as it was.
func TestSetup_PulumiCLI_TenantReachesOnlyItsPrefix(t *testing.T) {
	t.Parallel()
	bin := requireBinaries(t, "versitygw", "pulumi", "pulumi-language-yaml")
	srv := Start(t)
	a, b := NewTenant("team-a"), NewTenant("team-b")
	if err := Setup(t.Context(), srv.Root, bucket, a, b); err != nil {
		t.Fatal(err)
	}
	// Each tenant has its own project directory (a program whose output names it) and
	// PULUMI_HOME.
	dirs := map[string]string{}
	for _, tn := range []Tenant{a, b} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte("name: tenancy\nruntime: yaml\noutputs:\n  owner: "+tn.Prefix+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		dirs[tn.Prefix] = dir
	}
	homes := map[string]string{a.Prefix: t.TempDir(), b.Prefix: t.TempDir()}
	// pulumi runs the CLI in tn's directory with tn's keys on prefix of the bucket.
	pulumi := func(tn Tenant, prefix string, args ...string) (string, error) {
		cmd := exec.CommandContext(t.Context(), filepath.Join(bin, "pulumi"), append(args, "--non-interactive")...)
		cmd.Dir = dirs[tn.Prefix]
		cmd.Env = []string{
			"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
			"HOME=" + homes[tn.Prefix],
			"PULUMI_HOME=" + homes[tn.Prefix],
			"PULUMI_BACKEND_URL=" + srv.BackendURL(bucket, prefix),
			"PULUMI_CONFIG_PASSPHRASE=s3tenants-test",
			"PULUMI_SKIP_UPDATE_CHECK=true",
			"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
			"AWS_ACCESS_KEY_ID=" + tn.Access,
			"AWS_SECRET_ACCESS_KEY=" + tn.Secret,
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	mustPulumi := func(tn Tenant, args ...string) string {
		t.Helper()
		out, err := pulumi(tn, tn.Prefix, args...)
		if err != nil {
			t.Fatalf("%s: pulumi %s: %v\n%s", tn.Prefix, strings.Join(args, " "), err, out)
		}
		return out
	}

	for _, tn := range []Tenant{a, b} {
		mustPulumi(tn, "stack", "init", "dev")
		// Twice: the second update copies the first's checkpoint to a backup (CopyObject).
		mustPulumi(tn, "up", "--yes", "--skip-preview", "--stack", "dev")
		mustPulumi(tn, "up", "--yes", "--skip-preview", "--stack", "dev")
		if got := strings.TrimSpace(mustPulumi(tn, "stack", "output", "owner", "--stack", "dev")); got != tn.Prefix {
			t.Fatalf("%s: the stack's output owner = %q; want %q", tn.Prefix, got, tn.Prefix)
		}
	}
	before := bucketFiles(t, filepath.Join(srv.Dir, bucket))
	for _, d := range []string{"team-a/.pulumi/stacks/tenancy/dev.json", "team-b/.pulumi/stacks/tenancy/dev.json"} {
		if _, ok := before[d]; !ok {
			t.Fatalf("no %s in the bucket; it holds %v", d, slices.Sorted(maps.Keys(before)))
		}
	}

	for _, pair := range [][2]Tenant{{a, b}, {b, a}} {
		own, other := pair[0], pair[1]
		for _, args := range [][]string{
			{"stack", "ls"},
			{"stack", "output", "owner", "--stack", "dev"},
			{"up", "--yes", "--skip-preview", "--stack", "dev"},
			{"stack", "init", "intruder"},
			{"stack", "rm", "--yes", "--force", "--stack", "dev"},
		} {
			out, err := pulumi(own, other.Prefix, args...)
			if err == nil {
				t.Errorf("%s's keys ran pulumi %s on %s's prefix:\n%s", own.Prefix, strings.Join(args, " "), other.Prefix, out)
			} else if !strings.Contains(out, "api error AccessDenied") {
				t.Errorf("%s's keys on %s's prefix: pulumi %s: %v; want AccessDenied:\n%s", own.Prefix, other.Prefix, strings.Join(args, " "), err, out)
			}
		}
	}
	if diff := cmp.Diff(before, bucketFiles(t, filepath.Join(srv.Dir, bucket))); diff != "" {
		t.Errorf("the bucket changed while each tenant's keys were refused (-before +after):\n%s", diff)
	}
}

// bucketFiles maps each object of the bucket directory dir (by key) to its content,
// leaving out versitygw's own temporary directory.
func bucketFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".sgwtmp" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
