package job

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
)

func TestParsePluginBundles_Specs_ParsedOrRefused(t *testing.T) {
	tests := []struct {
		name    string
		specs   []string
		want    []PluginBundle
		wantErr string
	}{
		{name: "none", specs: nil, want: nil},
		{name: "two in order", specs: []string{"kubernetes=r.example/plugins@sha256:aa", " random = r.example/random:1 "},
			want: []PluginBundle{{Name: "kubernetes", Image: "r.example/plugins@sha256:aa"}, {Name: "random", Image: "r.example/random:1"}}},
		{name: "no image", specs: []string{"kubernetes="}, wantErr: "want name=image"},
		{name: "no equals", specs: []string{"kubernetes"}, wantErr: "want name=image"},
		{name: "bad name", specs: []string{"Kube_rnetes=r/x:1"}, wantErr: "DNS label"},
		{name: "long name", specs: []string{strings.Repeat("a", maxBundleName+1) + "=r/x:1"}, wantErr: "DNS label"},
		{name: "twice", specs: []string{"k=r/x:1", "k=r/y:1"}, wantErr: "k is named twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePluginBundles(tt.specs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParsePluginBundles error = %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("bundles (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateDefaultPlugins_Unknown_Refused(t *testing.T) {
	bundles := []PluginBundle{{Name: "kubernetes", Image: "r/p:1"}}
	if err := ValidateDefaultPlugins(bundles, []string{"kubernetes"}); err != nil {
		t.Errorf("a default that is offered: %v", err)
	}
	if err := ValidateDefaultPlugins(bundles, []string{"aws"}); err == nil || !strings.Contains(err.Error(), `"aws" is not one of the bundles offered (kubernetes)`) {
		t.Errorf("a default that is not offered: %v", err)
	}
}

// Every runner Pod mounts the selected bundles read-only as image volumes with the
// install's pull policy (never the Stack's), and tells the runner where they are.
func TestBuildJob_PluginBundles_MountedAsSelected(t *testing.T) {
	k8s, random := PluginBundle{Name: "kubernetes", Image: "r.example/plugins@sha256:aa"}, PluginBundle{Name: "random", Image: "r.example/random:1"}
	mounted := func(bundles ...PluginBundle) []string {
		var out []string
		for _, b := range bundles {
			out = append(out, b.Name+"="+b.Image)
		}
		return out
	}
	tests := []struct {
		name     string
		selected []string
		defaults []string
		want     []string
	}{
		{name: "no selection, no defaults: every bundle", want: mounted(k8s, random)},
		{name: "no selection: the defaults", defaults: []string{"random"}, want: mounted(random)},
		{name: "empty defaults: none", defaults: []string{}, want: nil},
		{name: "selection wins over defaults", selected: []string{"kubernetes"}, defaults: []string{"random"}, want: mounted(k8s)},
		{name: "selection named twice mounts once", selected: []string{"random", "random"}, want: mounted(random)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := testUpdate("web-abc-1")
			stack := &pulumiv1.Stack{Spec: pulumiv1.StackSpec{Stackwright: &pulumiv1.StackwrightSpec{Plugins: tt.selected}}}
			// The Stack asks for its own pull policy: the bundles keep the install's.
			overlay := &workspaceOverlay{ImagePullPolicy: corev1.PullNever}
			o := PodOptions{Image: "runner:1", PullPolicy: corev1.PullIfNotPresent, PluginBundles: []PluginBundle{k8s, random}, DefaultPlugins: tt.defaults}
			job, _, err := buildJob(u, stack, &Work{}, nil, o, overlay, inStackNamespace(u))
			if err != nil {
				t.Fatal(err)
			}
			pod := job.Spec.Template.Spec
			var got, args []string
			for _, v := range pod.Volumes {
				if v.Image == nil {
					continue
				}
				if v.Image.PullPolicy != corev1.PullIfNotPresent {
					t.Errorf("volume %s pull policy = %q; want the install's", v.Name, v.Image.PullPolicy)
				}
				got = append(got, strings.TrimPrefix(v.Name, pluginVolumePrefix)+"="+v.Image.Reference)
				found := false
				for _, m := range pod.Containers[0].VolumeMounts {
					if m.Name == v.Name {
						found = true
						if !m.ReadOnly || m.MountPath != filepath.Join(PluginsDir, strings.TrimPrefix(v.Name, pluginVolumePrefix)) {
							t.Errorf("mount of %s = %+v; want read-only under %s", v.Name, m, PluginsDir)
						}
					}
				}
				if !found {
					t.Errorf("volume %s is not mounted into the runner", v.Name)
				}
				args = append(args, "--plugin-dir="+filepath.Join(PluginsDir, strings.TrimPrefix(v.Name, pluginVolumePrefix)))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plugin volumes (-want +got):\n%s", diff)
			}
			var gotArgs []string
			for _, a := range pod.Containers[0].Args {
				if strings.HasPrefix(a, "--plugin-dir=") {
					gotArgs = append(gotArgs, a)
				}
			}
			if diff := cmp.Diff(args, gotArgs); diff != "" {
				t.Errorf("runner's --plugin-dir arguments (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildJob_UnknownPluginBundle_StallsNamingIt(t *testing.T) {
	u := testUpdate("web-abc-1")
	stack := &pulumiv1.Stack{Spec: pulumiv1.StackSpec{Stackwright: &pulumiv1.StackwrightSpec{Plugins: []string{"aws"}}}}
	o := PodOptions{Image: "runner:1", PluginBundles: []PluginBundle{{Name: "kubernetes", Image: "r/p:1"}}}
	_, _, err := buildJob(u, stack, &Work{}, nil, o, nil, inStackNamespace(u))
	f, ok := fault.As(err)
	if !ok || !f.Stalled || f.Reason != pulumiv1.ReasonMissingPlugin {
		t.Fatalf("buildJob error = %#v; want a MissingPlugin stall", err)
	}
	if !strings.Contains(err.Error(), `plugin bundle "aws", which this install does not offer (it offers: kubernetes)`) {
		t.Errorf("error = %q; want it to name the bundle and those offered", err)
	}
}

func TestPluginPath_Bundles_AheadOfPathWithPluginSubdirectories(t *testing.T) {
	root := t.TempDir()
	flat, installed := filepath.Join(root, "kubernetes"), filepath.Join(root, "cache")
	for _, f := range []string{
		filepath.Join(flat, "pulumi-resource-kubernetes"),
		filepath.Join(flat, "etc", "passwd"),
		filepath.Join(installed, "resource-random-v4.16.0", "pulumi-resource-random"),
		filepath.Join(installed, "resource-random-v4.16.0.lock"),
		filepath.Join(installed, "notes", "README"),
	} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got := pluginPath([]string{flat, installed, filepath.Join(root, "missing"), flat}, "/usr/local/bin")
	want := strings.Join([]string{flat, installed, filepath.Join(installed, "resource-random-v4.16.0"), filepath.Join(root, "missing"), "/usr/local/bin"}, ":")
	if got != want {
		t.Errorf("pluginPath = %q\nwant        %q", got, want)
	}
}
