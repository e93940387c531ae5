package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// render is one way of producing the install manifests, and what they must promise.
type render struct {
	name string
	run  func(t *testing.T) []byte
	// namespace holds the manager; watch is what it must be limited to (nil: everything).
	namespace string
	watch     []string
}

func TestManifests_Render_RestrictedPodAndScopedRBAC(t *testing.T) {
	renders := []render{
		{name: "kustomize config/default", run: kustomize("config/default"), namespace: "stackwright-system"},
		{name: "checked-in deploy/install.yaml", run: readFile("deploy/install.yaml"), namespace: "stackwright-system"},
		{name: "kustomize config/namespaced", run: kustomize("config/namespaced"), namespace: "stackwright-system", watch: []string{"stackwright-tenant"}},
		{name: "kustomize config/local", run: kustomize("config/local"), namespace: "stackwright-system"},
		{name: "helm defaults", run: helmTemplate(), namespace: "stackwright-system"},
		{name: "helm watchNamespaces", run: helmTemplate("--set", "watchNamespaces={a,b}"), namespace: "stackwright-system", watch: []string{"a", "b"}},
	}
	generated := managerRules(t)
	for _, r := range renders {
		t.Run(r.name, func(t *testing.T) {
			objs := parse(t, r.run(t))

			var crds []string
			for _, o := range objs.ofKind("CustomResourceDefinition") {
				crds = append(crds, o.GetName())
			}
			slices.Sort(crds)
			if diff := cmp.Diff([]string{"clusterpolicies.stackwright.dev", "policies.stackwright.dev", "programs.pulumi.com", "stackrollouts.stackwright.dev", "stacks.pulumi.com", "stacksets.stackwright.dev", "stacktemplaterevisions.stackwright.dev", "stacktemplates.stackwright.dev", "updates.auto.pulumi.com", "updates.stackwright.dev"}, crds); diff != "" {
				t.Errorf("CRDs (-want +got):\n%s", diff)
			}

			dep := checkDeployment(t, objs, r.namespace)
			flag := "--watch-namespaces=" + strings.Join(r.watch, ",")
			hasFlag := slices.ContainsFunc(dep.Spec.Template.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--watch-namespaces") })
			if r.watch == nil && hasFlag {
				t.Errorf("cluster-wide install passes --watch-namespaces: %v", dep.Spec.Template.Spec.Containers[0].Args)
			}
			if r.watch != nil && !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, flag) {
				t.Errorf("args %v lack %s", dep.Spec.Template.Spec.Containers[0].Args, flag)
			}

			sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: dep.Spec.Template.Spec.ServiceAccountName, Namespace: r.namespace}
			checkRBAC(t, objs, sa, r.watch, generated)
			checkMetricsReader(t, objs)
		})
	}
}

// checkMetricsReader checks that the install serves its metrics over HTTPS only to
// authorised scrapers, and ships the ClusterRole a scraper is bound to: get on /metrics and
// nothing else.
func checkMetricsReader(t *testing.T, objs objects) {
	t.Helper()
	var readers []string
	for _, o := range objs.ofKind("ClusterRole") {
		var role rbacv1.ClusterRole
		convert(t, o, &role)
		want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
		if strings.HasSuffix(role.Name, "-metrics-reader") {
			readers = append(readers, role.Name)
			if diff := cmp.Diff(want, role.Rules); diff != "" {
				t.Errorf("ClusterRole %s rules (-want +got):\n%s", role.Name, diff)
			}
		}
	}
	if len(readers) != 1 {
		t.Errorf("metrics reader ClusterRoles %v, want one", readers)
	}
	args := checkDeployment(t, objs, "stackwright-system").Spec.Template.Spec.Containers[0].Args
	if slices.Contains(args, "--metrics-secure=false") {
		t.Errorf("manager args %v serve the metrics over plain HTTP", args)
	}
}

// checkDeployment checks the one manager Deployment against the restricted Pod Security
// Standard, plus what the manager itself relies on: a read-only root with writable /tmp
// and data directory, probes, one Pod at a time on the data volume, and time to shut down.
func checkDeployment(t *testing.T, objs objects, namespace string) *appsv1.Deployment {
	t.Helper()
	deps := objs.ofKind("Deployment")
	if len(deps) != 1 {
		t.Fatalf("want 1 Deployment, got %d", len(deps))
	}
	dep := &appsv1.Deployment{}
	convert(t, deps[0], dep)
	if dep.Namespace != namespace {
		t.Errorf("Deployment in namespace %q, want %q", dep.Namespace, namespace)
	}
	pod := dep.Spec.Template.Spec
	wantPod := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptrTo(true),
		RunAsUser:      ptrTo[int64](65532),
		RunAsGroup:     ptrTo[int64](65532),
		FSGroup:        ptrTo[int64](65532),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if diff := cmp.Diff(wantPod, pod.SecurityContext); diff != "" {
		t.Errorf("Pod securityContext (-want +got):\n%s", diff)
	}
	wantContainer := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptrTo(false),
		ReadOnlyRootFilesystem:   ptrTo(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("want exactly one container, got %d (+%d init)", len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	if diff := cmp.Diff(wantContainer, c.SecurityContext); diff != "" {
		t.Errorf("container securityContext (-want +got):\n%s", diff)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Error("the Pod shares a host namespace")
	}
	if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %q, want Recreate (a ReadWriteOnce volume)", dep.Spec.Strategy.Type)
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < 70 {
		t.Errorf("terminationGracePeriodSeconds %v: engine runs get a minute to record their result", g)
	}
	if c.Args[0] != "manager" || !slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("args %v: want `manager ... --leader-elect`", c.Args)
	}
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want {
			t.Errorf("no probe on %s", want)
		}
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources %v: want requests and limits", c.Resources)
	}
	// Everything the manager writes must be a volume: the root file system is read-only.
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]corev1.VolumeSource{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = volumes[m.Name].VolumeSource
	}
	if v := mounts["/tmp"]; v.EmptyDir == nil {
		t.Errorf("/tmp (HOME) is not an emptyDir: %+v", v)
	}
	if v := mounts["/var/lib/stackwright"]; v.PersistentVolumeClaim == nil {
		t.Errorf("the data directory is not a PersistentVolumeClaim: %+v", v)
	} else if len(objs.named("PersistentVolumeClaim", namespace, v.PersistentVolumeClaim.ClaimName)) != 1 {
		t.Errorf("PersistentVolumeClaim %s is not part of the install", v.PersistentVolumeClaim.ClaimName)
	}
	return dep
}

