//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// pkoWorkspaceImage is the image PKO's flux-source example names. It cannot be pulled
// here, so a stand-in with the same name is loaded into the node: pulumi, the YAML language
// host and the test provider, as PKO's image has pulumi and its language hosts.
const pkoWorkspaceImage = "docker.io/pulumi/pulumi:3.202.0-nonroot"

// pkoExamplesRepositoryYAML is the GitRepository of PKO's flux-source example
// (examples/flux-source/repository.yaml), its URL replaced by the node's git server.
const pkoExamplesRepositoryYAML = `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: pulumi-examples
spec:
  interval: 10m
  ref:
    branch: master
  timeout: 60s
  url: URL
`

// testPKOFluxExample applies PKO's flux-source example Stack (test/compat's copy, written
// from PKO's examples) on a GitRepository of the real source-controller. One thing cannot
// run offline as written: the example keeps its state in Pulumi Cloud (envRefs
// PULUMI_ACCESS_TOKEN), so that entry is replaced by the keys of the install's default
// backend; every other field, the workspace image and the ServiceAccount included, is as
// PKO wrote it.
func testPKOFluxExample(t *testing.T, jc *jobCluster, ns string, srv *gitserver.HTTPServer, repos string) {
	t.Helper()
	examples, _ := gitserver.NewRepo(t, repos, "examples", map[string]string{"random-yaml/Pulumi.yaml": namedConfigMapProgram("random-yaml", "pko-flux-example", "random")})
	examples.Branch("master")
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, strings.Replace(pkoExamplesRepositoryYAML, "URL", srv.URL+"/examples.git", 1)))
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, configMapWriter("random-yaml-flux")))

	stack, err := os.ReadFile(filepath.Join(root, "test", "compat", "testdata", "flux-gitrepository.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cloud := `  envRefs:
    PULUMI_ACCESS_TOKEN:
      type: Secret
      secret:
        name: pulumi-api-secret
        key: accessToken
`
	if !strings.Contains(string(stack), cloud) {
		t.Fatalf("test/compat/testdata/flux-gitrepository.yaml no longer has the envRefs this test replaces:\n%s", stack)
	}
	manifest := strings.Replace(string(stack), cloud, "  envRefs:\n"+s3EnvRefsYAML, 1)
	loadWorkspaceImage(t, pkoWorkspaceImage)
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, s3CredentialsYAML+"---\n"+manifest))
	deployedValue(t, jc.c, ns, "flux-gitrepository", "pko-flux-example", "master@sha1:", "random")
}
