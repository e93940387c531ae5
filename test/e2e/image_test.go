//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/internal/image"
)

// bakedImage is a PKO-style workspace image: pulumi, the YAML language host and the test
// provider on its PATH, and a program at /share/source, but no Stackwright binary.
const bakedImage = "localhost/e2e-baked-program:v1"

// buildBakedImage builds bakedImage from ./bin and loads it into the cluster.
func buildBakedImage(t *testing.T) {
	t.Helper()
	program := filepath.Join(t.TempDir(), "Pulumi.yaml")
	if err := os.WriteFile(program, []byte(`name: baked
runtime: yaml
resources:
  made:
    type: stackwright-testing:index:ConfigMap
    properties:
      name: made-from-image
      data:
        from: the program baked into the image
`), 0o644); err != nil {
		t.Fatal(err)
	}
	loadWorkspaceImage(t, bakedImage, image.File{Source: program, Path: "/share/source/Pulumi.yaml", Mode: 0o444})
}

// loadWorkspaceImage builds a PKO-style workspace image named ref, with pulumi, the YAML
// language host and the test provider from ./bin on its PATH plus extra files, and loads it
// into the cluster.
func loadWorkspaceImage(t *testing.T, ref string, extra ...image.File) {
	t.Helper()
	files := extra
	for _, b := range []string{"pulumi", "pulumi-language-yaml", "pulumi-resource-stackwright-testing"} {
		files = append(files, image.File{Source: filepath.Join(root, "bin", b), Path: "/opt/pulumi/bin/" + b, Mode: 0o755})
	}
	img, err := image.NewBuilder(t.TempDir(), time.Unix(0, 0)).Build(image.Spec{
		Ref:   ref,
		Files: files,
		User:  "1000:1000",
		Env: []string{
			"PATH=/opt/pulumi/bin",
			"PULUMI_SKIP_UPDATE_CHECK=true",
			"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
		},
		Entrypoint: []string{"/opt/pulumi/bin/pulumi"},
	})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "image.tar")
	if _, err := image.WriteArchive(archive, img); err != nil {
		t.Fatal(err)
	}
	run(t, "stackwright-cluster", "load", "--bin", filepath.Join(root, "bin"), archive)
}

// testRunsProgramBakedIntoImage applies PKO v2's custom source: a
// Stack with no projectRepo, fluxSource or programRef whose workspaceTemplate names an
// image and the program's directory in it. Its runner Pod runs that image, with the
// runner binary copied in by an init container.
func testRunsProgramBakedIntoImage(t *testing.T, jc *jobCluster) {
	g, c := NewWithT(t), jc.c

	const ns = "e2e-baked"
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, configMapWriterYAML))
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, s3CredentialsYAML+`---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: baked
spec:
  stack: e2e
  serviceAccountName: deployer
  destroyOnFinalize: true
  envRefs:
`+s3EnvRefsYAML+`  workspaceTemplate:
    spec:
      image: `+bakedImage+`
      local:
        dir: /share/source
`))
	NewWithT(t).Eventually(func(g Gomega) {
		st := waitStackReadyOnce(g, c, ns, "baked")
		g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal("image:" + bakedImage))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
	var cm corev1.ConfigMap
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "made-from-image"}, &cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("from", "the program baked into the image"))
	var pods corev1.PodList
	g.Expect(c.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
	g.Expect(pods.Items).NotTo(BeEmpty())
	g.Expect(pods.Items[0].Spec.Containers[0].Image).To(Equal(bakedImage))

	run(t, "kubectl", "delete", "-n", ns, "stack/baked", "--timeout=5m")
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "made-from-image"}, &cm)
	g.Expect(err).To(HaveOccurred(), "destroyOnFinalize left the ConfigMap behind")
}
