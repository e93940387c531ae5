package flux

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/source"
)

const (
	v1      = "source.toolkit.fluxcd.io/v1"
	v1beta2 = "source.toolkit.fluxcd.io/v1beta2"
)

// A source that source-controller reports Ready resolves to its artifact, through either
// API version and for every kind, verified by sha256 or sha512 digest; the stored tarball
// extracts with the project at the Stack's dir.
func TestResolver_Resolve_ResolvesReadySources(t *testing.T) {
	cases := []struct {
		name         string
		apiVersion   string
		kind         string
		revision     string
		projectDir   string
		stackDir     string
		wantDir      string
		declare      func(art map[string]any, body []byte)
		wantRevision string
	}{
		{name: "GitRepository v1", apiVersion: v1, kind: "GitRepository", revision: "main@sha1:132f4e719209eb10b9485302f8593fc0e680f4fc",
			projectDir: "infra", stackDir: "infra", wantDir: "infra"},
		{name: "GitRepository v1beta2", apiVersion: v1beta2, kind: "GitRepository", revision: "main@sha1:132f4e719209eb10b9485302f8593fc0e680f4fc",
			projectDir: "infra/dev", stackDir: "infra/dev", wantDir: "infra/dev"},
		{name: "OCIRepository v1", apiVersion: v1, kind: "OCIRepository", revision: "latest@sha256:95e386f421272710c4cedbbd8607dbbaa019d500e7a5a0b6720bc7bebefc7bf2"},
		{name: "OCIRepository v1beta2", apiVersion: v1beta2, kind: "OCIRepository", revision: "v1.2.3@sha256:95e386f421272710c4cedbbd8607dbbaa019d500e7a5a0b6720bc7bebefc7bf2",
			projectDir: "app", stackDir: "app", wantDir: "app"},
		{name: "Bucket v1", apiVersion: v1, kind: "Bucket", revision: "sha256:6a3f2a1dbd8e1e1b34e08dd7e2e04f0e7d2ed4c7e9bc5d6e2c3bd0bcb1e8f2a4"},
		{name: "Bucket v1beta2", apiVersion: v1beta2, kind: "Bucket", revision: "sha256:6a3f2a1dbd8e1e1b34e08dd7e2e04f0e7d2ed4c7e9bc5d6e2c3bd0bcb1e8f2a4"},
		{name: "dir is cleaned", apiVersion: v1, kind: "GitRepository", revision: "main@sha1:aaaa",
			projectDir: "infra", stackDir: "./infra/../infra/", wantDir: "infra"},
		{name: "dot dir is the root", apiVersion: v1, kind: "GitRepository", revision: "main@sha1:aaaa", stackDir: "."},
		{name: "sha512 digest (--artifact-digest-algo=sha512)", apiVersion: v1, kind: "GitRepository", revision: "main@sha1:aaaa",
			declare: func(art map[string]any, body []byte) { art["digest"] = sha512Digest(body) }},
		{name: "no revision falls back to the digest", apiVersion: v1, kind: "Bucket",
			declare:      func(art map[string]any, body []byte) { art["revision"] = "" },
			wantRevision: "digest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			ns := env.Namespace(t)
			srv := newArtifactServer(t)
			r := newResolver(t, srv, 1<<20)

			body := project(t, tc.projectDir, tc.name)
			obj := createSource(t, ctx, ns, tc.apiVersion, tc.kind, "infra")
			art := artifactStatus(obj, srv.serve("/a.tar.gz", served{body: body}), tc.revision, body)
			if tc.declare != nil {
				tc.declare(art, body)
			}
			publish(t, ctx, obj, readyStatus(obj, art))

			got, err := r.Resolve(ctx, fluxStack(ns, "stack", tc.apiVersion, tc.kind, "infra", tc.stackDir))
			if err != nil {
				t.Fatalf("Resolve() = %v", err)
			}
			want := source.Artifact{Revision: tc.revision, Digest: artifact.Digest(body), Dir: tc.wantDir}
			if tc.wantRevision == "digest" {
				want.Revision = art["digest"].(string)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Resolve() mismatch (-want +got):\n%s", diff)
			}
			out := filepath.Join(t.TempDir(), "work")
			if err := r.Store.Extract(got.Digest, out, artifact.DefaultLimits); err != nil {
				t.Fatalf("failed to extract the resolved artifact: %v", err)
			}
			content, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(got.Dir), "Pulumi.yaml"))
			if err != nil {
				t.Fatalf("no Pulumi.yaml at the resolved dir: %v", err)
			}
			if diff := cmp.Diff("name: "+tc.name+"\nruntime: yaml\n", string(content)); diff != "" {
				t.Errorf("Pulumi.yaml mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Sources that are missing or not (yet) usable are reported as SourceUnavailable and
// retried, and nothing is downloaded from them, even when an older artifact is still listed.
func TestResolver_Resolve_RetriesUnavailableSources(t *testing.T) {
	cases := []struct {
		name string
		// create is false for a source that does not exist.
		create bool
		// edit changes a Ready status before it is published; nil publishes none.
		edit func(obj *unstructured.Unstructured, srv *artifactServer, st map[string]any)
		// bumpSpec changes the spec after status was written, as a user switching branch.
		bumpSpec bool
		wantMsg  string
		wantHits int
	}{
		{name: "not found", wantMsg: `GitRepository "infra" not found in namespace`},
		{name: "never reconciled", create: true,
			wantMsg: `GitRepository "infra" has not reconciled its latest spec yet (generation 1, observed -1)`},
		{name: "failing with the previous artifact still listed", create: true,
			edit: func(obj *unstructured.Unstructured, _ *artifactServer, st map[string]any) {
				st["conditions"] = []any{condition(obj, "Ready", "False", "GitOperationFailed", "failed to checkout and determine revision: authentication required")}
			},
			wantMsg: `GitRepository "infra" is not ready (GitOperationFailed): failed to checkout and determine revision: authentication required`},
		// What source-controller v1.9.6 writes for a URL it cannot fetch: its Ready
		// condition says why, status.observedGeneration stays at -1.
		{name: "a new spec that keeps failing", create: true,
			edit: func(obj *unstructured.Unstructured, _ *artifactServer, st map[string]any) {
				st["observedGeneration"] = int64(-1)
				delete(st, "artifact")
				st["conditions"] = []any{condition(obj, "Ready", "False", "GitOperationFailed", "failed to checkout and determine revision: unable to list remote")}
			},
			wantMsg: `GitRepository "infra" is not ready (GitOperationFailed): failed to checkout and determine revision: unable to list remote`},
		{name: "building a new artifact", create: true,
			edit: func(obj *unstructured.Unstructured, _ *artifactServer, st map[string]any) {
				msg := "building artifact: new upstream revision 'main@sha1:bbbb'"
				st["conditions"] = []any{condition(obj, "Reconciling", "True", "Progressing", msg), condition(obj, "Ready", "Unknown", "Progressing", msg)}
			},
			wantMsg: `is not ready (Progressing): building artifact`},
		{name: "no Ready condition", create: true,
			edit:    func(_ *unstructured.Unstructured, _ *artifactServer, st map[string]any) { delete(st, "conditions") },
			wantMsg: `GitRepository "infra" is not ready: it has no Ready condition yet`},
		{name: "no artifact", create: true,
			edit:    func(_ *unstructured.Unstructured, _ *artifactServer, st map[string]any) { delete(st, "artifact") },
			wantMsg: `GitRepository "infra" has no artifact yet`},
		{name: "spec changed since the artifact", create: true, bumpSpec: true,
			edit:    func(*unstructured.Unstructured, *artifactServer, map[string]any) {},
			wantMsg: `has not reconciled its latest spec yet (generation 2, observed 1)`},
		{name: "neither digest nor checksum", create: true,
			edit: func(_ *unstructured.Unstructured, _ *artifactServer, st map[string]any) {
				delete(st["artifact"].(map[string]any), "digest")
			},
			wantMsg: `publishes an artifact without digest or checksum`},
		{name: "artifact file already garbage-collected", create: true,
			edit: func(_ *unstructured.Unstructured, srv *artifactServer, st map[string]any) {
				st["artifact"].(map[string]any)["url"] = srv.URL + "/gone.tar.gz"
			},
			wantMsg: "404 Not Found", wantHits: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			ns := env.Namespace(t)
			srv := newArtifactServer(t)
			r := newResolver(t, srv, 1<<20)
			body := project(t, "", "p")
			url := srv.serve("/a.tar.gz", served{body: body})

			if tc.create {
				obj := createSource(t, ctx, ns, v1, "GitRepository", "infra")
				if tc.edit != nil {
					st := readyStatus(obj, artifactStatus(obj, url, "main@sha1:aaaa", body))
					tc.edit(obj, srv, st)
					publish(t, ctx, obj, st)
				}
				if tc.bumpSpec {
					obj.Object["spec"].(map[string]any)["ref"] = map[string]any{"branch": "release"}
					if err := env.Client.Update(ctx, obj); err != nil {
						t.Fatalf("failed to update spec: %v", err)
					}
				}
			}

			_, err := r.Resolve(ctx, fluxStack(ns, "stack", v1, "GitRepository", "infra", ""))
			wantFault(t, err, pulumiv1.ReasonSourceUnavailable, false, tc.wantMsg)
			if got := srv.requests("/a.tar.gz") + srv.requests("/gone.tar.gz"); got != tc.wantHits {
				t.Errorf("artifact server got %d requests; want %d", got, tc.wantHits)
			}
			if r.Store.Has(artifact.Digest(body)) {
				t.Errorf("artifact stored for an unusable source")
			}
		})
	}
}

// Content that does not hash to the declared digest is refused and never stored, whatever
// the digest algorithm; the Stack retries, since source-controller may have replaced the
// file between writing status and serving it.
func TestResolver_Resolve_RefusesDigestMismatch(t *testing.T) {
	cases := []struct {
		name   string
		digest func(b []byte) string
	}{
		{name: "sha256", digest: artifact.Digest},
		{name: "sha512", digest: sha512Digest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			ns := env.Namespace(t)
			srv := newArtifactServer(t)
			r := newResolver(t, srv, 1<<20)
			declared, servedBody := project(t, "", "declared"), project(t, "", "tampered")
			obj := createSource(t, ctx, ns, v1, "GitRepository", "infra")
			art := artifactStatus(obj, srv.serve("/a.tar.gz", served{body: servedBody}), "main@sha1:aaaa", declared)
			art["digest"] = tc.digest(declared)
			publish(t, ctx, obj, readyStatus(obj, art))

			_, err := r.Resolve(ctx, fluxStack(ns, "stack", v1, "GitRepository", "infra", ""))
			wantFault(t, err, pulumiv1.ReasonSourceUnavailable, false, "digest mismatch: ")
			for _, d := range []string{artifact.Digest(declared), artifact.Digest(servedBody)} {
				if r.Store.Has(d) {
					t.Errorf("store has %s after a mismatch; want nothing stored", d)
				}
			}
		})
	}
}

// Artifacts over MaxBytes are refused (and the Stack stalls until the source or the limit
// changes): before any download when status declares the size, from the Content-Length, or
// as the bytes stream in when neither tells the truth. Nothing is stored.
func TestResolver_Resolve_RefusesOversizeArtifacts(t *testing.T) {
	const limit = 4 << 10
	cases := []struct {
		name     string
		size     any // status.artifact.size: a number, or nil for none
		streamed bool
		wantHits int
	}{
		{name: "declared size over the limit", size: "actual", wantHits: 0},
		{name: "no declared size, Content-Length over the limit", size: nil, wantHits: 1},
		{name: "understated size, streamed without length", size: int64(100), streamed: true, wantHits: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			ns := env.Namespace(t)
			srv := newArtifactServer(t)
			r := newResolver(t, srv, limit)
			body := incompressible(t, 2*limit)
			obj := createSource(t, ctx, ns, v1, "GitRepository", "infra")
			art := artifactStatus(obj, srv.serve("/a.tar.gz", served{body: body, streamed: tc.streamed}), "main@sha1:aaaa", body)
			switch tc.size {
			case nil:
				delete(art, "size")
			case "actual":
			default:
				art["size"] = tc.size
			}
			publish(t, ctx, obj, readyStatus(obj, art))

			_, err := r.Resolve(ctx, fluxStack(ns, "stack", v1, "GitRepository", "infra", ""))
			wantFault(t, err, pulumiv1.ReasonSourceUnavailable, true, "more than the 4096 bytes this manager accepts")
			if got := srv.requests("/a.tar.gz"); got != tc.wantHits {
				t.Errorf("artifact server got %d requests; want %d", got, tc.wantHits)
			}
			if r.Store.Has(artifact.Digest(body)) {
				t.Errorf("oversize artifact was stored")
			}
		})
	}
}

