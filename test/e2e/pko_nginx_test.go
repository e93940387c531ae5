//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// pkoNginxProgram stands for metral/pulumi-nginx, the program PKO's nginx_k8s.yaml runs: a
// TypeScript program, and runner images carry no Node.js, so it is written here in Pulumi
// YAML under the same project name. Like the original it names no namespace and no
// kubeconfig: the provider creates the Deployment where its in-cluster credentials put it,
// the runner Pod's own namespace. Its image is one the node has (nothing can pull nginx).
func pkoNginxProgram() string {
	return `name: nginx
runtime: yaml
description: A minimal Kubernetes Pulumi program
resources:
  nginx:
    type: kubernetes:apps/v1:Deployment
    properties:
      spec:
        replicas: 1
        selector:
          matchLabels: {app: nginx}
        template:
          metadata:
            labels: {app: nginx}
          spec:
            containers:
            - name: nginx
              image: ` + s3Image + `
              imagePullPolicy: Never
              args: ["--port", ":8080", "--access", "nginx", "--secret", "nginx-secret", "posix", "--nometa", "/data"]
              readinessProbe:
                tcpSocket: {port: 8080}
                periodSeconds: 1
              volumeMounts:
              - {name: data, mountPath: /data}
            volumes:
            - name: data
              emptyDir: {}
outputs:
  name: ${nginx.metadata.name}
`
}

// pkoNginxRBACYAML lets the namespace's default ServiceAccount, which a Stack that names
// none runs as (PKO's manifest names none), do what the seed's deployer may.
const pkoNginxRBACYAML = `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: default-deployer
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: deployer
subjects:
- kind: ServiceAccount
  name: default
`

// testPKONginx applies PKO's nginx_k8s.yaml on the release images. What cannot run offline
// as written is changed, each by an exact replacement the test checks: the program's
// repository and commit become the node's git server's (the same program in YAML, at the
// commit it was pushed as); Pulumi Cloud becomes an S3 backend, so the Stack is given the
// backend and its keys (envRefs) and its stack name takes the organisation a self-managed
// backend requires ("organization"; joeduffy/nginx/dev fails there with "organization name
// must be 'organization'"). Everything else is PKO's: pulumi.com/v1alpha1, the deprecated
// accessTokenSecret (its Secret applied as PKO wrote it), initOnCreate, destroyOnFinalize,
// and no ServiceAccount (the namespace's default).
func testPKONginx(t *testing.T, c client.Client, ns, backend string) {
	ctx := context.Background()
	repos := t.TempDir()
	_, commit := gitserver.NewRepo(t, repos, "pulumi-nginx", map[string]string{"Pulumi.yaml": pkoNginxProgram()})
	srv := gitserver.NewHTTPServerOn(t, listenOnNode(t), repos, nil)
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, seedRBACYAML+"---\n"+pkoNginxRBACYAML))

	b, err := os.ReadFile(filepath.Join(root, "test", "e2e", "testdata", "pko-nginx-k8s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := string(b)
	for _, r := range []struct{ old, new string }{
		{"projectRepo: https://github.com/metral/pulumi-nginx\n", "projectRepo: " + srv.URL + "/pulumi-nginx.git\n"},
		{"commit: 2b0889718d3e63feeb6079ccd5e4488d8601e353\n", "commit: " + commit + "\n"},
		{"stack: joeduffy/nginx/dev\n", "stack: organization/nginx/dev\n"},
		{"  destroyOnFinalize: true\n", "  destroyOnFinalize: true\n  backend: " + backend + "\n  envRefs:\n" + s3EnvRefsYAML},
	} {
		if strings.Count(manifest, r.old) != 1 {
			t.Fatalf("testdata/pko-nginx-k8s.yaml no longer has %q once:\n%s", r.old, manifest)
		}
		manifest = strings.Replace(manifest, r.old, r.new, 1)
	}
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, s3CredentialsYAML+"---\n"+manifest))

	var name string
	NewWithT(t).Eventually(func(g Gomega) {
		st := waitStackReadyOnce(g, c, ns, "nginx-k8s-stack")
		g.Expect(st.Status.LastUpdate).NotTo(BeNil())
		g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal(commit))
		g.Expect(json.Unmarshal(st.Status.Outputs["name"].Raw, &name)).To(Succeed())
		var d appsv1.Deployment
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed(), "the Deployment is in the Stack's namespace")
		g.Expect(d.Status.ReadyReplicas).To(Equal(int32(1)))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
	NewWithT(t).Expect(name).To(HavePrefix("nginx-"), "Pulumi auto-names the Deployment after its resource")
	t.Logf("PKO's nginx_k8s.yaml: Deployment %s available, commit %s", name, commit)

	// destroyOnFinalize: deleting the Stack removes the Deployment first.
	run(t, "kubectl", "delete", "-n", ns, "stack/nginx-k8s-stack", "--timeout=5m")
	NewWithT(t).Eventually(func(g Gomega) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &appsv1.Deployment{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Deployment %s outlived its Stack (%v)", name, err)
	}).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
}
