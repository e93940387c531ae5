package job_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/executor/job"
)

func TestExecutor_Run_StackReadyThroughRunnerJob(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.filesStack("web", nil)
	st := s.waitReady("web")

	b, err := os.ReadFile(filepath.Join(s.files, "web.txt"))
	s.g.Expect(err).NotTo(HaveOccurred(), "the runner did not create the file")
	s.g.Expect(string(b)).To(Equal("from a runner"))
	s.g.Expect(st.Status.Outputs).To(HaveKey("path"))

	ups := s.updates()
	s.g.Expect(ups).To(HaveLen(1))
	u := ups[0]
	s.g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseSucceeded))
	s.g.Expect(u.Status.Runner).To(HavePrefix("job/" + s.Namespace + "/"))
	// None is secret: they come with the result, and no outputs Secret is written.
	s.g.Expect(u.Status.Outputs).To(HaveKey("path"), "the manager records the outputs the runner reported")
	s.g.Expect(u.Status.OutputsSecretName).To(BeEmpty())

	var jobs batchv1.JobList
	s.g.Expect(env.Client.List(t.Context(), &jobs, client.InNamespace(s.Namespace))).To(Succeed())
	s.g.Expect(jobs.Items).To(HaveLen(1), "one Job per Update")
	pod := jobs.Items[0].Spec.Template.Spec
	s.g.Expect(pod.ServiceAccountName).To(Equal("default"))
	s.g.Expect(*pod.Containers[0].SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())

	// The work Secret holds the Stack's secrets: it goes as soon as the result is in.
	s.Eventually(func(g Gomega) {
		var secrets corev1.SecretList
		g.Expect(env.Client.List(t.Context(), &secrets, client.InNamespace(s.Namespace), client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy})).To(Succeed())
		g.Expect(secrets.Items).To(BeEmpty())
	})
}

func TestServer_Requests_OnlyTheUpdatesOwnRunner(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.filesStack("held", map[string]string{skipAnnotation: "true"})
	var u v1alpha1.Update
	s.Eventually(func(g Gomega) {
		ups := s.updates()
		g.Expect(ups).To(HaveLen(1))
		u = ups[0]
		g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseRunning))
	})
	// A Pod of the tenant's own, with a valid token for the runner audience, but not
	// created by the runner Job.
	impostor := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "impostor"},
		Spec:       corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{Name: "c", Image: "x"}}},
	}
	s.Create(impostor)
	token, err := boundToken(t.Context(), kubelet.cs, impostor, job.TokenAudience)
	s.g.Expect(err).NotTo(HaveOccurred())
	wrongAudience, err := boundToken(t.Context(), kubelet.cs, impostor, "https://kubernetes.default.svc")
	s.g.Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		name, method, path, token string
		want                      int
	}{
		{name: "no token", method: http.MethodGet, path: "/v1/artifacts/" + u.Spec.ArtifactDigest, want: http.StatusUnauthorized},
		{name: "token for another audience", method: http.MethodGet, path: "/v1/artifacts/" + u.Spec.ArtifactDigest, token: wrongAudience, want: http.StatusUnauthorized},
		{name: "other Pod reads artifact", method: http.MethodGet, path: "/v1/artifacts/" + u.Spec.ArtifactDigest, token: token, want: http.StatusForbidden},
		{name: "other Pod writes result", method: http.MethodPost, path: "/v1/results/" + s.Namespace + "/" + u.Name, token: token, want: http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runnerAPIStatus(t, tc.method, tc.path, tc.token, `{"updateUID":"`+string(u.UID)+`","status":{"phase":"Succeeded"}}`); got != tc.want {
				t.Errorf("status = %d, want %d", got, tc.want)
			}
		})
	}
	s.g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(&u), &u)).To(Succeed())
	s.g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseRunning), "a forged result was recorded")
}