// Artifacts that cannot be verified or fetched as published stall the Stack with the
// reason: only a change to source-controller's configuration helps.
func TestResolver_Resolve_StallsUnverifiableArtifacts(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(art map[string]any)
		wantMsg string
	}{
		{name: "blake3 digest", edit: func(art map[string]any) {
			art["digest"] = "blake3:" + strings.Repeat("ab", 32)
		}, wantMsg: "uses an algorithm Stackwright cannot verify; run source-controller with --artifact-digest-algo=sha256"},
		{name: "uppercase hex", edit: func(art map[string]any) {
			art["digest"] = "sha256:" + strings.ToUpper(strings.TrimPrefix(art["digest"].(string), "sha256:"))
		}, wantMsg: "is malformed"},
		{name: "truncated digest", edit: func(art map[string]any) {
			art["digest"] = art["digest"].(string)[:20]
		}, wantMsg: "is malformed"},
		{name: "non-http url", edit: func(art map[string]any) {
			art["url"] = "file:///etc/passwd"
		}, wantMsg: `publishes artifact url "file:///etc/passwd", which is not an http(s) URL`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			ns := env.Namespace(t)
			srv := newArtifactServer(t)
			r := newResolver(t, srv, 1<<20)
			body := project(t, "", "p")
			obj := createSource(t, ctx, ns, v1beta2, "GitRepository", "infra")
			art := artifactStatus(obj, srv.serve("/a.tar.gz", served{body: body}), "main@sha1:aaaa", body)
			tc.edit(art)
			publish(t, ctx, obj, readyStatus(obj, art))

			_, err := r.Resolve(ctx, fluxStack(ns, "stack", v1beta2, "GitRepository", "infra", ""))
			wantFault(t, err, pulumiv1.ReasonSourceUnavailable, true, tc.wantMsg)
			if got := srv.requests("/a.tar.gz"); got != 0 {
				t.Errorf("artifact server got %d requests; want none", got)
			}
		})
	}
}

