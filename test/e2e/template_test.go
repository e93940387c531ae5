//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// templateGroup is the API group the Job-executor install serves templates in.
const templateGroup = "platform.e2e.stackwright.dev"

// Self-service, as issue 32's acceptance has it: a platform template "bucket" whose stack
// (state in the in-cluster S3 server) creates a ConfigMap in the platform namespace with
// the runner Pod's in-cluster credentials, which only the template's ServiceAccount may do;
// tenants whose ServiceAccount "app" may only use the template's kind (and read Secrets) in
// their own namespace.
const (
	selfPlatform = "e2e-self-platform"
	selfA        = "e2e-self-a"
	selfB        = "e2e-self-b"
	selfOutside  = "e2e-self-outside"
	selfLabel    = "e2e.stackwright.dev/self-service"
)

// selfPlatformYAML is the platform namespace's part: the backend's and secrets provider's
// Secrets, the template's ServiceAccount and its one right, and the program.
var selfPlatformYAML = s3CredentialsYAML + "---\n" + configMapWriter("bucket-runner") + `---
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: bucket
program:
  configuration:
    size:
      type: Number
  resources:
    made:
      type: kubernetes:core/v1:ConfigMap
      properties:
        metadata:
          name: bucket-${pulumi.stack}
        data:
          size: v${size}
  outputs:
    greeting: size ${size}
    internal: platform only
`

// selfTemplateYAML is the template of one version; extra is added to its parameters'
// properties.
func selfTemplateYAML(extra string) string {
	return selfTemplateOf(`  parameters:
    type: object
    properties:
      size:
        type: integer
        minimum: 1
        maximum: 10
        default: 3
`+extra, "size")
}

// selfTemplateV1YAML is the template grown a version v1 that renames size to capacity and
// is stored, v1alpha1 deprecated, protecting its instances if protect is set.
func selfTemplateV1YAML(protect bool) string {
	return selfTemplateOf(`  versions:
  - name: v1alpha1
    deprecated: true
    deprecationWarning: buckets v1alpha1 is going, use v1 (size is now capacity)
    parameters:
      type: object
      properties:
        size: {type: integer, minimum: 1, maximum: 10, default: 3}
        tier: {type: string, enum: [gold, silver]}
  - name: v1
    storage: true
    renames:
    - {from: size, to: capacity}
    parameters:
      type: object
      properties:
        capacity: {type: integer, minimum: 1, maximum: 10, default: 3}
        tier: {type: string, enum: [gold, silver]}
  protectInstances: `+fmt.Sprint(protect)+`
`, "capacity")
}

// selfTemplateOf is the template with the given parameters or versions, its config key
// size set from the parameter param.
func selfTemplateOf(api, param string) string {
	return `apiVersion: stackwright.dev/v1alpha1
kind: StackTemplate
metadata:
  name: e2e-buckets
spec:
  api:
    group: ` + templateGroup + `
    kind: Bucket
    plural: buckets
` + api + `  namespace: ` + selfPlatform + `
  stack:
    stack: buckets
    programRef:
      name: bucket
    serviceAccountName: bucket-runner
    destroyOnFinalize: true
    envRefs:
` + indent(s3EnvRefsYAML, "  ") + `  config:
  - key: size
    parameter: ` + param + `
  outputs: [greeting]
  namespaceSelector:
    matchLabels:
      ` + selfLabel + `: "yes"
`
}

// selfTenantYAML lets the ServiceAccount "app" use buckets and read Secrets in its own
// namespace, and nothing else.
const selfTenantYAML = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: app
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: buckets
rules:
- apiGroups: [` + templateGroup + `]
  resources: [buckets]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: buckets
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: buckets
subjects:
- kind: ServiceAccount
  name: app
`

// bucketYAML is an instance with the given parameters (lines indented four spaces).
func bucketYAML(name, params string) string {
	return `apiVersion: ` + templateGroup + `/v1alpha1
kind: Bucket
metadata:
  name: ` + name + `
spec:
  parameters:
` + params + `  writeConnectionSecretToRef:
    name: ` + name + `-conn
