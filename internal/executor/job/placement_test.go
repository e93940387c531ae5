package job

import (
	"strings"
	"testing"
)

func TestParseWorkspaceTemplate_Placement_RefusedByName(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tmpl    string
		allowed Placement
		want    []string // empty: accepted
	}{
		{
			name: "well-known node labels and the default tolerations",
			tmpl: `{"spec": {"podTemplate": {"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64", "topology.kubernetes.io/zone": "a"},
			  "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]}}}}`,
		},
		{
			name: "a tenant pool, a system taint, every taint",
			tmpl: `{"spec": {"podTemplate": {"spec": {"nodeSelector": {"pool": "platform"},
			  "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}, {"operator": "Exists"}]}}}}`,
			want: []string{
				`nodeSelector key "pool" (allowed: kubernetes.io/arch, kubernetes.io/os, node.kubernetes.io/instance-type, topology.kubernetes.io/region, topology.kubernetes.io/zone; --runner-allowed-node-selector-keys)`,
				`toleration of taint "node-role.kubernetes.io/control-plane"`, `toleration of taint "(every taint)"`,
			},
		},
		{
			name:    "the platform's own pool and taint, allowed",
			tmpl:    `{"spec": {"podTemplate": {"spec": {"nodeSelector": {"pool": "tenants"}, "tolerations": [{"key": "tenants", "operator": "Exists"}]}}}}`,
			allowed: Placement{NodeSelectorKeys: []string{"pool"}, TolerationKeys: []string{"tenants"}},
		},
		{
			name: "an AppArmor annotation by default",
			tmpl: `{"spec": {"podTemplate": {"metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/pulumi": "unconfined"}}}}}`,
			want: []string{`pod annotation "container.apparmor.security.beta.kubernetes.io/pulumi" (allowed prefixes: *; --runner-allowed-annotation-prefixes)`},
		},
		{
			name: "other annotations by default, as PKO's examples have them",
			tmpl: `{"spec": {"podTemplate": {"metadata": {"annotations": {"vault.hashicorp.com/agent-inject": "true"}}}}}`,
		},
		{
			name:    "AppArmor only when its own prefix is listed",
			tmpl:    `{"spec": {"podTemplate": {"metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/pulumi": "runtime/default"}}}}}`,
			allowed: Placement{AnnotationPrefixes: []string{"*", "container.apparmor.security.beta.kubernetes.io/"}},
		},
		{
			name:    "a narrowed list refuses the rest",
			tmpl:    `{"spec": {"podTemplate": {"metadata": {"annotations": {"example.com/x": "y"}}}}}`,
			allowed: Placement{AnnotationPrefixes: []string{"cluster-autoscaler.kubernetes.io/"}},
			want:    []string{`pod annotation "example.com/x" (allowed prefixes: cluster-autoscaler.kubernetes.io/; --runner-allowed-annotation-prefixes)`},
		},
		{
			name:    "annotations under an allowed prefix",
			tmpl:    `{"spec": {"podTemplate": {"metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}}}}`,
			allowed: Placement{AnnotationPrefixes: []string{"cluster-autoscaler.kubernetes.io/"}},
		},
		{
			name: "an inline CSI volume and ephemeral volumes",
			tmpl: `{"spec": {"podTemplate": {"spec": {"volumes": [
			  {"name": "secrets-store", "csi": {"driver": "secrets-store.csi.k8s.io"}},
			  {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "premium", "resources": {"requests": {"storage": "1Gi"}}}}}},
			  {"name": "default-class", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]}}}}`,
			want: []string{
				`volume "secrets-store" of CSI driver "secrets-store.csi.k8s.io" (allowed: none; --runner-allowed-csi-drivers)`,
				`ephemeral volume "scratch" of storage class "premium"`, `ephemeral volume "default-class" of storage class "(the cluster's default)"`,
			},
		},
		{
			name: "an allowed CSI driver and storage class",
			tmpl: `{"spec": {"podTemplate": {"spec": {"volumes": [
			  {"name": "secrets-store", "csi": {"driver": "secrets-store.csi.k8s.io"}},
			  {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard", "resources": {"requests": {"storage": "1Gi"}}}}}}]}}}}`,
			allowed: Placement{CSIDrivers: []string{"secrets-store.csi.k8s.io"}, StorageClasses: []string{"standard"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseWorkspaceTemplate(workspaceTemplate(t, tc.tmpl), tc.allowed)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("parseWorkspaceTemplate = %v; want it accepted", err)
				}
				return
			}
			if err == nil {
				t.Fatal("parseWorkspaceTemplate accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q; want it to contain %q", err, w)
				}
			}
		})
	}
}