// checkRBAC checks that sa holds the generated rules where it should and nowhere else:
// cluster-wide without watch, or in each watched namespace (minus cluster-scoped
// resources) with nothing cluster-wide but `get` on the watched Namespaces.
func checkRBAC(t *testing.T, objs objects, sa rbacv1.Subject, watch []string, generated []rbacv1.PolicyRule) {
	t.Helper()
	clusterRules := boundRules(t, objs, sa, "ClusterRoleBinding", "")
	if watch == nil {
		if diff := cmp.Diff(generated, clusterRules); diff != "" {
			t.Errorf("cluster-wide rules differ from config/rbac/role.yaml (-want +got):\n%s", diff)
		}
		return
	}
	wantCluster := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: watch, Verbs: []string{"get"}},
		// ClusterPolicies judge the Stacks of every namespace, and are cluster-scoped.
		{APIGroups: []string{"stackwright.dev"}, Resources: []string{"clusterpolicies"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"stackwright.dev"}, Resources: []string{"clusterpolicies/status"}, Verbs: []string{"get", "update", "patch"}},
		// The job executor authenticates runner Pods; TokenReviews are cluster-scoped.
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		// Metrics scrapes are authorised by the API server; SubjectAccessReviews are
		// cluster-scoped.
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
	if diff := cmp.Diff(wantCluster, clusterRules); diff != "" {
		t.Errorf("cluster-wide rules of a namespaced install (-want +got):\n%s", diff)
	}
	var namespaced []rbacv1.PolicyRule
	for _, r := range generated {
		r.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(s string) bool { return s == "namespaces" })
		if len(r.Resources) > 0 {
			namespaced = append(namespaced, r)
		}
	}
	for _, ns := range watch {
		if diff := cmp.Diff(namespaced, boundRules(t, objs, sa, "RoleBinding", ns)); diff != "" {
			t.Errorf("rules in watched namespace %s (-want +got):\n%s", ns, diff)
		}
	}
}

// boundRules collects the rules that bindings of kind bindingKind in namespace ns grant
// to sa (roles in the install resolved by name).
func boundRules(t *testing.T, objs objects, sa rbacv1.Subject, bindingKind, ns string) []rbacv1.PolicyRule {
	t.Helper()
	var rules []rbacv1.PolicyRule
	for _, o := range objs.ofKind(bindingKind) {
		if o.GetNamespace() != ns {
			continue
		}
		var b rbacv1.RoleBinding // a ClusterRoleBinding has the same fields
		convert(t, o, &b)
		if !slices.Contains(b.Subjects, sa) {
			continue
		}
		roleNS := ns
		if b.RoleRef.Kind == "ClusterRole" {
			roleNS = ""
		}
		roles := objs.named(b.RoleRef.Kind, roleNS, b.RoleRef.Name)
		if len(roles) != 1 {
			t.Errorf("%s %s/%s refers to %s %s, which is not in the install", bindingKind, ns, b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			continue
		}
		var role rbacv1.Role
		convert(t, roles[0], &role)
		// Leader election is checked with the Deployment's namespace, not here.
		if strings.HasSuffix(role.Name, "-leader-election") {
			continue
		}
		rules = append(rules, role.Rules...)
	}
	return rules
}

// managerRules reads the rules controller-gen generated.
func managerRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(readFile("config/rbac/role.yaml")(t), &role); err != nil {
		t.Fatalf("failed to parse config/rbac/role.yaml: %v", err)
	}
	return role.Rules
}