// A new artifact published on the same object (a new commit) resolves to a new artifact.
func TestResolver_Resolve_FollowsNewRevision(t *testing.T) {
	ctx := testContext(t)
	ns := env.Namespace(t)
	srv := newArtifactServer(t)
	r := newResolver(t, srv, 1<<20)
	stack := fluxStack(ns, "stack", v1, "GitRepository", "infra", "infra")
	obj := createSource(t, ctx, ns, v1, "GitRepository", "infra")

	var got []source.Artifact
	var want []source.Artifact
	for i, rev := range []string{"main@sha1:1111111111111111111111111111111111111111", "main@sha1:2222222222222222222222222222222222222222"} {
		body := project(t, "infra", rev)
		url := srv.serve("/"+strings.TrimPrefix(rev, "main@sha1:")+".tar.gz", served{body: body})
		publish(t, ctx, obj, readyStatus(obj, artifactStatus(obj, url, rev, body)))
		a, err := r.Resolve(ctx, stack)
		if err != nil {
			t.Fatalf("Resolve() after revision %d = %v", i+1, err)
		}
		got = append(got, a)
		want = append(want, source.Artifact{Revision: rev, Digest: artifact.Digest(body), Dir: "infra"})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resolved artifacts mismatch (-want +got):\n%s", diff)
	}
}

