package job

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// workspaceOverlay is the part of a Stack's spec.workspaceTemplate (PKO v2's Workspace
// shape) that the Job executor applies to the runner Pod.
type workspaceOverlay struct {
	ServiceAccountName string
	Image              string
	ImagePullPolicy    corev1.PullPolicy
	Resources          *corev1.ResourceRequirements
	Env                []corev1.EnvVar
	PodLabels          map[string]string
	PodAnnotations     map[string]string
	NodeSelector       map[string]string
	Tolerations        []corev1.Toleration
	Volumes            []corev1.Volume
	VolumeMounts       []corev1.VolumeMount
}

// pkoContainer is the container of PKO's workspace Pod whose settings map onto the
// runner container.
const pkoContainer = "pulumi"

// restrictedProfile is PKO's securityProfile that runner Pods always meet.
const restrictedProfile = "restricted"

// parseWorkspaceTemplate reads the honoured part of a workspaceTemplate, and refuses,
// naming them, the settings the Job executor cannot honour: silently running without
// them would be worse than not running. Admission has already checked the template
// against PKO's schema. allowed is what the platform lets the template choose.
func parseWorkspaceTemplate(t *pulumiv1.WorkspaceTemplate, allowed Placement) (*workspaceOverlay, error) {
	if t == nil {
		return nil, nil
	}
	var unsupported []string
	set := func(name string, v any) {
		if b, _ := json.Marshal(v); len(b) > 0 && string(b) != "null" && string(b) != "{}" && string(b) != "[]" {
			unsupported = append(unsupported, name)
		}
	}
	set("metadata", t.Metadata)
	o := &workspaceOverlay{}
	if ws := t.Spec; ws != nil {
		if ws.SecurityProfile != "" && ws.SecurityProfile != restrictedProfile {
			unsupported = append(unsupported, "spec.securityProfile "+ws.SecurityProfile+" (runner Pods are always restricted)")
		}
		set("spec.envFrom", ws.EnvFrom)
		set("spec.git", ws.Git)
		set("spec.flux", ws.Flux)
		set("spec.projectInfo", ws.ProjectInfo)
		set("spec.serviceTemplate", ws.ServiceTemplate)
		set("spec.pulumiLogLevel", ws.PulumiLogLevel)
		set("spec.stacks", ws.Stacks)
		o.ServiceAccountName, o.Image, o.ImagePullPolicy = ws.ServiceAccountName, ws.Image, ws.ImagePullPolicy
		o.Resources, o.Env = ws.Resources, ws.Env
		if ws.Local != nil && ws.Local.Dir != "" && ws.Image == "" {
			unsupported = append(unsupported, "spec.local without spec.image")
		}
		if pt := ws.PodTemplate; pt != nil {
			if m := pt.Metadata; m != nil {
				o.PodLabels, o.PodAnnotations = m.Labels, m.Annotations
			}
			if p := pt.Spec; p != nil {
				unsupported = append(unsupported, o.podSpec(p)...)
			}
		}
	}
	if len(unsupported) > 0 {
		sort.Strings(unsupported)
		return nil, fmt.Errorf("workspaceTemplate sets %s, which the Job executor does not apply (it honours spec.serviceAccountName, spec.image, spec.imagePullPolicy, spec.local.dir, spec.resources, spec.env, spec.securityProfile restricted, spec.podTemplate.metadata labels and annotations, and in spec.podTemplate.spec: nodeSelector, tolerations, volumes, and the env, resources and volumeMounts of container %q)",
			strings.Join(unsupported, ", "), pkoContainer)
	}
	if err := checkVolumeTypes(o.Volumes, allowed.VolumeTypes); err != nil {
		return nil, err
	}
	if err := allowed.check(o); err != nil {
		return nil, err
	}
	for k := range o.PodLabels {
		if strings.HasPrefix(k, "stackwright.dev/") || k == v1alpha1.LabelManagedBy {
			return nil, fmt.Errorf("workspaceTemplate pod label %q is reserved: Stackwright finds its runner Pods by it", k)
		}
	}
	return o, nil
}