func TestManifests_Render_LeaderElectionStaysInTheManagersNamespace(t *testing.T) {
	renders := []render{
		{name: "kustomize config/default", run: kustomize("config/default"), namespace: "stackwright-system"},
		{name: "kustomize config/namespaced", run: kustomize("config/namespaced"), namespace: "stackwright-system"},
		{name: "helm defaults", run: helmTemplate(), namespace: "stackwright-system"},
	}
	for _, r := range renders {
		t.Run(r.name, func(t *testing.T) {
			objs := parse(t, r.run(t))
			var got []rbacv1.PolicyRule
			for _, o := range objs.ofKind("Role") {
				if strings.HasSuffix(o.GetName(), "-leader-election") {
					if o.GetNamespace() != r.namespace {
						t.Errorf("leader-election Role in %q, want %q", o.GetNamespace(), r.namespace)
					}
					var role rbacv1.Role
					convert(t, o, &role)
					got = append(got, role.Rules...)
				}
			}
			want := []rbacv1.PolicyRule{
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
				// controller-runtime's leader election records core/v1 Events.
				{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
				// The job executor reads its runner API Service's cluster IP.
				{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("leader-election rules (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChart_Lint_Passes(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "defaults"},
		{name: "namespaced", args: []string{"--set", "watchNamespaces={a,b}"}},
		{name: "no persistence, two replicas", args: []string{"--set", "persistence.enabled=false", "--set", "replicas=2"}},
		{name: "private CA mounted", args: []string{"--set", "extraVolumes[0].name=ca", "--set", "extraVolumes[0].configMap.name=ca",
			"--set", "extraVolumeMounts[0].name=ca", "--set", "extraVolumeMounts[0].mountPath=/etc/stackwright/ca"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helm(t, append([]string{"lint", "--strict", chartDir(t)}, tc.args...)...)
			if err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
		})
	}
}

func TestChart_Template_SchemaRejectsBadValues(t *testing.T) {
	tests := []struct {
		name string
		set  string
		want string // in helm's error output
	}{
		{name: "replicas not a number", set: "replicas=abc", want: "replicas"},
		{name: "maxConcurrentUpdates not a number", set: "maxConcurrentUpdates=two", want: "maxConcurrentUpdates"},
		{name: "unknown top-level key", set: "replica=2", want: "replica"},
		{name: "unknown nested key", set: "persistence.sise=2Gi", want: "sise"},
		{name: "unknown executor", set: "executor=pods", want: "executor"},
		{name: "runner deadline not a duration", set: "runner.deadline=forever", want: "deadline"},
		{name: "invalid namespace name", set: "watchNamespaces={Team_A}", want: "watchNamespaces"},
		{name: "unknown log level", set: "logLevel=loud", want: "logLevel"},
		{name: "two replicas on one ReadWriteOnce volume", set: "replicas=2", want: "ReadWriteMany"},
		{name: "image digest not a sha256", set: "image.digest=latest", want: "digest"},
		{name: "runner image digest truncated", set: "runner.image.digest=sha256:abc", want: "digest"},
		{name: "extra volume named like the chart's", set: "extraVolumes[0].name=data", want: "/extraVolumes/0/name"},
		{name: "extra mount without a path", set: "extraVolumeMounts[0].name=ca", want: "mountPath"},
		{name: "extra mount over the data directory", set: "extraVolumeMounts[0].mountPath=/var/lib/stackwright", want: "/extraVolumeMounts/0/mountPath"},
		{name: "metric gate URL without a scheme", set: "rollouts.metricGateURLs={prometheus.monitoring:9090}", want: "/rollouts/metricGateURLs/0"},
		{name: "metric gate URL with a user", set: "rollouts.metricGateURLs={http://prometheus.monitoring@evil}", want: "/rollouts/metricGateURLs/0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range []string{"lint", "template"} {
				out, err := helm(t, cmd, chartDir(t), "--set", tc.set)
				if err == nil {
					t.Errorf("helm %s --set %s succeeded, want an error", cmd, tc.set)
					continue
				}
				if !strings.Contains(out, tc.want) {
					t.Errorf("helm %s --set %s: error does not mention %q:\n%s", cmd, tc.set, tc.want, out)
				}
			}
		})
	}
}

func TestChart_Template_PersistenceDisabledUsesEmptyDir(t *testing.T) {
	objs := parse(t, helmTemplate("--set", "persistence.enabled=false")(t))
	if pvcs := objs.ofKind("PersistentVolumeClaim"); len(pvcs) != 0 {
		t.Errorf("persistence disabled still creates %d PersistentVolumeClaim(s)", len(pvcs))
	}
	var dep appsv1.Deployment
	convert(t, objs.ofKind("Deployment")[0], &dep)
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == "data" && v.EmptyDir == nil {
			t.Errorf("data volume %+v, want an emptyDir", v.VolumeSource)
		}
	}
}

// A platform whose git host's certificate is signed by a private CA mounts the CA into the
// manager and names its directory in SSL_CERT_DIR (docs/operations.md, "Git hosts with a
// private CA"): the chart renders the volumes and mounts as given, after its own, and the
// Pod still meets the restricted profile.
func TestChart_Template_ExtraVolumesMountedAfterTheChartsOwn(t *testing.T) {
	tests := []struct {
		name        string
		set         []string
		wantVolumes []string
		wantMounts  []corev1.VolumeMount
	}{
		{name: "defaults", wantVolumes: []string{"data", "tmp"}, wantMounts: []corev1.VolumeMount{
			{Name: "data", MountPath: "/var/lib/stackwright"}, {Name: "tmp", MountPath: "/tmp"},
		}},
		{
			name: "private CA",
			set: []string{
				"extraVolumes[0].name=git-ca", "extraVolumes[0].configMap.name=git-ca",
				"extraVolumeMounts[0].name=git-ca", "extraVolumeMounts[0].mountPath=/etc/stackwright/ca", "extraVolumeMounts[0].readOnly=true",
				"extraEnv[0].name=SSL_CERT_DIR", "extraEnv[0].value=/etc/ssl/certs:/etc/stackwright/ca",
			},
			wantVolumes: []string{"data", "tmp", "git-ca"},
			wantMounts: []corev1.VolumeMount{
				{Name: "data", MountPath: "/var/lib/stackwright"}, {Name: "tmp", MountPath: "/tmp"},
				{Name: "git-ca", MountPath: "/etc/stackwright/ca", ReadOnly: true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			dep := checkDeployment(t, parse(t, helmTemplate(args...)(t)), "stackwright-system")
			pod := dep.Spec.Template.Spec
			var volumes []string
			for _, v := range pod.Volumes {
				volumes = append(volumes, v.Name)
			}
			if diff := cmp.Diff(tt.wantVolumes, volumes); diff != "" {
				t.Errorf("Pod volumes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantMounts, pod.Containers[0].VolumeMounts); diff != "" {
				t.Errorf("manager volumeMounts (-want +got):\n%s", diff)
			}
			if len(tt.set) == 0 {
				return
			}
			if cm := pod.Volumes[2].ConfigMap; cm == nil || cm.Name != "git-ca" {
				t.Errorf("volume git-ca %+v, want ConfigMap git-ca", pod.Volumes[2].VolumeSource)
			}
			if !slices.Contains(pod.Containers[0].Env, corev1.EnvVar{Name: "SSL_CERT_DIR", Value: "/etc/ssl/certs:/etc/stackwright/ca"}) {
				t.Errorf("manager env %v lacks SSL_CERT_DIR", pod.Containers[0].Env)
			}
		})
	}
}

// A release's chart sets the digests: both images are then pulled by digest, whatever the
// tag says.
func TestChart_Template_DigestsPinBothImages(t *testing.T) {
	const (
		managerDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
		runnerDigest  = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	)
	tests := []struct {
		name                     string
		set                      []string
		wantImage, wantRunnerArg string
	}{
		{name: "NoDigestUsesTheTag", wantImage: "localhost/stackwright:v0.1.0", wantRunnerArg: "--runner-image=localhost/stackwright-runner:v0.1.0"},
		{
			name:          "DigestsOverrideTags",
			set:           []string{"image.repository=reg.example/sw/stackwright", "image.tag=ignored", "image.digest=" + managerDigest, "runner.image.repository=reg.example/sw/stackwright-runner", "runner.image.digest=" + runnerDigest},
			wantImage:     "reg.example/sw/stackwright@" + managerDigest,
			wantRunnerArg: "--runner-image=reg.example/sw/stackwright-runner@" + runnerDigest,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			var dep appsv1.Deployment
			convert(t, parse(t, helmTemplate(args...)(t)).ofKind("Deployment")[0], &dep)
			c := dep.Spec.Template.Spec.Containers[0]
			if c.Image != tt.wantImage {
				t.Errorf("manager image = %q, want %q", c.Image, tt.wantImage)
			}
			if !slices.Contains(c.Args, tt.wantRunnerArg) {
				t.Errorf("manager args %v do not contain %q", c.Args, tt.wantRunnerArg)
			}
		})
	}
}

// objects is a rendered install.
type objects []*unstructured.Unstructured

func (objs objects) ofKind(kind string) objects {
	var out objects
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func (objs objects) named(kind, ns, name string) objects {
	var out objects
	for _, o := range objs.ofKind(kind) {
		if o.GetNamespace() == ns && o.GetName() == name {
			out = append(out, o)
		}
	}
	return out
}

func parse(t *testing.T, manifests []byte) objects {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	var objs objects
	for {
		o := &unstructured.Unstructured{}
		err := dec.Decode(&o.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("failed to parse the rendered manifests: %v", err)
		}
		if len(o.Object) > 0 {
			objs = append(objs, o)
		}
	}
}

func convert(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatalf("failed to convert %s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

func ptrTo[T any](v T) *T { return &v }

func root(t *testing.T) string {
	t.Helper()
	r, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func chartDir(t *testing.T) string { return filepath.Join(root(t), "charts", "stackwright") }

// binary returns the path of a tool in ./bin. A developer without it gets a skip; CI must
// have built it, so there it is a failure.
func binary(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(root(t), "bin")
	if err := repo.RequireBinaries(bin, name); err != nil {
		if os.Getenv("CI") == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	return filepath.Join(bin, name)
}

func readFile(rel string) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root(t), rel))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func kustomize(dir string) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		t.Helper()
		out, err := run(t, binary(t, "kubectl"), "kustomize", filepath.Join(root(t), dir))
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
		}
		return []byte(out)
	}
}

func helmTemplate(args ...string) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		t.Helper()
		out, err := helm(t, append([]string{"template", "stackwright", chartDir(t), "--namespace", "stackwright-system", "--include-crds"}, args...)...)
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		return []byte(out)
	}
}

// helm runs ./bin/helm with its configuration and caches in a temporary directory, so
// the developer's repositories and plugins play no part.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	path := binary(t, "helm")
	home := t.TempDir()
	t.Setenv("HELM_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("HELM_CACHE_HOME", filepath.Join(home, "cache"))
	t.Setenv("HELM_DATA_HOME", filepath.Join(home, "data"))
	return run(t, path, args...)
}

// run returns stdout for success and stdout plus stderr for errors, which is where the
// tools explain themselves.
func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = root(t)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

func TestManifests_Render_JobExecutorWiresRunnerAPI(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T) []byte
		args []string
	}{
		{name: "helm defaults", run: helmTemplate("--set", "maxConcurrentUpdatesPerNamespace=3", "--set", "runner.apiPort=9555"), args: []string{
			"--executor=job", "--max-concurrent-updates-per-namespace=3", "--runner-api-bind-address=:9555",
			"--runner-api-service=stackwright-runner-api", "--runner-image=localhost/stackwright-runner:v0.1.0",
		}},
		{name: "kustomize config/default", run: kustomize("config/default"), args: []string{"--executor=job", "--runner-api-service=stackwright-runner-api"}},
		{name: "checked-in deploy/install.yaml", run: readFile("deploy/install.yaml"), args: []string{"--executor=job", "--runner-api-service=stackwright-runner-api"}},
		{name: "kustomize config/namespaced", run: kustomize("config/namespaced"), args: []string{"--executor=job", "--runner-api-service=stackwright-runner-api"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parse(t, tc.run(t))
			dep := checkDeployment(t, objs, "stackwright-system")
			ctr := dep.Spec.Template.Spec.Containers[0]
			for _, want := range tc.args {
				if !slices.Contains(ctr.Args, want) {
					t.Errorf("manager args %v lack %s", ctr.Args, want)
				}
			}
			var svcPort string
			for _, o := range objs.ofKind("Service") {
				if o.GetName() == "stackwright-runner-api" {
					var svc corev1.Service
					convert(t, o, &svc)
					svcPort = svc.Spec.Ports[0].TargetPort.String()
				}
			}
			if svcPort != "runner-api" {
				t.Fatalf("runner API Service targets port %q, want runner-api", svcPort)
			}
			if !slices.ContainsFunc(ctr.Ports, func(p corev1.ContainerPort) bool { return p.Name == "runner-api" }) {
				t.Errorf("manager container ports %v lack runner-api", ctr.Ports)
			}
		})
	}
}