// A fleet of Stacks on one source downloads its artifact once, even when all of them
// resolve at the same moment; a restarted manager (a new Resolver on the same store) and
// another source publishing the same tarball download nothing.
func TestResolver_Resolve_DownloadsOncePerDigest(t *testing.T) {
	const fleet = 20
	ctx := testContext(t)
	ns := env.Namespace(t)
	srv := newArtifactServer(t)
	r := newResolver(t, srv, 1<<20)
	body := project(t, "", "shared")
	gate := make(chan struct{})
	url := srv.serve("/a.tar.gz", served{body: body, gate: gate})
	for _, name := range []string{"infra", "mirror"} {
		obj := createSource(t, ctx, ns, v1, "GitRepository", name)
		publish(t, ctx, obj, readyStatus(obj, artifactStatus(obj, url, "main@sha1:aaaa", body)))
	}
	want := source.Artifact{Revision: "main@sha1:aaaa", Digest: artifact.Digest(body)}

	results := make([]source.Artifact, fleet)
	errs := make([]error, fleet)
	var wg sync.WaitGroup
	for i := range fleet {
		wg.Go(func() {
			results[i], errs[i] = r.Resolve(ctx, fluxStack(ns, "stack"+string(rune('a'+i)), v1, "GitRepository", "infra", ""))
		})
	}
	// Hold the first download until the rest of the fleet waits on it.
	select {
	case <-srv.arrived:
	case <-ctx.Done():
		t.Fatal("no download started")
	}
	joined := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		n := 0
		for _, f := range r.inflight {
			n += f.joined
		}
		return n
	}
	for deadline := time.Now().Add(30 * time.Second); joined() < fleet-1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Stacks wait on the download", joined(), fleet-1)
		}
	}
	close(gate)
	wg.Wait()
	for i := range fleet {
		if errs[i] != nil {
			t.Fatalf("Resolve() for Stack %d = %v", i, errs[i])
		}
		if diff := cmp.Diff(want, results[i]); diff != "" {
			t.Errorf("Resolve() for Stack %d mismatch (-want +got):\n%s", i, diff)
		}
	}
	if got := srv.requests("/a.tar.gz"); got != 1 {
		t.Errorf("artifact server got %d requests for %d Stacks; want 1", got, fleet)
	}

	restarted := &Resolver{Client: env.Client, Store: r.Store, HTTP: srv.Client(), MaxBytes: 1 << 20}
	for _, src := range []string{"infra", "mirror"} {
		if _, err := restarted.Resolve(ctx, fluxStack(ns, "late", v1, "GitRepository", src, "")); err != nil {
			t.Fatalf("Resolve() of %s after restart = %v", src, err)
		}
	}
	if got := srv.requests("/a.tar.gz"); got != 1 {
		t.Errorf("artifact server got %d requests after restart; want still 1", got)
	}
}

