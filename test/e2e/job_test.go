//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// jobCluster is the Job-executor install that the tests of TestInstall_JobExecutor share:
// the chart with executor=job and a default backend of one prefix per namespace in a
// bucket of the in-cluster S3 server.
type jobCluster struct {
	c             client.Client
	s3            *s3Server
	defaultBucket string
}

// TestInstall_JobExecutor installs once and runs its tests in parallel, each in namespaces
// of its own: most of their time is spent waiting for Pods and polls, which overlap.
func TestInstall_JobExecutor(t *testing.T) {
	c := newClient(t)
	buildBakedImage(t)
	jc := &jobCluster{c: c, s3: startS3(t, c), defaultBucket: "tenants"}
	values := filepath.Join(t.TempDir(), "values.yaml")
	NewWithT(t).Expect(os.WriteFile(values, []byte("executor: job\ndefaultBackend: "+jc.s3.bucket(t, jc.defaultBucket, "")+"\n"), 0o600)).To(Succeed())
	helmInstall(t, "install", "-f", values)
	waitManager(t, c)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *jobCluster)
	}{
		{"RunnerPodPerUpdate", testRunnerPodPerUpdate},
		{"KilledRunnerIsRetried", testKilledRunnerIsRetried},
		{"StacksActAsTheirServiceAccount", testStacksActAsTheirServiceAccount},
		{"GitStackFollowsBranch", testGitStackFollowsBranch},
		{"IdentityTokensReachProgram", testIdentityTokensReachProgram},
		{"RunsProgramBakedIntoImage", testRunsProgramBakedIntoImage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, jc)
		})
	}
}
