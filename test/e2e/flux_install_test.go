//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fluxNamespace is where the Flux controllers run, as `flux install` puts them.
const fluxNamespace = "flux-system"

// The Flux controllers the tests run, each pinned as a tool (hack/tools/<name>) and imaged
// by `make images` as localhost/<name>:<module version>.
var fluxControllers = []struct{ name, module, version string }{
	{"source-controller", "github.com/fluxcd/source-controller", "v1.9.6"},
	{"notification-controller", "github.com/fluxcd/notification-controller", "v1.6.0"},
}

// fluxCluster is the real source-controller and notification-controller, running in the
// cluster from their own CRDs. Pods have no cluster DNS here, so every address is a
// Service's cluster IP.
type fluxCluster struct {
	// eventsURL is notification-controller's event endpoint (Flux's --events-addr).
	eventsURL string
	// receiverIP is the address of notification-controller's webhook receiver Service.
	receiverIP string
}

// installFlux installs Flux's two controllers in the shape of Flux's own install manifests
// (namespace flux-system, a ServiceAccount each, the CRDs from the modules the binaries
// were built from) and removes them, CRDs included, when the test ends.
func installFlux(t *testing.T, c client.Client) *fluxCluster {
	t.Helper()
	var crdDirs []string
	for _, fc := range fluxControllers {
		crdDirs = append(crdDirs, filepath.Join(moduleDir(t, fc.name, fc.module), "config", "crd", "bases"))
	}
	for _, dir := range crdDirs {
		run(t, "kubectl", "apply", "--server-side", "-f", dir)
	}
	t.Cleanup(func() {
		_, _ = runErr("kubectl", "delete", "namespace", fluxNamespace, "--ignore-not-found", "--timeout=3m")
		for _, dir := range crdDirs {
			_, _ = runErr("kubectl", "delete", "--ignore-not-found", "-f", dir)
		}
	})
	run(t, "kubectl", "wait", "--for=condition=Established", "--timeout=1m",
		"crd/gitrepositories.source.toolkit.fluxcd.io", "crd/buckets.source.toolkit.fluxcd.io",
		"crd/receivers.notification.toolkit.fluxcd.io", "crd/alerts.notification.toolkit.fluxcd.io", "crd/providers.notification.toolkit.fluxcd.io")
	createNamespace(t, c, fluxNamespace)
	run(t, "kubectl", "apply", "-n", fluxNamespace, "-f", writeManifest(t, fluxRBACYAML))

	// The Services first: the controllers' flags name their cluster IPs.
	ip := map[string]string{}
	for _, svc := range []string{"source-controller", "notification-controller", "webhook-receiver"} {
		ip[svc] = serviceIP(t, c, fluxNamespace, svc)
	}
	fc := &fluxCluster{eventsURL: "http://" + ip["notification-controller"] + "/", receiverIP: ip["webhook-receiver"]}
	run(t, "kubectl", "apply", "-n", fluxNamespace, "-f", writeManifest(t, fluxDeploymentsYAML(ip["source-controller"], fc.eventsURL)))
	NewWithT(t).Eventually(func(g Gomega) {
		for _, fc := range fluxControllers {
			var d appsv1.Deployment
			g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: fluxNamespace, Name: fc.name}, &d)).To(Succeed())
			g.Expect(d.Status.ReadyReplicas).To(Equal(int32(1)), "%s not ready", fc.name)
		}
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "Flux not ready\n%s", describeNamespace(fluxNamespace))
	return fc
}

// moduleDir is where the Go module cache holds the module a tool was built from.
func moduleDir(t *testing.T, tool, module string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = filepath.Join(root, "hack", "tools", tool)
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("failed to find module %s (run `make tools-cluster`): %v", module, err)
	}
	return strings.TrimSpace(string(out))
}

// serviceIP waits for the Service's cluster IP.
func serviceIP(t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	var ip string
	NewWithT(t).Eventually(func(g Gomega) {
		var svc corev1.Service
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &svc)).To(Succeed())
		g.Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
		ip = svc.Spec.ClusterIP
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	return ip
}

// fluxRBACYAML is Flux's crd-controller role, narrowed to the two controllers' kinds,
// their ServiceAccounts and Services.
const fluxRBACYAML = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: source-controller
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: notification-controller
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: e2e-flux-crd-controller
rules:
- apiGroups: [source.toolkit.fluxcd.io, notification.toolkit.fluxcd.io]
  resources: ["*"]
  verbs: ["*"]
- apiGroups: [""]
  resources: [namespaces, secrets, configmaps, serviceaccounts]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [serviceaccounts/token]
  verbs: [create]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: e2e-flux-crd-controller
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: e2e-flux-crd-controller
subjects:
- {kind: ServiceAccount, name: source-controller, namespace: flux-system}
- {kind: ServiceAccount, name: notification-controller, namespace: flux-system}
---
apiVersion: v1
kind: Service
metadata:
  name: source-controller
spec:
  selector: {app: source-controller}
  ports:
  - {name: http, port: 80, targetPort: 9090}
---
apiVersion: v1
kind: Service
metadata:
  name: notification-controller
spec:
  selector: {app: notification-controller}
  ports:
  - {name: http, port: 80, targetPort: 9090}
---
apiVersion: v1
kind: Service
metadata:
  name: webhook-receiver
spec:
  selector: {app: notification-controller}
  ports:
  - {name: http, port: 80, targetPort: 9292}
`

// fluxDeploymentsYAML is the two controllers' Deployments as Flux's config/manager has
// them, with the addresses given as cluster IPs and the images imported, not pulled.
func fluxDeploymentsYAML(sourceIP, eventsURL string) string {
	deployment := func(name, version, args, ports, volumes string) string {
		return fmt.Sprintf(`---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  selector:
    matchLabels: {app: %[1]s}
  strategy: {type: Recreate}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      serviceAccountName: %[1]s
      terminationGracePeriodSeconds: 10
      securityContext:
        runAsNonRoot: true
        fsGroup: 1337
        seccompProfile: {type: RuntimeDefault}
      containers:
      - name: manager
        image: localhost/%[1]s:%[2]s
        imagePullPolicy: Never
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        env:
        - name: RUNTIME_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        - {name: TUF_ROOT, value: /tmp/.sigstore}
        args: [--watch-all-namespaces, --log-level=debug, --log-encoding=json, --enable-leader-election=false, %[3]s]
        ports: [{name: healthz, containerPort: 9440}, %[4]s]
        readinessProbe:
          httpGet: {port: healthz, path: /readyz}
          periodSeconds: 2
        volumeMounts:
%[5]s`, name, version, args, ports, volumes)
	}
	return deployment("source-controller", fluxControllers[0].version,
		"--storage-path=/data, --storage-adv-addr="+sourceIP+", --events-addr="+eventsURL,
		"{name: http, containerPort: 9090}", `        - {name: data, mountPath: /data}
        - {name: tmp, mountPath: /tmp}
      volumes:
      - {name: data, emptyDir: {}}
      - {name: tmp, emptyDir: {}}
`) + deployment("notification-controller", fluxControllers[1].version,
		// As docs/flux.md requires of a cluster with tenants: no Alert reads events of
		// another namespace.
		"--receiverAddr=:9292, --no-cross-namespace-refs=true",
		"{name: http, containerPort: 9090}, {name: http-webhook, containerPort: 9292}", `        - {name: tmp, mountPath: /tmp}
      volumes:
      - {name: tmp, emptyDir: {}}
`)
}
