package manager

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/version"
)

// parseOptions returns the default options with args parsed over them.
func parseOptions(t *testing.T, args []string) *Options {
	t.Helper()
	o := DefaultOptions()
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("failed to parse %v: %v", args, err)
	}
	return o
}

func TestOptions_BindFlags_WatchNamespacesRestrictTheCache(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // nil: every namespace
	}{
		{name: "unset watches everything", args: nil, want: nil},
		{name: "empty watches everything", args: []string{"--watch-namespaces="}, want: nil},
		{name: "comma separated", args: []string{"--watch-namespaces=a,b"}, want: []string{"a", "b"}},
		{name: "spaces, blanks and duplicates dropped", args: []string{"--watch-namespaces= a , b,,a"}, want: []string{"a", "b"}},
		{name: "repeated flag", args: []string{"--watch-namespaces=a", "--watch-namespaces=b"}, want: []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := parseOptions(t, tc.args)
			var got []string
			opts, err := o.cacheOptions()
			if err != nil {
				t.Fatal(err)
			}
			for ns := range opts.DefaultNamespaces {
				got = append(got, ns)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cached namespaces (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrimCachedUpdate_Object_KeepsWhatTheManagerReads(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "stackwright", Operation: metav1.ManagedFieldsOperationUpdate}}
	tests := []struct {
		name string
		in   any
		want any
	}{
		{
			name: "update loses log tail, steps and managedFields",
			in: &v1alpha1.Update{
				ObjectMeta: metav1.ObjectMeta{Name: "u", ManagedFields: managed},
				Status: v1alpha1.UpdateStatus{
					Phase: v1alpha1.UpdatePhaseSucceeded, Message: "update succeeded", LogTail: "lots of log",
					Steps: []v1alpha1.UpdateStep{{Op: "create", URN: "urn:x"}}, StepsOmitted: 2,
					Changes: map[string]int64{"create": 1},
				},
			},
			want: &v1alpha1.Update{
				ObjectMeta: metav1.ObjectMeta{Name: "u"},
				Status: v1alpha1.UpdateStatus{
					Phase: v1alpha1.UpdatePhaseSucceeded, Message: "update succeeded", StepsOmitted: 2,
					Changes: map[string]int64{"create": 1},
				},
			},
		},
		{
			name: "a non-Update loses only managedFields",
			in:   &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: managed}, Data: map[string][]byte{"k": []byte("v")}},
			want: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{"k": []byte("v")}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := trimCachedUpdate(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("trimmed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultOptions_RunnerImage_FromTheImagesEnvironment(t *testing.T) {
	const pinned = "registry.example/stackwright-runner@sha256:0123456789012345678901234567890123456789012345678901234567890123"
	tests := []struct {
		name, env, want string
		unset           bool
	}{
		{name: "UnsetIsTheLocalImageOfThisVersion", unset: true, want: "localhost/stackwright-runner:" + version.Version},
		{name: "EmptyIsUnset", env: "", want: "localhost/stackwright-runner:" + version.Version},
		{name: "ReleaseImageNamesItsRunnerByDigest", env: pinned, want: pinned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(RunnerImageEnv, tt.env)
			if tt.unset {
				os.Unsetenv(RunnerImageEnv) // t.Setenv restores it afterwards
			}
			if got := DefaultOptions().RunnerImage; got != tt.want {
				t.Errorf("RunnerImage = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOptions_CheckTenancy_LocalExecutorServesOneNamespace(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// wantErr is a substring of the refusal; "" means the options are accepted.
		wantErr string
	}{
		{name: "localWatchingEveryNamespaceIsRefused", wantErr: "set --watch-namespaces to one namespace"},
		{name: "localWatchingTwoNamespacesIsRefused", args: []string{"--watch-namespaces=a,b"}, wantErr: "not 2 (a, b)"},
		{name: "localWatchingOneNamespaceRuns", args: []string{"--watch-namespaces=a"}},
		{name: "duplicatesCountOnce", args: []string{"--watch-namespaces=a, a"}},
		{name: "optInRunsEveryNamespace", args: []string{"--no-tenant-isolation"}},
		{name: "optInRunsSeveralNamespaces", args: []string{"--no-tenant-isolation", "--watch-namespaces=a,b"}},
		{name: "jobExecutorNeedsNoOptIn", args: []string{"--executor=job"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := parseOptions(t, tc.args)
			err := o.checkTenancy()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("checkTenancy() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("checkTenancy() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// --metric-gate-urls is parsed at start: a prefix that could not mean what it seems to stops
// the manager before anything is built, naming the flag.
func TestOptions_Check_MetricGateURLs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// wantErr is a substring of the refusal; "" means the options are accepted.
		wantErr string
	}{
		{name: "UnsetAllowsNone"},
		{name: "Prefixes", args: []string{"--metric-gate-urls=http://prometheus.monitoring:9090,https://gateway.example/team-a/prom"}},
		{name: "Repeated", args: []string{"--metric-gate-urls=http://a.example", "--metric-gate-urls=http://b.example"}},
		{name: "NoScheme", args: []string{"--metric-gate-urls=prometheus.monitoring:9090"}, wantErr: `--metric-gate-urls: URL prefix "prometheus.monitoring:9090": want an http:// or https:// URL`},
		{name: "User", args: []string{"--metric-gate-urls=http://prometheus.monitoring@evil"}, wantErr: "has a user"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := parseOptions(t, append([]string{"--executor=job"}, tc.args...))
			err := o.check()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("check() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("check() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