// podSpec takes the honoured part of podTemplate.spec and returns the fields it cannot
// apply.
func (o *workspaceOverlay) podSpec(p *corev1.PodSpec) []string {
	var unsupported []string
	o.NodeSelector, o.Tolerations, o.Volumes = p.NodeSelector, p.Tolerations, p.Volumes
	for _, c := range p.Containers {
		if c.Name != pkoContainer {
			unsupported = append(unsupported, "spec.podTemplate.spec.containers["+c.Name+"]")
			continue
		}
		o.VolumeMounts = c.VolumeMounts
		o.Env = append(o.Env, c.Env...)
		// PKO applies the pod template over spec.resources, so the container's win.
		if len(c.Resources.Limits) > 0 || len(c.Resources.Requests) > 0 || len(c.Resources.Claims) > 0 {
			o.Resources = c.Resources.DeepCopy()
		}
		rest := c
		rest.Name, rest.VolumeMounts, rest.Env, rest.Resources = "", nil, nil, corev1.ResourceRequirements{}
		if b, _ := json.Marshal(rest); string(b) != `{"name":"","resources":{}}` {
			unsupported = append(unsupported, "spec.podTemplate.spec.containers[pulumi] (only env, resources and volumeMounts)")
		}
	}
	rest := *p
	rest.NodeSelector, rest.Tolerations, rest.Volumes, rest.Containers = nil, nil, nil, nil
	b, _ := json.Marshal(rest)
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(b, &fields)
	for k := range fields {
		if k != "containers" {
			unsupported = append(unsupported, "spec.podTemplate.spec."+k)
		}
	}
	return unsupported
}

// DefaultAllowedVolumeTypes are the volume types a workspaceTemplate may give runner Pods
// unless a platform admin says otherwise: those the restricted Pod Security profile
// allows. The others (hostPath, nfs, iscsi, cephfs, rbd, flexVolume, ...) reach storage
// with the node's identity or credentials rather than the tenant's, which a Stack's author
// must not get to choose. Types are named as in a Pod's volumes (persistentVolumeClaim).
func DefaultAllowedVolumeTypes() []string {
	return []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
}

// volumeSourceTypes are the JSON names of corev1.VolumeSource's fields, in field order:
// every volume type this build of Kubernetes knows. Reading them from the type, rather than
// listing the forbidden ones, refuses the types later Kubernetes versions add until an
// admin allows them.
var volumeSourceTypes = func() []string {
	t := reflect.TypeFor[corev1.VolumeSource]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}()

// volumeTypes returns the types v sets: one, in a volume the API server accepts.
func volumeTypes(v *corev1.Volume) []string {
	src := reflect.ValueOf(v.VolumeSource)
	var types []string
	for i, name := range volumeSourceTypes {
		if f := src.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			types = append(types, name)
		}
	}
	if len(types) == 0 {
		// The API server makes a volume without a source an emptyDir. So does decoding a
		// type this build does not know, which drops the field.
		types = []string{"emptyDir"}
	}
	return types
}

// checkVolumeTypes refuses, naming it, the first volume of a type not in allowed (nil:
// DefaultAllowedVolumeTypes).
func checkVolumeTypes(volumes []corev1.Volume, allowed []string) error {
	if allowed == nil {
		allowed = DefaultAllowedVolumeTypes()
	}
	for i := range volumes {
		for _, typ := range volumeTypes(&volumes[i]) {
			if !slices.Contains(allowed, typ) {
				return fmt.Errorf("workspaceTemplate volume %q is of type %s, which runner Pods may not mount (allowed: %s; a platform admin can allow more with --runner-allowed-volume-types)",
					volumes[i].Name, typ, names(slices.Sorted(slices.Values(allowed))))
			}
		}
	}
	return nil
}

// ValidateAllowedVolumeTypes checks an admin's PodOptions.AllowedVolumeTypes, so that a
// misspelt type fails the manager's start rather than every Stack that uses it.
func ValidateAllowedVolumeTypes(types []string) error {
	for _, typ := range types {
		if !slices.Contains(volumeSourceTypes, typ) {
			return fmt.Errorf("unknown volume type %q in the runner Pods' allowed volume types (known: %s)", typ, strings.Join(slices.Sorted(slices.Values(volumeSourceTypes)), ", "))
		}
	}
	return nil
}