// The local executor has no runner API to expose, and its --executor=local comes last, so
// it is the one the manager's flag parsing keeps.
func TestManifests_Render_LocalExecutorHasNoRunnerAPI(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T) []byte
	}{
		{name: "helm executor=local", run: helmTemplate("--set", "executor=local", "--set", "watchNamespaces={team-a}")},
		{name: "helm executor=local without isolation", run: helmTemplate("--set", "executor=local", "--set", "noTenantIsolation=true")},
		{name: "kustomize config/local", run: kustomize("config/local")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parse(t, tc.run(t))
			for _, o := range objs.ofKind("Service") {
				if o.GetName() == "stackwright-runner-api" {
					t.Error("the local executor's install renders a runner API Service")
				}
			}
			args := checkDeployment(t, objs, "stackwright-system").Spec.Template.Spec.Containers[0].Args
			var last string
			for _, a := range args {
				if v, ok := strings.CutPrefix(a, "--executor="); ok {
					last = v
				}
			}
			if last != "local" {
				t.Errorf("manager args %v: the executor in effect is %q, want local", args, last)
			}
		})
	}
}

// The local executor runs every Stack's engine in the manager Pod: the chart renders it for
// one namespace, or for more only when noTenantIsolation says its Stack authors are trusted.
func TestManifests_Render_LocalExecutorServesOneNamespace(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		// wantArg is an argument the manager must get; "" means the chart must refuse.
		wantArg string
	}{
		{name: "everyNamespaceIsRefused", args: []string{"--set", "executor=local"}},
		{name: "twoNamespacesAreRefused", args: []string{"--set", "executor=local", "--set", "watchNamespaces={a,b}"}},
		{name: "oneNamespaceRenders", args: []string{"--set", "executor=local", "--set", "watchNamespaces={a}"}, wantArg: "--watch-namespaces=a"},
		{name: "optInRenders", args: []string{"--set", "executor=local", "--set", "noTenantIsolation=true"}, wantArg: "--no-tenant-isolation"},
		{name: "jobExecutorIgnoresIt", args: []string{"--set", "noTenantIsolation=true"}, wantArg: "--executor=job"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helm(t, append([]string{"template", "stackwright", chartDir(t), "--namespace", "stackwright-system"}, tc.args...)...)
			if tc.wantArg == "" {
				if err == nil || !strings.Contains(out, "serves one namespace") {
					t.Fatalf("helm template %v = %v, want a refusal saying the local executor serves one namespace:\n%s", tc.args, err, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			args := checkDeployment(t, parse(t, []byte(out)), "stackwright-system").Spec.Template.Spec.Containers[0].Args
			if !slices.Contains(args, tc.wantArg) {
				t.Errorf("manager args %v lack %s", args, tc.wantArg)
			}
			if tc.wantArg == "--executor=job" && slices.Contains(args, "--no-tenant-isolation") {
				t.Errorf("manager args %v: the job executor gets --no-tenant-isolation", args)
			}
		})
	}
}

// Every install ships the guidance policy, as warnings only (it must never refuse a
// Stack), and the manager-rights and deletion-protection policies, refusing.
func TestManifests_Render_StackGuidancePolicyOnlyWarns(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T) []byte
	}{
		{name: "kustomize config/default", run: kustomize("config/default")},
		{name: "checked-in deploy/install.yaml", run: readFile("deploy/install.yaml")},
		{name: "kustomize config/namespaced", run: kustomize("config/namespaced")},
		{name: "helm defaults", run: helmTemplate()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parse(t, tc.run(t))
			policies := map[string]*admissionv1.ValidatingAdmissionPolicy{}
			for _, o := range objs.ofKind("ValidatingAdmissionPolicy") {
				p := &admissionv1.ValidatingAdmissionPolicy{}
				convert(t, o, p)
				switch {
				case strings.HasSuffix(p.Name, "stack-guidance"):
					policies["guidance"] = p
				case strings.HasSuffix(p.Name, "manager-rights"):
					policies["rights"] = p
				case strings.HasSuffix(p.Name, "deletion-protection"):
					policies["protection"] = p
				default:
					t.Errorf("unexpected policy %s", p.Name)
				}
			}
			actions := map[string][]admissionv1.ValidationAction{}
			for _, o := range objs.ofKind("ValidatingAdmissionPolicyBinding") {
				b := &admissionv1.ValidatingAdmissionPolicyBinding{}
				convert(t, o, b)
				for k, p := range policies {
					if b.Spec.PolicyName == p.Name {
						actions[k] = b.Spec.ValidationActions
					}
				}
			}
			want := map[string][]admissionv1.ValidationAction{"guidance": {admissionv1.Warn}, "rights": {admissionv1.Deny}, "protection": {admissionv1.Deny}}
			if diff := cmp.Diff(want, actions); diff != "" {
				t.Errorf("policies bound with (-want +got):\n%s", diff)
			}
			if p := policies["guidance"]; p == nil || p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionv1.Ignore {
				t.Errorf("guidance failurePolicy: want Ignore")
			}
		})
	}
}