// A Pod the tenant makes with a controller reference to its own runner Job passes for that
// runner (docs/operations.md, what still does not hold): the API server records no creator.
// It is held to what that runner could do, which the tenant's program can do anyway: its own
// Update's artifact and result, nothing of another Update or another namespace's.
func TestServer_Requests_ImpostorWithControllerRefStaysInItsUpdate(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	other := newScenario(t)
	running := func(s *scenario, name string) v1alpha1.Update {
		s.filesStack(name, map[string]string{skipAnnotation: "true"})
		var u v1alpha1.Update
		s.Eventually(func(g Gomega) {
			ups := s.updates()
			g.Expect(ups).To(HaveLen(1))
			u = ups[0]
			g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseRunning))
			g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: job.JobName(u.Name)}, &batchv1.Job{})).To(Succeed())
		})
		return u
	}
	u := running(s, "own")
	victim := running(other, "victim")
	var j batchv1.Job
	s.g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: job.JobName(u.Name)}, &j)).To(Succeed())
	impostor := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            "impostor-with-owner",
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&j, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: corev1.PodSpec{ServiceAccountName: j.Spec.Template.Spec.ServiceAccountName, Containers: []corev1.Container{{Name: "c", Image: "x"}}},
	}
	s.Create(impostor)
	token, err := boundToken(t.Context(), kubelet.cs, impostor, job.TokenAudience)
	s.g.Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		name, method, path string
		body               string
		want               int
	}{
		{name: "its own artifact", method: http.MethodGet, path: "/v1/artifacts/" + u.Spec.ArtifactDigest, want: http.StatusOK},
		{name: "another namespace's artifact", method: http.MethodGet, path: "/v1/artifacts/" + victim.Spec.ArtifactDigest, want: http.StatusForbidden},
		{
			name: "another namespace's result", method: http.MethodPost, path: "/v1/results/" + other.Namespace + "/" + victim.Name,
			body: `{"updateUID":"` + string(victim.UID) + `","status":{"phase":"Succeeded"}}`, want: http.StatusForbidden,
		},
		{
			name: "a result under its path for the other Update's UID", method: http.MethodPost, path: "/v1/results/" + s.Namespace + "/" + u.Name,
			body: `{"updateUID":"` + string(victim.UID) + `","status":{"phase":"Succeeded"}}`, want: http.StatusConflict,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runnerAPIStatus(t, tc.method, tc.path, token, tc.body); got != tc.want {
				t.Errorf("status = %d, want %d", got, tc.want)
			}
		})
	}
	s.g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(&victim), &victim)).To(Succeed())
	s.g.Expect(victim.Status.Phase).To(Equal(v1alpha1.UpdatePhaseRunning), "another namespace's Update took a forged result")
	s.g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(&u), &u)).To(Succeed())
	s.g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseRunning), "a result for another UID was recorded")
}

// runnerAPIStatus sends body to the runner API's path with token ("" for none), and
// returns the answer's status code.
func runnerAPIStatus(t *testing.T, method, path, token, body string) int {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test checks the server's answers, not its identity
	req, err := http.NewRequestWithContext(t.Context(), method, apiURL+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestExecutor_LostRunner_JobDeletedFailsUpdateAndStackRetries(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.filesStack("lost", map[string]string{skipAnnotation: "true"})
	// Lost twice in a row: each lost run fails once, the same way, and counts as a
	// failed run.
	var lost []string
	for attempt := 1; attempt <= 2; attempt++ {
		var u v1alpha1.Update
		j := &batchv1.Job{}
		s.Eventually(func(g Gomega) {
			ups := s.updates()
			g.Expect(ups).To(HaveLen(attempt))
			for _, up := range ups {
				if !slices.Contains(lost, up.Name) {
					u = up
				}
			}
			g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseRunning))
			// The claim comes before the Job.
			g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: job.JobName(u.Name)}, j)).To(Succeed())
		})
		lost = append(lost, u.Name)
		// The runner never reports; its Job goes (deleted by hand, or by a node's loss).
		s.g.Expect(env.Client.Delete(t.Context(), j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		s.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(&u), &u)).To(Succeed())
			g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseFailed))
			g.Expect(u.Status.Result).To(Equal(v1alpha1.UpdateResultFailed))
			c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonRunnerLost))
			g.Expect(c.Message).To(ContainSubstring("Job was deleted"))
		})
	}
	s.g.Expect(metricSum(t, "stackwright_updates_total", map[string]string{"namespace": s.Namespace, "result": "failed"})).To(Equal(2.0))
	// The Stack retries with a new Update, which a working node runs.
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "lost"}}
	if err := s.Get(st); err != nil {
		t.Fatal(err)
	}
	s.Patch(st, func() { delete(st.Annotations, skipAnnotation) })
	s.waitReady("lost")
	s.g.Expect(len(s.updates())).To(BeNumerically(">=", 3))
}

