//go:build e2e

package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackwright/stackwright/internal/image"
)

// version is the tag `make images` stamped (the Makefile's VERSION).
const version = "v0.1.0"

// testingImage is the one image the end-to-end tests deploy, as manager and runner: the
// release files and the test provider, whose resources have checkable side effects. The
// release images carry no test code (TestImages_Release_CarryNoTestCode).
const testingImage = "localhost/stackwright-testing:" + version

// testProvider is the test provider's binary name.
const testProvider = "pulumi-resource-stackwright-testing"

// TestImages_Release_CarryNoTestCode lists every file of the release images `make images`
// wrote, as the cluster imported them: the test provider, which writes ConfigMaps with the
// token of any Pod that runs it, is in none of them, and is in the testing image (so the
// listing would see it).
func TestImages_Release_CarryNoTestCode(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		archive, ref string
		wantTestCode bool
	}{
		{archive: "stackwright-" + version + ".tar", ref: "localhost/stackwright:" + version},
		{archive: "stackwright-runner-" + version + ".tar", ref: "localhost/stackwright-runner:" + version},
		{archive: "stackwright-testing-" + version + ".tar", ref: testingImage, wantTestCode: true},
	} {
		files, err := image.ListFiles(filepath.Join(root, "dist", tc.archive))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(files).To(HaveKey(tc.ref))
		g.Expect(files[tc.ref]).To(ContainElement("/usr/local/bin/pulumi"), "%s lists no engine: the listing is broken", tc.ref)
		var test []string
		for _, f := range files[tc.ref] {
			if strings.Contains(f, "stackwright-testing") {
				test = append(test, f)
			}
		}
		if tc.wantTestCode {
			g.Expect(test).To(ContainElement("/usr/local/bin/"+testProvider), tc.ref)
		} else {
			g.Expect(test).To(BeEmpty(), "%s ships test code", tc.ref)
		}
	}
}

// testingValues are the Helm values that deploy the testing image.
var testingValues = []string{
	"--set", "image.repository=localhost/stackwright-testing",
	"--set", "runner.image.repository=localhost/stackwright-testing",
}