// TestChart_Observability_DashboardAndRulesWhenEnabled renders the chart's optional
// Grafana dashboard ConfigMap and PrometheusRule and checks they carry the shipped files.
func TestChart_Observability_DashboardAndRulesWhenEnabled(t *testing.T) {
	if objs := parse(t, helmTemplate()(t)); slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "PrometheusRule" || strings.HasSuffix(o.GetName(), "-dashboard")
	}) {
		t.Error("the default install renders a dashboard or PrometheusRule; both are opt-in")
	}
	objs := parse(t, helmTemplate("--set", "metrics.grafanaDashboard.enabled=true", "--set", "metrics.prometheusRule.enabled=true",
		"--set", "metrics.stackLabels=false")(t))
	dashboard, err := os.ReadFile(filepath.Join(root(t), "config", "grafana", "stackwright-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	rulesFile, err := os.ReadFile(filepath.Join(root(t), "config", "prometheus", "stackwright-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var shipped map[string]any
	if err := yaml.Unmarshal(rulesFile, &shipped); err != nil {
		t.Fatal(err)
	}
	var sawDashboard, sawRule, sawFlag bool
	for _, o := range objs {
		switch {
		case o.GetKind() == "ConfigMap" && strings.HasSuffix(o.GetName(), "-dashboard"):
			sawDashboard = true
			got, _, _ := unstructured.NestedString(o.Object, "data", "stackwright-dashboard.json")
			if strings.TrimSpace(got) != strings.TrimSpace(string(dashboard)) {
				t.Error("the dashboard ConfigMap does not hold config/grafana/stackwright-dashboard.json")
			}
			if o.GetLabels()["grafana_dashboard"] != "1" {
				t.Errorf("the dashboard ConfigMap's labels %v lack grafana_dashboard=1", o.GetLabels())
			}
		case o.GetKind() == "PrometheusRule":
			sawRule = true
			if diff := cmp.Diff(shipped["spec"], o.Object["spec"]); diff != "" {
				t.Errorf("the PrometheusRule's spec differs from config/prometheus/stackwright-rules.yaml (-want +got):\n%s", diff)
			}
		case o.GetKind() == "Deployment":
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
				sawFlag = sawFlag || slices.Contains(args, "--metrics-stack-labels=false")
			}
		}
	}
	if !sawDashboard || !sawRule || !sawFlag {
		t.Errorf("rendered: dashboard %v, PrometheusRule %v, --metrics-stack-labels=false %v; want all", sawDashboard, sawRule, sawFlag)
	}
}

