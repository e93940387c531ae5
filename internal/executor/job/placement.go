package job

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Placement is what the platform lets a Stack's workspaceTemplate choose about where and
// how its runner Pods run. A Stack's author is a tenant: a node selector or a toleration
// puts their code on nodes the platform keeps for others (system nodes, another tenant's
// pool), a Pod annotation can loosen its confinement (an AppArmor profile of
// "unconfined"), an inline CSI volume is mounted with the driver's identity, and an
// ephemeral volume provisions storage of any class without the right to create claims. A
// nil list means the default; an empty one allows nothing.
type Placement struct {
	// VolumeTypes are the volume types a template may add (DefaultAllowedVolumeTypes).
	VolumeTypes []string
	// NodeSelectorKeys are the node label keys its nodeSelector may name
	// (DefaultNodeSelectorKeys).
	NodeSelectorKeys []string
	// TolerationKeys are the taint keys its tolerations may name (DefaultTolerationKeys);
	// a toleration of every taint (no key) is never allowed.
	TolerationKeys []string
	// AnnotationPrefixes are the prefixes its Pod annotations may start with; "*" allows
	// any but ConfinementAnnotationPrefixes, which must be listed themselves. Default:
	// "*" (PKO's examples annotate workspace Pods, e.g. for Vault's agent injector).
	AnnotationPrefixes []string
	// CSIDrivers are the drivers its inline csi volumes may name. Default: none.
	CSIDrivers []string
	// StorageClasses are the classes its ephemeral volumes may request by name. Default:
	// none.
	StorageClasses []string
}

// ConfinementAnnotationPrefixes are the annotations that loosen a Pod's confinement (its
// AppArmor and seccomp profiles): "*" does not allow them; only a prefix that names them
// does.
var ConfinementAnnotationPrefixes = []string{"container.apparmor.security.beta.kubernetes.io/", "seccomp.security.alpha.kubernetes.io/", "container.seccomp.security.alpha.kubernetes.io/"}

// DefaultAnnotationPrefixes allows any annotation but the confinement ones.
func DefaultAnnotationPrefixes() []string { return []string{"*"} }

// DefaultNodeSelectorKeys are the well-known node labels a runner may be placed by: its
// platform, and the zone or instance type it runs in, none of which picks a tenant's pool.
func DefaultNodeSelectorKeys() []string {
	return []string{"kubernetes.io/arch", "kubernetes.io/os", "node.kubernetes.io/instance-type", "topology.kubernetes.io/region", "topology.kubernetes.io/zone"}
}

// DefaultTolerationKeys are the taints a runner may tolerate: those of a node that stops
// answering, which only say how long to wait before the Pod is evicted.
func DefaultTolerationKeys() []string {
	return []string{"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
}

func orDefault(list []string, def func() []string) []string {
	if list == nil {
		return def()
	}
	return list
}

// check refuses, naming each, the choices of o that the placement does not allow.
func (p Placement) check(o *workspaceOverlay) error {
	if o == nil {
		return nil
	}
	var refused []string
	selectorKeys := orDefault(p.NodeSelectorKeys, DefaultNodeSelectorKeys)
	for _, k := range slices.Sorted(maps.Keys(o.NodeSelector)) {
		if !slices.Contains(selectorKeys, k) {
			refused = append(refused, fmt.Sprintf("nodeSelector key %q (allowed: %s; --runner-allowed-node-selector-keys)", k, names(selectorKeys)))
		}
	}
	tolerationKeys := orDefault(p.TolerationKeys, DefaultTolerationKeys)
	for _, t := range o.Tolerations {
		if t.Key == "" || !slices.Contains(tolerationKeys, t.Key) {
			refused = append(refused, fmt.Sprintf("toleration of taint %q (allowed: %s; --runner-allowed-toleration-keys)", cmp.Or(t.Key, "(every taint)"), names(tolerationKeys)))
		}
	}
	prefixes := orDefault(p.AnnotationPrefixes, DefaultAnnotationPrefixes)
	for _, k := range slices.Sorted(maps.Keys(o.PodAnnotations)) {
		if !annotationAllowed(k, prefixes) {
			refused = append(refused, fmt.Sprintf("pod annotation %q (allowed prefixes: %s; --runner-allowed-annotation-prefixes)", k, names(prefixes)))
		}
	}
	for _, v := range o.Volumes {
		switch {
		case v.CSI != nil && !slices.Contains(p.CSIDrivers, v.CSI.Driver):
			refused = append(refused, fmt.Sprintf("volume %q of CSI driver %q (allowed: %s; --runner-allowed-csi-drivers)", v.Name, v.CSI.Driver, names(p.CSIDrivers)))
		case v.Ephemeral != nil:
			class := ephemeralClass(v.Ephemeral)
			if class == "" || !slices.Contains(p.StorageClasses, class) {
				refused = append(refused, fmt.Sprintf("ephemeral volume %q of storage class %q (allowed: %s, named in the claim template; --runner-allowed-storage-classes)", v.Name, cmp.Or(class, "(the cluster's default)"), names(p.StorageClasses)))
			}
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("workspaceTemplate chooses what the platform keeps for itself: %s", strings.Join(refused, "; "))
	}
	return nil
}

// annotationAllowed reports whether key starts with a prefix of the list, "*" matching
// every key but the confinement annotations.
func annotationAllowed(key string, prefixes []string) bool {
	hasPrefix := func(list []string) bool {
		return slices.ContainsFunc(list, func(p string) bool { return p != "*" && strings.HasPrefix(key, p) })
	}
	if hasPrefix(prefixes) {
		return true
	}
	return slices.Contains(prefixes, "*") && !hasPrefix(ConfinementAnnotationPrefixes)
}

func ephemeralClass(e *corev1.EphemeralVolumeSource) string {
	if e.VolumeClaimTemplate == nil || e.VolumeClaimTemplate.Spec.StorageClassName == nil {
		return ""
	}
	return *e.VolumeClaimTemplate.Spec.StorageClassName
}

func names(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