// A Stack's identity tokens reach its runner Job as the API server accepts it: one
// projected volume with a token per audience, and the variables that announce them in
// the work the runner hands to the engine, beside the Stack's own environment. A run with
// them goes through.
func TestExecutor_IdentityTokens_ProjectedIntoRunnerJob(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	const googleAudience = "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/k8s"
	// Held at first, so that its work Secret can be read before the result deletes it.
	s.filesStackWith("federated", map[string]string{skipAnnotation: "true"}, func(st *pulumiv1.Stack) {
		st.Spec.Stackwright = &pulumiv1.StackwrightSpec{IdentityTokens: []pulumiv1.IdentityToken{
			{Audience: "sts.amazonaws.com", Announce: pulumiv1.AnnounceAWS},
			{Audience: googleAudience, Announce: pulumiv1.AnnounceGoogle, ExpirationSeconds: ptr(int64(600))},
		}}
		st.Spec.EnvRefs["AWS_ROLE_ARN"] = pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorLiteral, ResourceSelector: pulumiv1.ResourceSelector{Literal: &pulumiv1.LiteralRef{Value: "arn:aws:iam::1:role/deployer"}}}
	})
	wantSources := []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "sts.amazonaws.com", ExpirationSeconds: ptr(int64(3600)), Path: "0/token"}},
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: googleAudience, ExpirationSeconds: ptr(int64(600)), Path: "1/token"}},
	}
	checkJobs := func(g Gomega) []batchv1.Job {
		var jobs batchv1.JobList
		g.Expect(env.Client.List(t.Context(), &jobs, client.InNamespace(s.Namespace))).To(Succeed())
		g.Expect(jobs.Items).NotTo(BeEmpty())
		for _, j := range jobs.Items {
			var sources []corev1.VolumeProjection
			for _, v := range j.Spec.Template.Spec.Volumes {
				if v.Name == "identity" {
					sources = v.Projected.Sources
				}
			}
			g.Expect(sources).To(Equal(wantSources), "Job %s", j.Name)
			g.Expect(j.Spec.Template.Spec.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "identity", MountPath: job.IdentityDir, ReadOnly: true}))
		}
		return jobs.Items
	}
	var held []batchv1.Job
	var secret corev1.Secret
	s.Eventually(func(g Gomega) {
		held = checkJobs(g)
		var secrets corev1.SecretList
		g.Expect(env.Client.List(t.Context(), &secrets, client.InNamespace(s.Namespace), client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy})).To(Succeed())
		g.Expect(secrets.Items).To(HaveLen(1))
		secret = secrets.Items[0]
	})
	var w job.Work
	s.g.Expect(json.Unmarshal(secret.Data[job.WorkFile], &w)).To(Succeed())
	s.g.Expect(w.Request.Env).To(HaveKeyWithValue("AWS_WEB_IDENTITY_TOKEN_FILE", job.IdentityDir+"/0/token"))
	s.g.Expect(w.Request.Env).To(HaveKeyWithValue("GOOGLE_APPLICATION_CREDENTIALS", job.WorkDir+"/"+job.GoogleCredentialsFile))
	s.g.Expect(w.Request.Env).To(HaveKeyWithValue("AWS_ROLE_ARN", "arn:aws:iam::1:role/deployer"))
	s.g.Expect(w.Request.Env).To(HaveKeyWithValue("STACKWRIGHT_TESTING_ROOT", s.files))
	s.g.Expect(string(secret.Data[job.GoogleCredentialsFile])).To(ContainSubstring(`"file": "` + job.IdentityDir + `/1/token"`))

	// Let it run: its runner is lost with its Job, and the retry's runner is not held.
	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "federated"}}
	if err := s.Get(st); err != nil {
		t.Fatal(err)
	}
	s.g.Expect(env.Client.Delete(t.Context(), &held[0], client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	s.Patch(st, func() { delete(st.Annotations, skipAnnotation) })
	s.waitReady("federated")
	checkJobs(s.g)
}

func ptr[T any](v T) *T { return &v }

// PKO's custom source: no projectRepo, fluxSource or programRef, and a program baked into
// the workspace image at local.dir. The stand-in kubelet runs the runner on this machine,
// so the "image" directory is a local one.
func TestExecutor_CustomSource_RunsProgramBakedIntoImage(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	baked := t.TempDir()
	s.g.Expect(os.WriteFile(filepath.Join(baked, "Pulumi.yaml"), []byte(`name: baked
runtime: yaml
resources:
  f:
    type: stackwright-testing:index:File
    properties:
      path: baked.txt
      content: from the image
`), 0o444)).To(Succeed())
	const img = "registry.example.com/baked:1"
	s.filesStackWith("baked", nil, func(st *pulumiv1.Stack) {
		st.Spec.ProgramRef = nil
		st.Spec.WorkspaceTemplate = &pulumiv1.WorkspaceTemplate{Spec: &pulumiv1.WorkspaceTemplateSpec{Image: img, Local: &pulumiv1.WorkspaceLocalSource{Dir: baked}}}
	})
	st := s.waitReady("baked")
	s.g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal("image:" + img))
	b, err := os.ReadFile(filepath.Join(s.files, "baked.txt"))
	s.g.Expect(err).NotTo(HaveOccurred(), "the runner did not run the baked program")
	s.g.Expect(string(b)).To(Equal("from the image"))

	ups := s.updates()
	s.g.Expect(ups).To(HaveLen(1))
	s.g.Expect(ups[0].Spec.ArtifactDigest).To(BeEmpty(), "nothing to fetch from the manager")
	s.g.Expect(ups[0].Spec.ProjectDir).To(Equal(baked))
	var jobs batchv1.JobList
	s.g.Expect(env.Client.List(t.Context(), &jobs, client.InNamespace(s.Namespace))).To(Succeed())
	s.g.Expect(jobs.Items).To(HaveLen(1))
	pod := jobs.Items[0].Spec.Template.Spec
	s.g.Expect(pod.Containers[0].Image).To(Equal(img))
	s.g.Expect(pod.Containers[0].Command).To(Equal([]string{job.BootstrapBinary}))
	s.g.Expect(pod.InitContainers).To(HaveLen(1))
	s.g.Expect(pod.InitContainers[0].Args).To(Equal([]string{"install-runner", job.BootstrapBinary}))
}