// An install that serves templates serves the conversion webhook of kinds whose versions
// rename parameters behind a Service of port 443, which the manager is told to name in the
// kinds' definitions; one that does not serves none.
func TestChart_Templates_ConversionWebhookBehindAService(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want bool
	}{
		{name: "templates", args: []string{"--set", "templates.apiGroups={db.example.com}", "--set", "templates.conversionWebhookPort=9555"}, want: true},
		{name: "no templates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parse(t, helmTemplate(tc.args...)(t))
			var svc *corev1.Service
			for _, o := range objs.ofKind("Service") {
				if o.GetName() == "stackwright-conversion-webhook" {
					svc = &corev1.Service{}
					convert(t, o, svc)
				}
			}
			dep := checkDeployment(t, objs, "stackwright-system")
			c := dep.Spec.Template.Spec.Containers[0]
			port := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "conversion" })
			args := slices.Contains(c.Args, "--conversion-webhook-service=stackwright-conversion-webhook")
			if !tc.want {
				if svc != nil || port >= 0 || args {
					t.Errorf("an install without templates serves a conversion webhook: Service %v, port %d, args %v", svc != nil, port, c.Args)
				}
				return
			}
			if svc == nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.StrVal != "conversion" {
				t.Fatalf("conversion webhook Service %+v: want port 443 to the container's port conversion", svc)
			}
			if port < 0 || c.Ports[port].ContainerPort != 9555 || !slices.Contains(c.Args, "--conversion-webhook-bind-address=:9555") || !args {
				t.Errorf("manager ports %v and args %v: want the webhook on 9555, named to the manager", c.Ports, c.Args)
			}
		})
	}
}

// An install that serves templates ships config/templates' approval policy narrowed to its
// template groups, names it to the manager, and holds the manager's definitions to those
// groups with a policy of its own.
func TestChart_Templates_AdmissionNarrowedToTheInstallsGroups(t *testing.T) {
	groups := []string{"db.example.com", "cache.example.com"}
	objs := parse(t, helmTemplate("--set", "templates.apiGroups={"+strings.Join(groups, ",")+"}")(t))
	policies := map[string]*admissionv1.ValidatingAdmissionPolicy{}
	for _, o := range objs.ofKind("ValidatingAdmissionPolicy") {
		p := &admissionv1.ValidatingAdmissionPolicy{}
		convert(t, o, p)
		policies[p.Name] = p
	}
	bindings := map[string]*admissionv1.ValidatingAdmissionPolicyBinding{}
	for _, o := range objs.ofKind("ValidatingAdmissionPolicyBinding") {
		b := &admissionv1.ValidatingAdmissionPolicyBinding{}
		convert(t, o, b)
		bindings[b.Name] = b
	}

	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	shipped, _, err := kubetest.ReadAdmission(filepath.Join(root, "config", "templates"))
	if err != nil || len(shipped) != 2 {
		t.Fatalf("config/templates: %d policies, %v; want the approvals and the template protection", len(shipped), err)
	}
	// Each policy of config/templates is rendered under the release's name, narrowed.
	for _, p := range shipped {
		want := p.Spec.DeepCopy()
		for i := range want.MatchConstraints.ResourceRules {
			want.MatchConstraints.ResourceRules[i].APIGroups = groups
		}
		got := policies[p.Name]
		if got == nil {
			t.Fatalf("no policy %s among %v", p.Name, slices.Collect(maps.Keys(policies)))
		}
		if diff := cmp.Diff(*want, got.Spec); diff != "" {
			t.Errorf("policy %s (-config/templates narrowed +chart):\n%s", p.Name, diff)
		}
		if b := bindings[got.Name]; b == nil || b.Spec.PolicyName != got.Name || !slices.Equal(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) || b.Spec.ParamRef == nil || b.Spec.ParamRef.Selector == nil {
			t.Errorf("policy binding %+v: want Deny against every StackTemplate", b)
		}
	}
	approvals := policies["stackwright-template-approvals"]
	dep := checkDeployment(t, objs, "stackwright-system")
	if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--template-approval-policy="+approvals.Name) {
		t.Errorf("manager args %v do not name the approval policy", args)
	}

	defs := policies["stackwright-template-definitions"]
	if defs == nil || len(defs.Spec.MatchConditions) != 1 || len(defs.Spec.Validations) != 1 {
		t.Fatalf("definitions policy %+v: want one match condition and one validation", defs)
	}
	sa := "system:serviceaccount:stackwright-system:" + dep.Spec.Template.Spec.ServiceAccountName
	if got := defs.Spec.MatchConditions[0].Expression; !strings.Contains(got, "'"+sa+"'") {
		t.Errorf("definitions policy applies to %s, want the manager's ServiceAccount %s", got, sa)
	}
	if got := defs.Spec.Validations[0].Expression; got != `(request.operation == 'DELETE' ? oldObject : object).spec.group in ["db.example.com","cache.example.com"]` {
		t.Errorf("definitions policy validates %q", got)
	}
	if ops := defs.Spec.MatchConstraints.ResourceRules[0].Operations; !slices.Contains(ops, admissionv1.Delete) {
		t.Errorf("definitions policy covers %v; want deletions too", ops)
	}
	if b := bindings[defs.Name]; b == nil || !slices.Equal(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
		t.Errorf("definitions policy binding %+v: want Deny", b)
	}
}