`
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}

// app is kubectl acting as namespace ns's ServiceAccount "app".
func app(ns string) string { return "--as=system:serviceaccount:" + ns + ":app" }

// testSelfServiceTemplate runs issue 32's acceptance on the Job-executor install.
func testSelfServiceTemplate(t *testing.T, jc *jobCluster) {
	g, c := NewWithT(t), jc.c
	ctx := context.Background()
	// Cleanups run last-in first-out: the tenants' namespaces (and instances) go first,
	// then the template, which waits for its instances, then the platform namespace.
	createNamespace(t, c, selfPlatform)
	t.Cleanup(func() { deleteNamespace(t, c, selfPlatform) })
	t.Cleanup(func() {
		_, _ = runErr("kubectl", "delete", "stacktemplate", "e2e-buckets", "--ignore-not-found", "--timeout=3m")
	})
	for _, ns := range []string{selfA, selfB, selfOutside} {
		createNamespace(t, c, ns)
		t.Cleanup(func() { deleteNamespace(t, c, ns) })
	}
	for _, ns := range []string{selfA, selfB} {
		run(t, "kubectl", "label", "namespace", ns, selfLabel+"=yes")
	}
	for _, ns := range []string{selfA, selfB, selfOutside} {
		run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, selfTenantYAML))
	}
	run(t, "kubectl", "apply", "-n", selfPlatform, "-f", writeManifest(t, selfPlatformYAML))
	run(t, "kubectl", "apply", "-f", writeManifest(t, selfTemplateYAML("")))
	run(t, "kubectl", "wait", "--for=condition=Ready", "stacktemplate/e2e-buckets", "--timeout=2m")
	manager := managerPod(g, c)

	// The manager may write CustomResourceDefinitions; the install's policy keeps them in
	// the template groups.
	out, err := runErr("kubectl", "--as=system:serviceaccount:"+systemNamespace+":"+manager.Spec.ServiceAccountName, "create", "-f", writeManifest(t, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.elsewhere.e2e.stackwright.dev
spec:
  group: elsewhere.e2e.stackwright.dev
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object}
`))
	g.Expect(err).To(HaveOccurred(), "the manager's ServiceAccount created a definition outside its groups:\n%s", out)
	g.Expect(out).To(ContainSubstring("Stackwright may define kinds only in the API groups " + templateGroup))

	// Tenant A, with plain kubectl: the API server knows the kind and checks parameters.
	g.Eventually(func(g Gomega) {
		// The API server publishes a new kind's OpenAPI a little after establishing it.
		out, err := runErr("kubectl", app(selfA), "explain", "buckets.spec.parameters", "--api-version="+templateGroup+"/v1alpha1")
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		g.Expect(out).To(ContainSubstring("size"))
	}).WithTimeout(time.Minute).WithPolling(2*time.Second).Should(Succeed(), "kubectl explain shows the parameters")
	for what, params := range map[string]string{
		"out of range":  "    size: 11\n",
		"wrong type":    "    size: big\n",
		"unknown field": "    colour: red\n",
	} {
		out, err := runErr("kubectl", app(selfA), "apply", "-n", selfA, "-f", writeManifest(t, bucketYAML("bad", params)))
		g.Expect(err).To(HaveOccurred(), "%s accepted:\n%s", what, out)
		g.Expect(out).To(ContainSubstring("spec.parameters"), what)
	}
	run(t, "kubectl", app(selfA), "apply", "-n", selfA, "-f", writeManifest(t, bucketYAML("data", "    size: 4\n")))
	run(t, "kubectl", app(selfA), "wait", "-n", selfA, "--for=condition=Ready", "buckets/data", "--timeout=5m")
	g.Expect(run(t, "kubectl", app(selfA), "get", "buckets", "-n", selfA)).To(ContainSubstring("data"))
	conn := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: selfA, Name: "data-conn"}, conn)).To(Succeed())
	g.Expect(conn.Data).To(Equal(map[string][]byte{"greeting": []byte("size 4")}), "only the listed outputs reach the tenant")

	// The Stack, its state and its credentials stay in the platform namespace, out of the
	// tenant's reach; the run was the template's ServiceAccount's.
	st := selfStack(g, c, selfA, "data")
	g.Expect(st.Spec.ServiceAccountName).To(Equal("bucket-runner"))
	made := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: selfPlatform, Name: "bucket-" + st.Spec.Stack}, made)).To(Succeed(),
		"the program's in-cluster ConfigMap, which only bucket-runner may create")
	g.Expect(made.Data).To(HaveKeyWithValue("size", "v4"))
	g.Expect(jc.s3.objects(jc.defaultBucket, selfPlatform+"/.pulumi/stacks")).NotTo(BeEmpty(), "no state under the platform namespace")
	for _, check := range [][]string{
		{"get", "secrets", "-n", selfPlatform},
		{"get", "stacks.pulumi.com", "-n", selfPlatform},
		{"get", "stacks.pulumi.com", "-n", selfA},
		{"create", "stacks.pulumi.com", "-n", selfA},
	} {
		out, _ := runErr("kubectl", append([]string{"auth", "can-i"}, append(check, app(selfA))...)...)
		g.Expect(strings.TrimSpace(out)).To(Equal("no"), "tenant A may %v", check)
	}
	g.Expect(strings.TrimSpace(run(t, "kubectl", "auth", "can-i", "get", "secrets", "-n", selfA, app(selfA)))).To(Equal("yes"))

	// Tenant B sees nothing of A's.
	for _, args := range [][]string{
		{"get", "buckets", "data", "-n", selfA},
		{"get", "secret", "data-conn", "-n", selfA},
		{"get", "stacks.pulumi.com", "-n", selfPlatform},
		{"delete", "buckets", "data", "-n", selfA},
	} {
		out, err := runErr("kubectl", append([]string{app(selfB)}, args...)...)
		g.Expect(err).To(HaveOccurred(), "tenant B could %v:\n%s", args, out)
		g.Expect(out).To(ContainSubstring("forbidden"), "tenant B %v", args)
	}
	// A namespace outside the template's selector gets a clear refusal, and no Stack.
	run(t, "kubectl", app(selfOutside), "apply", "-n", selfOutside, "-f", writeManifest(t, bucketYAML("data", "    size: 2\n")))
	run(t, "kubectl", app(selfOutside), "wait", "-n", selfOutside, "--for=condition=Stalled", "buckets/data", "--timeout=2m")
	reason := run(t, "kubectl", "get", "buckets", "data", "-n", selfOutside, "-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].reason}`)
	g.Expect(reason).To(Equal(v1alpha1.ReasonNamespaceNotAllowed))
	// No approvers: nobody approves on an instance.
	out, err = runErr("kubectl", app(selfA), "annotate", "-n", selfA, "buckets/data", pulumiv1.ApproveAnnotation+"=anything")
	g.Expect(err).To(HaveOccurred(), "an approval by the tenant was accepted:\n%s", out)
	g.Expect(out).To(ContainSubstring("only members of no group"))

	// A parameter change runs the stack once.
	before := ups(g, c, selfPlatform, st.Name)
	run(t, "kubectl", app(selfA), "apply", "-n", selfA, "-f", writeManifest(t, bucketYAML("data", "    size: 6\n")))
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(conn), conn)).To(Succeed())
		g.Expect(conn.Data).To(HaveKeyWithValue("greeting", []byte("size 6")))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(selfPlatform))
	run(t, "kubectl", app(selfA), "wait", "-n", selfA, "--for=condition=Ready", "buckets/data", "--timeout=2m")
	g.Expect(ups(g, c, selfPlatform, st.Name)).To(Equal(before+1), "ups after one parameter change")

	// A schema change is served by the running manager.
	run(t, "kubectl", "apply", "-f", writeManifest(t, selfTemplateYAML("      tier:\n        type: string\n        enum: [gold, silver]\n")))
	g.Eventually(func(g Gomega) {
		out, err := runErr("kubectl", app(selfA), "apply", "-n", selfA, "--dry-run=server", "-f", writeManifest(t, bucketYAML("data", "    size: 6\n    tier: gold\n")))
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	}).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "the new optional parameter is served")
	g.Expect(managerPod(g, c).UID).To(Equal(manager.UID), "the manager restarted")

	// A version that renames size to capacity: the API server converts through the
	// manager's conversion webhook, behind the chart's Service; nothing redeploys.
	before = ups(g, c, selfPlatform, st.Name)
	run(t, "kubectl", "apply", "-f", writeManifest(t, selfTemplateV1YAML(true)))
	g.Eventually(func(g Gomega) {
		out, err := runErr("kubectl", "get", "crd", "buckets."+templateGroup, "-o", "jsonpath={.spec.conversion.strategy} {.status.storedVersions}")
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		g.Expect(out).To(Equal(`Webhook ["v1"]`))
	}).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "the instances move to v1\n%s", run(t, "kubectl", "get", "stacktemplate", "e2e-buckets", "-o", "yaml"))
	for version, field := range map[string]string{"v1": "capacity", "v1alpha1": "size"} {
		out := run(t, "kubectl", app(selfA), "get", "buckets."+version+"."+templateGroup, "data", "-n", selfA, "-o", "jsonpath={.spec.parameters."+field+"}")
		g.Expect(out).To(HaveSuffix("6"), "the instance read in %s", version)
	}
	out = run(t, "kubectl", app(selfA), "apply", "-n", selfA, "-f", writeManifest(t, bucketYAML("data", "    size: 6\n")))
	g.Expect(out).To(ContainSubstring("buckets v1alpha1 is going, use v1 (size is now capacity)"), "kubectl apply of a v1alpha1 instance")
	g.Consistently(func() int { return ups(g, c, selfPlatform, st.Name) }).WithTimeout(10*time.Second).WithPolling(2*time.Second).Should(Equal(before), "the rename redeployed the instance")

	// The template protects its instances: deleting one is refused until a person says so.
	out, err = runErr("kubectl", app(selfA), "delete", "-n", selfA, "buckets/data", "--timeout=1m")
	g.Expect(err).To(HaveOccurred(), "a protected instance was deleted:\n%s", out)
	g.Expect(out).To(ContainSubstring("is protected from deletion by StackTemplate e2e-buckets"))
	run(t, "kubectl", app(selfA), "annotate", "-n", selfA, "buckets/data", pulumiv1.ProtectedAnnotation+"=false")

	// Deleting the instance destroys the stack and cleans up.
	run(t, "kubectl", app(selfA), "delete", "-n", selfA, "buckets/data", "--timeout=5m")
	g.Eventually(func(g Gomega) {
		var stacks pulumiv1.StackList
		g.Expect(c.List(ctx, &stacks, client.InNamespace(selfPlatform))).To(Succeed())
		g.Expect(stacks.Items).To(BeEmpty())
		err := c.Get(ctx, client.ObjectKeyFromObject(made), made)
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the destroy left the ConfigMap behind")
		err = c.Get(ctx, client.ObjectKeyFromObject(conn), conn)
		g.Expect(err).To(HaveOccurred(), "the published Secret outlived its instance")
	}).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(selfPlatform))
	run(t, "kubectl", "annotate", "-n", selfOutside, "buckets/data", pulumiv1.ProtectedAnnotation+"=false")
	run(t, "kubectl", "delete", "-n", selfOutside, "buckets/data", "--timeout=2m")
}

// selfStack is the Stack of tenant ns's instance name, in the platform namespace.
func selfStack(g Gomega, c client.Client, ns, name string) *pulumiv1.Stack {
	var stacks pulumiv1.StackList
	g.Expect(c.List(context.Background(), &stacks, client.InNamespace(selfPlatform), client.MatchingLabels{
		v1alpha1.TemplateLabel: "e2e-buckets", v1alpha1.InstanceNamespaceLabel: ns,
	})).To(Succeed())
	for i := range stacks.Items {
		if stacks.Items[i].Annotations[v1alpha1.InstanceAnnotation] == ns+"/"+name {
			return &stacks.Items[i]
		}
	}
	g.Expect(fmt.Errorf("no Stack of %s/%s among %d", ns, name, len(stacks.Items))).NotTo(HaveOccurred())
	return nil
}