// A gated change through runner Pods: the preview's plan and its steps (with their inputs,
// for the policies) travel back to the manager, and the approved up gets the plan.
func TestExecutor_Approval_PlanAndPolicyThroughRunnerJob(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.Create(&v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "echo"}, Spec: v1alpha1.PolicySpec{
		Enforcement: v1alpha1.EnforcementAdvisory,
		Rego:        "package echo\n\ndeny contains msg if {\n\tsome step in input.steps\n\tstep.op == \"create\"\n\tmsg := sprintf(\"%s writes %s\", [step.urn, step.inputs.path])\n}\n",
	}})
	s.filesStackWith("gated", nil, func(st *pulumiv1.Stack) {
		st.Spec.Stackwright = &pulumiv1.StackwrightSpec{Approval: pulumiv1.ApprovalManual}
	})
	var preview string
	s.Eventually(func(g Gomega) {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: "gated"}, st)).To(Succeed())
		g.Expect(st.Status.Stackwright).NotTo(BeNil())
		g.Expect(st.Status.Stackwright.Approval).NotTo(BeNil())
		g.Expect(st.Status.Stackwright.Approval.State).To(Equal(pulumiv1.ApprovalAwaiting))
		preview = st.Status.Stackwright.Approval.Preview
	})
	p := &v1alpha1.Update{}
	s.g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: preview}, p)).To(Succeed())
	s.g.Expect(p.Status.Runner).To(HavePrefix("job/"))
	s.g.Expect(p.Status.PlanSecretName).NotTo(BeEmpty(), "the runner's plan did not reach the manager")
	s.g.Expect(p.Status.Policy).NotTo(BeNil())
	s.g.Expect(p.Status.Policy.Violations).To(ContainElement(HaveField("Message", HaveSuffix("writes gated.txt"))), "the runner's steps did not reach the policies")
	if _, err := os.Stat(filepath.Join(s.files, "gated.txt")); err == nil {
		t.Fatal("the change was applied before its approval")
	}

	st := &pulumiv1.Stack{}
	s.g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: "gated"}, st)).To(Succeed())
	base := st.DeepCopy()
	metav1.SetMetaDataAnnotation(&st.ObjectMeta, pulumiv1.ApproveAnnotation, preview)
	s.g.Expect(env.Client.Patch(t.Context(), st, client.MergeFrom(base))).To(Succeed())
	done := s.waitReady("gated")
	up := &v1alpha1.Update{}
	s.g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: done.Status.LastUpdate.Name}, up)).To(Succeed())
	s.g.Expect(up.Spec.Options.Plan).To(Equal(preview))
	s.g.Expect(up.Status.Runner).To(HavePrefix("job/"))
	b, err := os.ReadFile(filepath.Join(s.files, "gated.txt"))
	s.g.Expect(err).NotTo(HaveOccurred())
	s.g.Expect(string(b)).To(Equal("from a runner"))
}
