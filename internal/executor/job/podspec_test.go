package job

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

func testUpdate(name string) *v1alpha1.Update {
	return &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: "uid-1"},
		Spec:       v1alpha1.UpdateSpec{StackName: "web", Type: v1alpha1.UpdateTypeUp},
	}
}

func TestJobName_LongUpdateNames_StayDistinctWithin63(t *testing.T) {
	long := strings.Repeat("a", 240)
	for _, tc := range []struct{ name, a, b string }{
		{name: "short", a: "web-abc-1", b: "web-abc-2"},
		{name: "long", a: long + "-1", b: long + "-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, y := jobName(testUpdate(tc.a)), jobName(testUpdate(tc.b))
			if len(x) > 63 || len(y) > 63 {
				t.Errorf("names longer than 63: %q (%d), %q (%d)", x, len(x), y, len(y))
			}
			if x == y {
				t.Errorf("two Updates share the Job name %q", x)
			}
		})
	}
}

func TestBuildJob_Defaults_RestrictedPodAsStackServiceAccount(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sa     string
		wantSA string
	}{
		{name: "unset uses default", sa: "", wantSA: "default"},
		{name: "set is used", sa: "deployer", wantSA: "deployer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := testUpdate("web-abc-1")
			stack := &pulumiv1.Stack{Spec: pulumiv1.StackSpec{ServiceAccountName: tc.sa}}
			job, secret, err := buildJob(u, stack, &Work{Update: u.Name}, []byte("cert"), PodOptions{Image: "runner:1", Deadline: 600, TTL: 60, TokenExpiry: 4200}, nil)
			if err != nil {
				t.Fatal(err)
			}
			pod := job.Spec.Template.Spec
			if pod.ServiceAccountName != tc.wantSA {
				t.Errorf("serviceAccountName = %q, want %q", pod.ServiceAccountName, tc.wantSA)
			}
			if *job.Spec.BackoffLimit != 0 || *job.Spec.ActiveDeadlineSeconds != 600 || *job.Spec.TTLSecondsAfterFinished != 60 {
				t.Errorf("job spec = backoff %d deadline %d ttl %d; want 0, 600, 60", *job.Spec.BackoffLimit, *job.Spec.ActiveDeadlineSeconds, *job.Spec.TTLSecondsAfterFinished)
			}
			c := pod.Containers[0]
			sc := c.SecurityContext
			restricted := *pod.SecurityContext.RunAsNonRoot && pod.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault &&
				!*sc.AllowPrivilegeEscalation && *sc.ReadOnlyRootFilesystem && cmp.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"})
			if !restricted {
				t.Errorf("runner Pod is not restricted: %+v / %+v", pod.SecurityContext, sc)
			}
			if pod.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("restartPolicy = %s", pod.RestartPolicy)
			}
			owner := metav1.GetControllerOf(job)
			if owner == nil || owner.Kind != "Update" || owner.Name != u.Name || metav1.GetControllerOf(secret).Name != u.Name {
				t.Errorf("Job and Secret must be owned by the Update; got %v", owner)
			}
			var w Work
			if err := json.Unmarshal(secret.Data[WorkFile], &w); err != nil || w.Update != u.Name {
				t.Errorf("work Secret holds %q (%v)", secret.Data[WorkFile], err)
			}
			if string(secret.Data[ManagerCertFile]) != "cert" {
				t.Error("work Secret lacks the manager certificate")
			}
			var token *corev1.ServiceAccountTokenProjection
			for _, v := range pod.Volumes {
				if v.Projected != nil {
					token = v.Projected.Sources[0].ServiceAccountToken
				}
			}
			if token == nil || token.Audience != TokenAudience {
				t.Errorf("no projected token for audience %s: %+v", TokenAudience, token)
			}
		})
	}
}

func TestBuildJob_WorkspaceTemplate_OverlaysHonouredParts(t *testing.T) {
	tmpl := `{"spec": {
	  "serviceAccountName": "from-template",
	  "image": "example.com/runner:custom",
	  "resources": {"limits": {"memory": "1Gi"}},
	  "env": [{"name": "A", "value": "1"}],
	  "podTemplate": {"spec": {
	    "nodeSelector": {"pool": "infra"},
	    "tolerations": [{"key": "dedicated", "operator": "Exists"}],
	    "volumes": [{"name": "state", "persistentVolumeClaim": {"claimName": "state"}}],
	    "containers": [{"name": "pulumi", "env": [{"name": "B", "value": "2"}], "volumeMounts": [{"name": "state", "mountPath": "/state"}]}]
	  }}
	}}`
	overlay, err := parseWorkspaceTemplate(&apiextensionsv1.JSON{Raw: []byte(tmpl)})
	if err != nil {
		t.Fatal(err)
	}
	u := testUpdate("web-abc-1")
	job, _, err := buildJob(u, &pulumiv1.Stack{}, &Work{}, nil, PodOptions{Image: "runner:1", Resources: DefaultResources()}, overlay)
	if err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	got := map[string]any{
		"sa": pod.ServiceAccountName, "image": c.Image, "memory": c.Resources.Limits.Memory().String(),
		"nodeSelector": pod.NodeSelector["pool"], "tolerations": len(pod.Tolerations),
		"lastVolume": pod.Volumes[len(pod.Volumes)-1].Name, "lastMount": c.VolumeMounts[len(c.VolumeMounts)-1].MountPath,
		"inherit": c.Args[len(c.Args)-1],
	}
	want := map[string]any{
		"sa": "from-template", "image": "example.com/runner:custom", "memory": "1Gi",
		"nodeSelector": "infra", "tolerations": 1, "lastVolume": "state", "lastMount": "/state",
		"inherit": "--inherit-env=A,B",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseWorkspaceTemplate_Unsupported_NamedInError(t *testing.T) {
	for _, tc := range []struct {
		name, tmpl, want string
	}{
		{name: "security profile", tmpl: `{"spec":{"securityProfile":"baseline"}}`, want: "spec.securityProfile"},
		{name: "sidecar container", tmpl: `{"spec":{"podTemplate":{"spec":{"containers":[{"name":"sidecar","image":"x"}]}}}}`, want: "containers[sidecar]"},
		{name: "pod field", tmpl: `{"spec":{"podTemplate":{"spec":{"hostNetwork":true}}}}`, want: "spec.podTemplate.spec.hostNetwork"},
		{name: "host path", tmpl: `{"spec":{"podTemplate":{"spec":{"volumes":[{"name":"h","hostPath":{"path":"/"}}]}}}}`, want: "hostPath"},
		{name: "unknown field", tmpl: `{"spec":{"imag":"x"}}`, want: "imag"},
		{name: "custom source", tmpl: `{"spec":{"image":"x","local":{"dir":"/src"}}}`, want: "spec.local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseWorkspaceTemplate(&apiextensionsv1.JSON{Raw: []byte(tc.tmpl)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v; want it to name %q", err, tc.want)
			}
		})
	}
}
