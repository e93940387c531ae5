//go:build e2e

package e2e

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// testIdentityTokensReachProgram asks for two projected ServiceAccount
// tokens with their own audiences: the program finds them through the variables the
// cloud SDKs read (AWS_WEB_IDENTITY_TOKEN_FILE) or one the Stack names, and proves each
// with a TokenReview against the API server, as the Stack's ServiceAccount.
func testIdentityTokensReachProgram(t *testing.T, jc *jobCluster) {
	c := jc.c

	const ns = "e2e-identity"
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	t.Cleanup(func() {
		_, _ = runErr("kubectl", "delete", "clusterrolebinding", ns+"-token-reviewer", "--ignore-not-found")
	})
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, s3CredentialsYAML+`---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: token-reviewer
---
# TokenReviews are cluster-scoped: only a ClusterRoleBinding grants them.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: `+ns+`-token-reviewer
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:auth-delegator
subjects:
- kind: ServiceAccount
  name: token-reviewer
  namespace: `+ns+`
---
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: tokens
program:
  resources:
    aws:
      type: stackwright-testing:index:TokenReview
      properties:
        tokenEnv: AWS_WEB_IDENTITY_TOKEN_FILE
        audience: sts.amazonaws.com
    custom:
      type: stackwright-testing:index:TokenReview
      properties:
        tokenEnv: E2E_TOKEN_FILE
        audience: e2e.stackwright.dev
  outputs:
    awsUser: ${aws.username}
    awsAudiences: ${aws.audiences}
    customPath: ${custom.path}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: tokens
spec:
  stack: e2e
  programRef:
    name: tokens
  serviceAccountName: token-reviewer
  envRefs:
`+s3EnvRefsYAML+`  stackwright:
    identityTokens:
    - audience: sts.amazonaws.com
      announce: AWS
    - audience: e2e.stackwright.dev
      env: E2E_TOKEN_FILE
      expirationSeconds: 600
`))
	NewWithT(t).Eventually(func(g Gomega) {
		st := waitStackReadyOnce(g, c, ns, "tokens")
		got := map[string]any{}
		for k, v := range st.Status.Outputs {
			var x any
			g.Expect(json.Unmarshal(v.Raw, &x)).To(Succeed())
			got[k] = x
		}
		g.Expect(got).To(Equal(map[string]any{
			"awsUser":      "system:serviceaccount:" + ns + ":token-reviewer",
			"awsAudiences": []any{"sts.amazonaws.com"},
			"customPath":   "/var/run/secrets/stackwright.dev/identity/1/token",
		}))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
}
