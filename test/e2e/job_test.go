//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// jobCluster is the Job-executor install that the tests of TestInstall_JobExecutor share:
// the chart with executor=job and a default backend of one prefix per namespace in a
// bucket of the in-cluster S3 server, which can give a namespace keys that reach only its
// prefix (s3Server.tenantKeys); the root's keys reach every prefix.
type jobCluster struct {
	c             client.Client
	s3            *s3Server
	defaultBucket string
	// flux is Flux's source- and notification-controller, which the manager posts its
	// events to.
	flux *fluxCluster
	// gitWebhookIP is the cluster IP of the manager's git webhook Service.
	gitWebhookIP string
	// nodeCA signs the certificates of HTTPS servers on the node; the manager trusts it.
	nodeCA *nodeCA
	// prometheus is the URL of a Prometheus on the node, scraping an exporter that reports
	// unhealthy's value: the one server the install's metric gates may query
	// (rollouts.metricGateURLs), so it runs before the install.
	prometheus string
	unhealthy  *atomic.Int32
}

// TestInstall_JobExecutor installs once and runs its tests in parallel, each in namespaces
// of its own: most of their time is spent waiting for Pods and polls, which overlap.
func TestInstall_JobExecutor(t *testing.T) {
	c := newClient(t)
	buildBakedImage(t)
	// Flux first: the manager watches the Flux source kinds installed when it starts.
	const defaultBucket = "tenants"
	jc := &jobCluster{c: c, s3: startS3(t, c, withTenantBucket(defaultBucket)), defaultBucket: defaultBucket, flux: installFlux(t, c), nodeCA: newNodeCA(t)}
	jc.nodeCA.publish(t, c)
	jc.unhealthy = &atomic.Int32{}
	jc.prometheus = startPrometheus(t, startExporter(t, jc.unhealthy))
	values := filepath.Join(t.TempDir(), "values.yaml")
	// Four slots for the parallel tests below, one of which holds its tenant's share for
	// the whole run (a tenant of two namespaces, by tenantLabel); unschedulable runners give theirs back after a minute (they are made
	// so by a node label the platform lets runners be placed by).
	NewWithT(t).Expect(os.WriteFile(values, []byte("executor: job\nmaxConcurrentUpdates: 4\ntenantLabel: "+tenantLabel+"\nrunner:\n  pendingTimeout: 1m\n  allowed:\n    nodeSelectorKeys: [kubernetes.io/os, stackwright.dev/e2e]\ntemplates:\n  apiGroups: ["+templateGroup+"]\ndefaultBackend: "+jc.s3.bucket(t, jc.defaultBucket, "")+
		"\nflux:\n  eventsAddress: "+jc.flux.eventsURL+"\ngitWebhook:\n  enabled: true\nrollouts:\n  metricGateURLs: ["+jc.prometheus+"]\n"+nodeCAValues), 0o600)).To(Succeed())
	helmInstall(t, "install", "-f", values)
	waitManager(t, c)
	jc.gitWebhookIP = serviceIP(t, c, systemNamespace, "stackwright-git-webhook")
	// Longest first (as measured on 2026-11-27), so that the long ones do not start last
	// and keep the run going after the others are done.
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *jobCluster)
	}{
		{"KilledRunnerIsRetried", testKilledRunnerIsRetried},
		{"StackSetReviewBranches", testStackSetReviewBranches},
		{"PullRequestPreviews", testPullRequestPreviews},
		{"TenantCannotStarveOrSpoofAnother", testTenantCannotStarveOrSpoofAnother},
		{"FluxSources", testFluxSources},
		{"FluxNotifications", testFluxNotifications},
		{"VolumeOutsideAllowListRefused", testVolumeOutsideAllowListRefused},
		{"SelfServiceTemplate", testSelfServiceTemplate},
		{"FleetRollout", testFleetRollout},
		{"TemplateRollout", testTemplateRollout},
		{"RolloutMetricGate", testRolloutMetricGate},
		{"GitStackFollowsBranch", testGitStackFollowsBranch},
		{"GitHubAppFollowsBranch", testGitHubAppFollowsBranch},
		{"NamespaceDeletionDestroys", testNamespaceDeletionDestroys},
		{"PKOOneOffOperations", testPKOOneOffOperations},
		{"StacksActAsTheirServiceAccount", testStacksActAsTheirServiceAccount},
		{"RunnerPodPerUpdate", testRunnerPodPerUpdate},
		{"ProgramSeesOnlyItsEnvironment", testProgramSeesOnlyItsEnvironment},
		{"IdentityTokensReachProgram", testIdentityTokensReachProgram},
		{"GitWebhook", testGitWebhook},
		{"RunsProgramBakedIntoImage", testRunsProgramBakedIntoImage},
		{"MetricsRefuseAnonymousScrape", testMetricsRefuseAnonymousScrape},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, jc)
		})
	}
}

// testProgramSeesOnlyItsEnvironment: a program's environment in a runner Pod is the
// Stack's own and a short allow-list, not the Pod's (no HOSTNAME, no service links). The
// manager's environment is in another Pod altogether.
func testProgramSeesOnlyItsEnvironment(t *testing.T, jc *jobCluster) {
	c := jc.c
	const ns = "e2e-env"
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, s3CredentialsYAML+`---
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: env
program:
  resources:
    seen:
      type: stackwright-testing:index:Environment
  outputs:
    names: ${seen.names}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: env
spec:
  stack: e2e
  programRef:
    name: env
  envRefs:
    FROM_THE_STACK:
      type: Literal
      literal:
        value: "yes"
`+s3EnvRefsYAML))
	NewWithT(t).Eventually(func(g Gomega) {
		st := waitStackReadyOnce(g, c, ns, "env")
		var names []string
		g.Expect(json.Unmarshal(st.Status.Outputs["names"].Raw, &names)).To(Succeed())
		g.Expect(names).To(ContainElements("FROM_THE_STACK", "PATH", "HOME", "KUBERNETES_SERVICE_HOST"))
		// Every container has HOSTNAME (its Pod's name) and the kubernetes Service's links
		// (KUBERNETES_PORT, KUBERNETES_PORT_443_TCP_ADDR, ...).
		for _, n := range names {
			g.Expect(n).NotTo(Equal("HOSTNAME"), "the Pod's own variable reached the program")
			g.Expect(n).NotTo(HavePrefix("KUBERNETES_PORT"), "a service link variable reached the program")
		}
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
}