// Plugin downloads are off unless the values name a plugin source; on, every bound the
// values set reaches the manager.
func TestChart_Template_PluginDownloadsOnlyWithASource(t *testing.T) {
	pluginArgs := func(set ...string) []string {
		t.Helper()
		var dep appsv1.Deployment
		convert(t, parse(t, helmTemplate(append([]string{"--set", "executor=job"}, set...)...)(t)).ofKind("Deployment")[0], &dep)
		var out []string
		for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--plugin-") {
				out = append(out, a)
			}
		}
		return out
	}
	if got := pluginArgs(); len(got) != 0 {
		t.Errorf("defaults pass %q; want no plugin download flags", got)
	}
	got := pluginArgs("--set", "runner.pluginDownloads.url=https://get.pulumi.com/releases/plugins", "--set", "runner.pluginDownloads.allow={kubernetes,random}",
		"--set", "runner.pluginDownloads.cacheBytes=8589934592")
	want := []string{"--plugin-download-url=https://get.pulumi.com/releases/plugins", "--plugin-cache-bytes=8589934592", "--plugin-max-bytes=1073741824", "--plugin-download-allow=kubernetes,random"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plugin flags (-want +got):\n%s", diff)
	}
}

// The runner allow-lists reach the manager only when the values set them; an empty list is
// passed on, meaning none.
func TestChart_Template_RunnerAllowListsOnlyWhenSet(t *testing.T) {
	allowArgs := func(set ...string) []string {
		t.Helper()
		var dep appsv1.Deployment
		convert(t, parse(t, helmTemplate(append([]string{"--set", "executor=job"}, set...)...)(t)).ofKind("Deployment")[0], &dep)
		var out []string
		for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--runner-allowed-") {
				out = append(out, a)
			}
		}
		return out
	}
	if got := allowArgs(); len(got) != 0 {
		t.Errorf("defaults pass %q; want the manager's own defaults", got)
	}
	got := allowArgs("--set", "runner.allowed.nodeSelectorKeys={pool,kubernetes.io/arch}", "--set-json", "runner.allowed.csiDrivers=[]")
	want := []string{"--runner-allowed-csi-drivers=", "--runner-allowed-node-selector-keys=pool,kubernetes.io/arch"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allow-list flags (-want +got):\n%s", diff)
	}
}

// The metric gates' allow-list reaches the manager only when the values list URLs: by
// default the manager's own default, none, applies.
func TestChart_Template_MetricGateURLsOnlyWhenSet(t *testing.T) {
	gateArgs := func(set ...string) []string {
		t.Helper()
		var dep appsv1.Deployment
		convert(t, parse(t, helmTemplate(set...)(t)).ofKind("Deployment")[0], &dep)
		var out []string
		for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--metric-gate-urls") {
				out = append(out, a)
			}
		}
		return out
	}
	if got := gateArgs(); len(got) != 0 {
		t.Errorf("defaults pass %q; want no --metric-gate-urls", got)
	}
	got := gateArgs("--set", "rollouts.metricGateURLs={http://prometheus.monitoring:9090,https://gateway.example/team-a/prom}")
	want := []string{"--metric-gate-urls=http://prometheus.monitoring:9090,https://gateway.example/team-a/prom"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metric gate flags (-want +got):\n%s", diff)
	}
}

// Every install binds the manager-rights policy of config/rights, for its own
// ServiceAccount.
func TestChart_Template_ManagerRightsPolicyForTheReleasesServiceAccount(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	shipped, _, err := kubetest.ReadAdmission(filepath.Join(root, "config", "rights"))
	if err != nil || len(shipped) != 1 {
		t.Fatalf("config/rights: %d policies, %v", len(shipped), err)
	}
	objs := parse(t, helmTemplate()(t))
	var policy *admissionv1.ValidatingAdmissionPolicy
	for _, o := range objs.ofKind("ValidatingAdmissionPolicy") {
		p := &admissionv1.ValidatingAdmissionPolicy{}
		convert(t, o, p)
		if strings.HasSuffix(p.Name, "-manager-rights") {
			policy = p
		}
	}
	if policy == nil {
		t.Fatal("the chart renders no manager-rights policy")
	}
	dep := checkDeployment(t, objs, "stackwright-system")
	want := shipped[0].Spec.DeepCopy()
	want.MatchConditions = []admissionv1.MatchCondition{{Name: "manager", Expression: "request.userInfo.username == 'system:serviceaccount:stackwright-system:" + dep.Spec.Template.Spec.ServiceAccountName + "'"}}
	if diff := cmp.Diff(*want, policy.Spec); diff != "" {
		t.Errorf("manager-rights policy (-config/rights for the release +chart):\n%s", diff)
	}
	var bound bool
	for _, o := range objs.ofKind("ValidatingAdmissionPolicyBinding") {
		b := &admissionv1.ValidatingAdmissionPolicyBinding{}
		convert(t, o, b)
		bound = bound || b.Spec.PolicyName == policy.Name && slices.Equal(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny})
	}
	if !bound {
		t.Error("the manager-rights policy is not bound with Deny")
	}
}

