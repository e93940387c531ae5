package job

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
)

// PluginsDir is where runner Pods mount plugin bundles: PluginsDir/<bundle name>.
const PluginsDir = "/opt/stackwright/plugins"

// pluginVolumePrefix names a bundle's volume in a runner Pod: plugins-<bundle name>.
const pluginVolumePrefix = "plugins-"

// PluginBundle is a named OCI image of Pulumi plugins that the platform offers to runner
// Pods. The kubelet pulls it once per node and mounts it read-only as an image volume, so
// a provider of hundreds of megabytes costs no download and no copy per Update.
type PluginBundle struct {
	// Name is what Stacks select it by (spec.stackwright.plugins).
	Name string
	// Image is the image's reference, best by digest.
	Image string
}

// bundleName is what a bundle may be called: a DNS label short enough that its volume's
// name (pluginVolumePrefix + name) is one too.
var bundleName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

const maxBundleName = 63 - len(pluginVolumePrefix)

// ParsePluginBundles reads bundles given as name=image, in order.
func ParsePluginBundles(specs []string) ([]PluginBundle, error) {
	var out []PluginBundle
	for _, s := range specs {
		name, image, ok := strings.Cut(s, "=")
		name, image = strings.TrimSpace(name), strings.TrimSpace(image)
		switch {
		case !ok || image == "":
			return nil, fmt.Errorf("plugin bundle %q: want name=image", s)
		case len(name) > maxBundleName || !bundleName.MatchString(name):
			return nil, fmt.Errorf("plugin bundle %q: its name must be a DNS label of at most %d characters", s, maxBundleName)
		case slices.ContainsFunc(out, func(b PluginBundle) bool { return b.Name == name }):
			return nil, fmt.Errorf("plugin bundle %q: %s is named twice", s, name)
		}
		out = append(out, PluginBundle{Name: name, Image: image})
	}
	return out, nil
}

// ValidateDefaultPlugins checks that every default bundle is one of bundles.
func ValidateDefaultPlugins(bundles []PluginBundle, defaults []string) error {
	for _, d := range defaults {
		if !slices.ContainsFunc(bundles, func(b PluginBundle) bool { return b.Name == d }) {
			return fmt.Errorf("default plugin bundle %q is not one of the bundles offered (%s)", d, bundleNames(bundles))
		}
	}
	return nil
}

// selectPlugins returns the bundles a Stack's runner Pods mount: those its spec names, or
// else the install's defaults (nil defaults: every bundle offered). A name the install
// does not offer stalls the Stack: nothing but a change of its spec or of the install
// can make it run.
func selectPlugins(stack *pulumiv1.Stack, o PodOptions) ([]PluginBundle, error) {
	var names []string
	if sw := stack.Spec.Stackwright; sw != nil {
		names = sw.Plugins
	}
	if len(names) == 0 {
		if o.DefaultPlugins == nil {
			return o.PluginBundles, nil
		}
		names = o.DefaultPlugins
	}
	out := make([]PluginBundle, 0, len(names))
	for _, n := range names {
		i := slices.IndexFunc(o.PluginBundles, func(b PluginBundle) bool { return b.Name == n })
		if i < 0 {
			return nil, fault.Stall(pulumiv1.ReasonMissingPlugin,
				"spec.stackwright.plugins names plugin bundle %q, which this install does not offer (it offers: %s); ask the platform team to add it with the manager's --plugin-bundle, or select another",
				n, bundleNames(o.PluginBundles))
		}
		if !slices.Contains(out, o.PluginBundles[i]) {
			out = append(out, o.PluginBundles[i])
		}
	}
	return out, nil
}

func bundleNames(bundles []PluginBundle) string {
	list := make([]string, len(bundles))
	for i, b := range bundles {
		list[i] = b.Name
	}
	return names(list)
}

// pluginVolumes are the image volumes of bundles, their read-only mounts and the runner's
// arguments naming them.
func pluginVolumes(bundles []PluginBundle, pull corev1.PullPolicy) ([]corev1.Volume, []corev1.VolumeMount, []string) {
	var (
		volumes []corev1.Volume
		mounts  []corev1.VolumeMount
		args    []string
	)
	for _, b := range bundles {
		name, dir := pluginVolumePrefix+b.Name, filepath.Join(PluginsDir, b.Name)
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: b.Image, PullPolicy: pull},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true})
		args = append(args, "--plugin-dir="+dir)
	}
	return volumes, mounts, args
}

// pluginPath is the engine's PATH: the plugin directories first (each bundle's root and
// its subdirectories holding a pulumi-* executable, which is how `pulumi plugin install`
// lays plugins out), then path. The CLI takes a plugin it finds on PATH whatever version
// the program asks for.
func pluginPath(dirs []string, path string) string {
	var out []string
	for _, d := range dirs {
		for _, c := range pluginDirs(d) {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	if path != "" {
		out = append(out, path)
	}
	return strings.Join(out, string(os.PathListSeparator))
}

// pluginDirs are dir and its immediate subdirectories that hold a pulumi-* file.
func pluginDirs(dir string) []string {
	out := []string{dir}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if m, _ := filepath.Glob(filepath.Join(sub, "pulumi-*")); len(m) > 0 {
			out = append(out, sub)
		}
	}
	return out
}
