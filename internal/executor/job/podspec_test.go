package job

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/fault"
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

// A runner's lock names its Pod's host name; the next runner proves the holder gone by the
// ended runner Job's name (goneRunners). A Pod's generated name keeps only 58 characters of
// a long Job name, so it never started with the Job's name, and a long-named Stack's stale
// lock was never healed (the node fault campaign's template instance stayed locked after a
// reboot); the host name is now the Job's name itself, and proves exactly its runner gone.
func TestBuildJob_LongStackName_LockHostNamesExactlyItsRunner(t *testing.T) {
	first := testUpdate("chaos-apps-e2e-chaos-tenant-app-0e19af33da715681-d6a0117480-1")
	second := testUpdate("chaos-apps-e2e-chaos-tenant-app-0e19af33da715681-d6a0117480-2")
	host := func(u *v1alpha1.Update) string {
		job, _, err := buildJob(u, &pulumiv1.Stack{}, &Work{Update: u.Name}, []byte("cert"), PodOptions{Image: "runner:1"}, nil, inStackNamespace(u))
		if err != nil {
			t.Fatal(err)
		}
		h := job.Spec.Template.Spec.Hostname
		if errs := validation.IsDNS1123Label(h); len(errs) > 0 {
			t.Errorf("host name %q: %v", h, errs)
		}
		return h
	}
	// The engine takes a holder for gone when its host name starts with a gone runner's.
	gone := jobName(first)
	got := map[string]bool{"first": strings.HasPrefix(host(first), gone), "second": strings.HasPrefix(host(second), gone)}
	if diff := cmp.Diff(map[string]bool{"first": true, "second": false}, got); diff != "" {
		t.Errorf("holders proven gone by the first runner's end (-want +got):\n%s", diff)
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
			job, secret, err := buildJob(u, stack, &Work{Update: u.Name}, []byte("cert"), PodOptions{Image: "runner:1", Deadline: 600, TTL: 60, TokenExpiry: 4200}, nil, inStackNamespace(u))
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
	overlay, err := parseWorkspaceTemplate(workspaceTemplate(t, tmpl), Placement{NodeSelectorKeys: []string{"pool"}, TolerationKeys: []string{"dedicated"}})
	if err != nil {
		t.Fatal(err)
	}
	u := testUpdate("web-abc-1")
	job, _, err := buildJob(u, &pulumiv1.Stack{}, &Work{}, nil, PodOptions{Image: "runner:1", Resources: DefaultResources()}, overlay, inStackNamespace(u))
	if err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	got := map[string]any{
		"sa": pod.ServiceAccountName, "image": c.Image, "memory": c.Resources.Limits.Memory().String(),
		"nodeSelector": pod.NodeSelector["pool"], "tolerations": len(pod.Tolerations),
		"lastVolume": pod.Volumes[len(pod.Volumes)-1].Name, "lastMount": c.VolumeMounts[len(c.VolumeMounts)-2].MountPath,
		"inherit": c.Args[len(c.Args)-1], "command": c.Command,
		// The Stack's image runs the runner binary that the bootstrap copied from the
		// runner image.
		"bootstrap": []string{pod.InitContainers[0].Image, strings.Join(pod.InitContainers[0].Args, " ")},
		"binMount":  c.VolumeMounts[len(c.VolumeMounts)-1].MountPath + " ro=" + fmt.Sprint(c.VolumeMounts[len(c.VolumeMounts)-1].ReadOnly),
	}
	want := map[string]any{
		"sa": "from-template", "image": "example.com/runner:custom", "memory": "1Gi",
		"nodeSelector": "infra", "tolerations": 1, "lastVolume": "state", "lastMount": "/state",
		"inherit": "--inherit-env=A,B", "command": []string{BootstrapBinary},
		"bootstrap": []string{"runner:1", "install-runner " + BootstrapBinary},
		"binMount":  BootstrapDir + " ro=true",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// The runner image has the runner binary: its Pod starts one container, with no bootstrap
// init container and no volume for the binary (the kubelet starts each container in turn,
// and waits for every volume). Only another image gets them.
func TestBuildJob_Image_BootstrapOnlyForAnotherImage(t *testing.T) {
	type outcome struct {
		Image, PullPolicy string
		Command           []string
		Init              []string
		Volumes           []string
	}
	for _, tc := range []struct {
		name, tmpl string
		want       outcome
	}{
		{
			name: "no template runs the runner image as it is",
			want: outcome{Image: "runner:1", PullPolicy: "IfNotPresent", Volumes: []string{"scratch", "work", "token"}},
		},
		{
			name: "a template naming the runner image runs it as it is",
			tmpl: `{"spec":{"image":"runner:1","imagePullPolicy":"Always"}}`,
			want: outcome{Image: "runner:1", PullPolicy: "Always", Volumes: []string{"scratch", "work", "token"}},
		},
		{
			name: "another image gets the runner binary from the bootstrap",
			tmpl: `{"spec":{"image":"example.com/program:1"}}`,
			want: outcome{
				Image: "example.com/program:1", PullPolicy: "IfNotPresent", Command: []string{BootstrapBinary},
				Init: []string{bootstrapContainer}, Volumes: []string{"scratch", "work", "token", bootstrapVolume},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var overlay *workspaceOverlay
			if tc.tmpl != "" {
				var err error
				if overlay, err = parseWorkspaceTemplate(workspaceTemplate(t, tc.tmpl), Placement{}); err != nil {
					t.Fatal(err)
				}
			}
			u := testUpdate("web-abc-1")
			job, _, err := buildJob(u, &pulumiv1.Stack{}, &Work{}, nil, PodOptions{Image: "runner:1", PullPolicy: corev1.PullIfNotPresent}, overlay, inStackNamespace(u))
			if err != nil {
				t.Fatal(err)
			}
			pod := job.Spec.Template.Spec
			c := pod.Containers[0]
			got := outcome{Image: c.Image, PullPolicy: string(c.ImagePullPolicy), Command: c.Command}
			for _, ic := range pod.InitContainers {
				got.Init = append(got.Init, ic.Name)
			}
			for _, v := range pod.Volumes {
				got.Volumes = append(got.Volumes, v.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// workspaceTemplate decodes a template as the API server admits it: unknown fields are
// refused at admission, so a test case with one is a broken test case.
func workspaceTemplate(t *testing.T, s string) *pulumiv1.WorkspaceTemplate {
	t.Helper()
	var w pulumiv1.WorkspaceTemplate
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		t.Fatalf("bad test template: %v", err)
	}
	return &w
}

// PKO's custom-source and sidecar-injection examples set these; the runner Pod takes them.
func TestBuildJob_WorkspaceTemplate_PKOExampleFieldsHonoured(t *testing.T) {
	tmpl := `{"spec": {
	  "image": "example.com/program:1",
	  "imagePullPolicy": "IfNotPresent",
	  "securityProfile": "restricted",
	  "podTemplate": {
	    "metadata": {"labels": {"team": "infra"}, "annotations": {"vault.hashicorp.com/agent-inject": "true"}},
	    "spec": {"containers": [{"name": "pulumi", "resources": {"requests": {"cpu": "2"}}}]}
	  }
	}}`
	overlay, err := parseWorkspaceTemplate(workspaceTemplate(t, tmpl), Placement{})
	if err != nil {
		t.Fatal(err)
	}
	job, _, err := buildJob(testUpdate("web-abc-1"), &pulumiv1.Stack{}, &Work{}, nil, PodOptions{Image: "runner:1", PullPolicy: corev1.PullAlways, Resources: DefaultResources()}, overlay, inStackNamespace(testUpdate("web-abc-1")))
	if err != nil {
		t.Fatal(err)
	}
	pt := job.Spec.Template
	c := pt.Spec.Containers[0]
	got := map[string]any{
		"pullPolicy": string(c.ImagePullPolicy), "bootstrapPullPolicy": string(pt.Spec.InitContainers[0].ImagePullPolicy),
		"cpu": c.Resources.Requests.Cpu().String(), "team": pt.Labels["team"], "managedBy": pt.Labels[v1alpha1.LabelManagedBy],
		"annotations": pt.Annotations,
	}
	want := map[string]any{
		"pullPolicy": "IfNotPresent", "bootstrapPullPolicy": "Always", "cpu": "2", "team": "infra", "managedBy": v1alpha1.ManagedBy,
		"annotations": map[string]string{"vault.hashicorp.com/agent-inject": "true"},
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
		{name: "reserved pod label", tmpl: `{"spec":{"podTemplate":{"metadata":{"labels":{"stackwright.dev/update":"x"}}}}}`, want: `pod label "stackwright.dev/update" is reserved`},
		{name: "pulumi container image", tmpl: `{"spec":{"podTemplate":{"spec":{"containers":[{"name":"pulumi","image":"x"}]}}}}`, want: "containers[pulumi] (only env, resources and volumeMounts)"},
		{name: "template metadata", tmpl: `{"metadata":{"labels":{"a":"b"}}}`, want: "metadata"},
		{name: "custom source without image", tmpl: `{"spec":{"local":{"dir":"/src"}}}`, want: "spec.local without spec.image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseWorkspaceTemplate(workspaceTemplate(t, tc.tmpl), Placement{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v; want it to name %q", err, tc.want)
			}
		})
	}
}

// identityOf returns what buildJob made of a Stack's identity tokens: the projected
// volume and the mount (nil when absent), the program's environment carried by the work,
// and the Google credential configuration of the work Secret.
type identityOf struct {
	Volume *corev1.Volume
	Mount  *corev1.VolumeMount
	Env    map[string]string
	Google string
}

func identityIn(t *testing.T, pod corev1.PodSpec, secret *corev1.Secret) identityOf {
	t.Helper()
	var got identityOf
	for i, v := range pod.Volumes {
		if v.Name == identityVolume {
			got.Volume = &pod.Volumes[i]
		}
	}
	for i, m := range pod.Containers[0].VolumeMounts {
		if m.Name == identityVolume {
			got.Mount = &pod.Containers[0].VolumeMounts[i]
		}
	}
	var w Work
	if err := json.Unmarshal(secret.Data[WorkFile], &w); err != nil {
		t.Fatal(err)
	}
	got.Env = w.Request.Env
	got.Google = string(secret.Data[GoogleCredentialsFile])
	return got
}

func TestBuildJob_IdentityTokens_ProjectedAndAnnounced(t *testing.T) {
	mode := int32(0o440)
	tokenSource := func(audience string, expiration int64, path string) corev1.VolumeProjection {
		return corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: audience, ExpirationSeconds: ptr(expiration), Path: path,
		}}
	}
	volume := func(sources ...corev1.VolumeProjection) *corev1.Volume {
		return &corev1.Volume{Name: "identity", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: &mode, Sources: sources,
		}}}
	}
	mount := &corev1.VolumeMount{Name: "identity", MountPath: "/var/run/secrets/stackwright.dev/identity", ReadOnly: true}
	const googleAudience = "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/k8s"
	for _, tc := range []struct {
		name   string
		tokens []pulumiv1.IdentityToken
		env    map[string]string
		want   identityOf
	}{
		{
			name: "none adds nothing",
			env:  map[string]string{"AWS_ROLE_ARN": "arn:aws:iam::1:role/deployer"},
			want: identityOf{Env: map[string]string{"AWS_ROLE_ARN": "arn:aws:iam::1:role/deployer"}},
		},
		{
			name:   "AWS with defaults, the Stack's role kept",
			tokens: []pulumiv1.IdentityToken{{Audience: "sts.amazonaws.com", Announce: pulumiv1.AnnounceAWS}},
			env:    map[string]string{"AWS_ROLE_ARN": "arn:aws:iam::1:role/deployer"},
			want: identityOf{
				Volume: volume(tokenSource("sts.amazonaws.com", 3600, "0/token")),
				Mount:  mount,
				Env: map[string]string{
					"AWS_ROLE_ARN":                "arn:aws:iam::1:role/deployer",
					"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/secrets/stackwright.dev/identity/0/token",
				},
			},
		},
		{
			name: "every cloud, and env whatever announce says",
			tokens: []pulumiv1.IdentityToken{
				{Audience: "vault", ExpirationSeconds: ptr(int64(600)), Env: "VAULT_JWT_FILE"},
				{Audience: "api://AzureADTokenExchange", Announce: pulumiv1.AnnounceAzure},
				{Audience: googleAudience, ExpirationSeconds: ptr(int64(86400)), Announce: pulumiv1.AnnounceGoogle, Env: "GOOGLE_TOKEN_FILE"},
				{Audience: "sts.amazonaws.com", Announce: pulumiv1.AnnounceAWS, Env: "AWS_WEB_IDENTITY_TOKEN_FILE"},
			},
			want: identityOf{
				Volume: volume(
					tokenSource("vault", 600, "0/token"),
					tokenSource("api://AzureADTokenExchange", 3600, "1/token"),
					tokenSource(googleAudience, 86400, "2/token"),
					tokenSource("sts.amazonaws.com", 3600, "3/token"),
				),
				Mount: mount,
				Env: map[string]string{
					"VAULT_JWT_FILE":                 "/var/run/secrets/stackwright.dev/identity/0/token",
					"AZURE_FEDERATED_TOKEN_FILE":     "/var/run/secrets/stackwright.dev/identity/1/token",
					"GOOGLE_APPLICATION_CREDENTIALS": "/var/run/stackwright/work/google-credentials.json",
					"GOOGLE_TOKEN_FILE":              "/var/run/secrets/stackwright.dev/identity/2/token",
					"AWS_WEB_IDENTITY_TOKEN_FILE":    "/var/run/secrets/stackwright.dev/identity/3/token",
				},
				Google: `{
  "type": "external_account",
  "audience": "` + googleAudience + `",
  "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
  "token_url": "https://sts.googleapis.com/v1/token",
  "credential_source": {
    "file": "/var/run/secrets/stackwright.dev/identity/2/token",
    "format": {
      "type": "text"
    }
  }
}
`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := testUpdate("web-abc-1")
			stack := &pulumiv1.Stack{Spec: pulumiv1.StackSpec{Stackwright: &pulumiv1.StackwrightSpec{IdentityTokens: tc.tokens}}}
			job, secret, err := buildJob(u, stack, &Work{Update: u.Name, Request: engine.Request{Env: tc.env}}, []byte("cert"), PodOptions{Image: "runner:1", TokenExpiry: 4200}, nil, inStackNamespace(u))
			if err != nil {
				t.Fatal(err)
			}
			pod := job.Spec.Template.Spec
			if diff := cmp.Diff(tc.want, identityIn(t, pod, secret)); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
			// The runner's own token stays where it was, for the manager's audience only,
			// and is never what a variable points to.
			wantRunner := corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: &mode,
				Sources:     []corev1.VolumeProjection{tokenSource(TokenAudience, 4200, "token")},
			}}}
			if diff := cmp.Diff(wantRunner, pod.Volumes[2]); diff != "" {
				t.Errorf("runner token volume (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(corev1.VolumeMount{Name: "token", MountPath: TokenDir, ReadOnly: true}, pod.Containers[0].VolumeMounts[2]); diff != "" {
				t.Errorf("runner token mount (-want +got):\n%s", diff)
			}
			for name, value := range identityIn(t, pod, secret).Env {
				if strings.HasPrefix(value, TokenDir) {
					t.Errorf("%s points to the runner's own token: %s", name, value)
				}
			}
			// Nothing reaches the program through the Pod's environment: the runner passes
			// on only what its allow-list names.
			if diff := cmp.Diff([]corev1.EnvVar{{Name: "HOME", Value: ScratchDir}, {Name: "TMPDIR", Value: ScratchDir}}, pod.Containers[0].Env); diff != "" {
				t.Errorf("runner container env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildJob_IdentityTokens_ConflictingVariablesRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tokens   []pulumiv1.IdentityToken
		env      map[string]string
		template string
		want     string
	}{
		{
			name:   "Stack's envRefs",
			tokens: []pulumiv1.IdentityToken{{Audience: "a", Announce: pulumiv1.AnnounceGoogle}},
			env:    map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": "/mine.json"},
			want:   "spec.stackwright.identityTokens[0] sets GOOGLE_APPLICATION_CREDENTIALS, which the Stack's environment (envRefs, envs, envSecrets or backend settings) sets too",
		},
		{
			name:     "workspaceTemplate env",
			tokens:   []pulumiv1.IdentityToken{{Audience: "a", Announce: pulumiv1.AnnounceAzure}},
			template: `{"spec":{"env":[{"name":"AZURE_FEDERATED_TOKEN_FILE","value":"/x"}]}}`,
			want:     "spec.stackwright.identityTokens[0] sets AZURE_FEDERATED_TOKEN_FILE, which spec.workspaceTemplate (env) sets too",
		},
		{
			name:   "runner's own",
			tokens: []pulumiv1.IdentityToken{{Audience: "a", Env: "PATH"}},
			want:   "spec.stackwright.identityTokens[0] sets PATH, which the runner Pod sets too",
		},
		{
			name:   "another token's announcement",
			tokens: []pulumiv1.IdentityToken{{Audience: "a", Announce: pulumiv1.AnnounceAWS}, {Audience: "b", Env: "AWS_WEB_IDENTITY_TOKEN_FILE"}},
			want:   "spec.stackwright.identityTokens[0] and spec.stackwright.identityTokens[1] both set AWS_WEB_IDENTITY_TOKEN_FILE",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var overlay *workspaceOverlay
			if tc.template != "" {
				var err error
				if overlay, err = parseWorkspaceTemplate(workspaceTemplate(t, tc.template), Placement{}); err != nil {
					t.Fatal(err)
				}
			}
			stack := &pulumiv1.Stack{Spec: pulumiv1.StackSpec{Stackwright: &pulumiv1.StackwrightSpec{IdentityTokens: tc.tokens}}}
			_, _, err := buildJob(testUpdate("web-abc-1"), stack, &Work{Request: engine.Request{Env: tc.env}}, nil, PodOptions{}, overlay, inStackNamespace(testUpdate("web-abc-1")))
			f, ok := fault.As(err)
			if !ok || !f.Stalled || f.Reason != pulumiv1.ReasonSpecInvalid || !strings.Contains(f.Error(), tc.want) {
				t.Errorf("error = %v; want a SpecInvalid stall saying %q", err, tc.want)
			}
		})
	}
}