// Every job-executor install denies all ingress to the runners of detached Updates, which
// run tenants' providers in the manager's namespace; egress is open unless Helm values
// list what to allow.
func TestManifests_Render_DetachedRunnersGetNoIngress(t *testing.T) {
	for _, tc := range []struct {
		name       string
		run        func(*testing.T) []byte
		wantPolicy bool
		wantTypes  []networkingv1.PolicyType
		wantEgress int
	}{
		{name: "helm defaults", run: helmTemplate(), wantPolicy: true, wantTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		{name: "helm with egress rules", run: helmTemplate("--set", "runner.detachedNetworkPolicy.egress[0].ports[0].port=443"), wantPolicy: true,
			wantTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, wantEgress: 1},
		{name: "helm turned off", run: helmTemplate("--set", "runner.detachedNetworkPolicy.enabled=false")},
		{name: "helm executor=local", run: helmTemplate("--set", "executor=local", "--set", "watchNamespaces={team-a}")},
		{name: "kustomize config/default", run: kustomize("config/default"), wantPolicy: true, wantTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		{name: "checked-in deploy/install.yaml", run: readFile("deploy/install.yaml"), wantPolicy: true, wantTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var found []networkingv1.NetworkPolicy
			for _, o := range parse(t, tc.run(t)).ofKind("NetworkPolicy") {
				var np networkingv1.NetworkPolicy
				convert(t, o, &np)
				if np.Spec.PodSelector.MatchLabels["stackwright.dev/detached"] == "true" {
					found = append(found, np)
				}
			}
			if !tc.wantPolicy {
				if len(found) != 0 {
					t.Errorf("%d NetworkPolicies for detached runners; want none", len(found))
				}
				return
			}
			if len(found) != 1 {
				t.Fatalf("%d NetworkPolicies for detached runners; want 1", len(found))
			}
			np := found[0]
			if np.Namespace != "stackwright-system" || len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != tc.wantEgress {
				t.Errorf("NetworkPolicy %s/%s: %d ingress and %d egress rules; want none and %d", np.Namespace, np.Name, len(np.Spec.Ingress), len(np.Spec.Egress), tc.wantEgress)
			}
			if diff := cmp.Diff(tc.wantTypes, np.Spec.PolicyTypes); diff != "" {
				t.Errorf("policy types (-want +got):\n%s", diff)
			}
		})
	}
}

// The chart's deletion protection covers the instances of the install's template kinds
// too, and only deletions.
func TestChart_Template_DeletionProtectionCoversTemplateKinds(t *testing.T) {
	objs := parse(t, helmTemplate("--set", "templates.apiGroups={platform.example.com}")(t))
	var rules []admissionv1.NamedRuleWithOperations
	for _, o := range objs.ofKind("ValidatingAdmissionPolicy") {
		if strings.HasSuffix(o.GetName(), "deletion-protection") {
			p := &admissionv1.ValidatingAdmissionPolicy{}
			convert(t, o, p)
			rules = p.Spec.MatchConstraints.ResourceRules
		}
	}
	var got []string
	for _, r := range rules {
		got = append(got, fmt.Sprintf("%v %v %v", r.APIGroups, r.Operations, r.Resources))
	}
	want := []string{"[pulumi.com] [DELETE] [stacks]", "[platform.example.com] [DELETE] [*]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deletion protection's rules (-want +got):\n%s", diff)
	}
}

// The kinds templates may make in their instances' namespaces reach the manager's flag,
// and the manager gets the rights to write them; an empty list allows none.
func TestChart_Templates_ObjectKindsReachTheManagerWithItsRights(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantFlag  string
		wantRules []rbacv1.PolicyRule
	}{
		{
			name:     "default",
			wantFlag: "--template-object-kinds=ConfigMap,NetworkPolicy.networking.k8s.io",
			wantRules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
				{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
			},
		},
		{name: "none", args: []string{"--set", "templates.objectKinds=null"}, wantFlag: "--template-object-kinds="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := parse(t, helmTemplate(append([]string{"--set", "templates.apiGroups={db.example.com}"}, tt.args...)...)(t))
			dep := checkDeployment(t, objs, "stackwright-system")
			if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, tt.wantFlag) {
				t.Errorf("manager args %v, want %s", args, tt.wantFlag)
			}
			var rules []rbacv1.PolicyRule
			for _, o := range objs.ofKind("ClusterRole") {
				r := &rbacv1.ClusterRole{}
				convert(t, o, r)
				if r.Name != "stackwright-templates" {
					continue
				}
				for _, rule := range r.Rules {
					if slices.Equal(rule.Verbs, []string{"get", "list", "create", "update", "delete"}) {
						rules = append(rules, rule)
					}
				}
			}
			if diff := cmp.Diff(tt.wantRules, rules); diff != "" {
				t.Errorf("templates ClusterRole rules for objects (-want +got):\n%s", diff)
			}
		})
	}
}