// A sourceRef or dir that can never work stalls with SpecInvalid before anything is read.
func TestResolver_Resolve_StallsSpecInvalid(t *testing.T) {
	cases := []struct {
		name       string
		apiVersion string
		kind       string
		dir        string
		noSource   bool
		wantMsg    string
	}{
		{name: "v1beta1, no longer served by Flux", apiVersion: "source.toolkit.fluxcd.io/v1beta1", kind: "GitRepository",
			wantMsg: `spec.fluxSource.sourceRef.apiVersion "source.toolkit.fluxcd.io/v1beta1" is not supported; want "source.toolkit.fluxcd.io/v1" or "source.toolkit.fluxcd.io/v1beta2"`},
		{name: "another group", apiVersion: "example.com/v1", kind: "GitRepository", wantMsg: `apiVersion "example.com/v1" is not supported`},
		{name: "group without version", apiVersion: "source.toolkit.fluxcd.io", kind: "GitRepository", wantMsg: `apiVersion "source.toolkit.fluxcd.io" is not supported`},
		{name: "malformed apiVersion", apiVersion: "a/b/c", kind: "GitRepository", wantMsg: `apiVersion "a/b/c" is not supported`},
		{name: "HelmChart", apiVersion: v1, kind: "HelmChart",
			wantMsg: `spec.fluxSource.sourceRef.kind "HelmChart" is not supported; want "GitRepository", "OCIRepository" or "Bucket"`},
		{name: "kind in lower case", apiVersion: v1, kind: "gitrepository", wantMsg: `kind "gitrepository" is not supported`},
		{name: "absolute dir", apiVersion: v1, kind: "GitRepository", dir: "/etc", wantMsg: `spec.fluxSource.dir "/etc" must be relative`},
		{name: "dir above the root", apiVersion: v1, kind: "GitRepository", dir: "..", wantMsg: `spec.fluxSource.dir ".." points outside the artifact`},
		{name: "dir above the root after cleaning", apiVersion: v1, kind: "GitRepository", dir: "infra/../../x", wantMsg: `points outside the artifact`},
		{name: "no fluxSource", noSource: true, wantMsg: "spec.fluxSource is not set"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			ns := env.Namespace(t)
			srv := newArtifactServer(t)
			r := newResolver(t, srv, 1<<20)
			body := project(t, "", "p")
			obj := createSource(t, ctx, ns, v1, "GitRepository", "infra")
			publish(t, ctx, obj, readyStatus(obj, artifactStatus(obj, srv.serve("/a.tar.gz", served{body: body}), "main@sha1:aaaa", body)))
			stack := fluxStack(ns, "stack", tc.apiVersion, tc.kind, "infra", tc.dir)
			if tc.noSource {
				stack.Spec.FluxSource = nil
			}

			_, err := r.Resolve(ctx, stack)
			wantFault(t, err, pulumiv1.ReasonSpecInvalid, true, tc.wantMsg)
			if got := srv.requests("/a.tar.gz"); got != 0 {
				t.Errorf("artifact server got %d requests; want none", got)
			}
		})
	}
}

// Without Flux's CRDs the Stack waits: Flux may be installed later, and the controller's
// requeue notices. The client sees the API server as discovery described it before the
// CRDs were installed.
func TestResolver_Resolve_RetriesWhenFluxIsNotInstalled(t *testing.T) {
	ctx := testContext(t)
	srv := newArtifactServer(t)
	r := newResolver(t, srv, 1<<20)
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme, Mapper: mapperWithoutFlux})
	if err != nil {
		t.Fatal(err)
	}
	r.Client = c

	_, err = r.Resolve(ctx, fluxStack(env.Namespace(t), "stack", v1beta2, "GitRepository", "infra", ""))
	wantFault(t, err, pulumiv1.ReasonSourceUnavailable, false,
		"source.toolkit.fluxcd.io/v1beta2 GitRepository is not served by this cluster; is Flux's source-controller installed?")
}
