package job

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// workspaceOverlay is the part of a Stack's spec.workspaceTemplate (PKO v2's Workspace
// shape) that the Job executor applies to the runner Pod.
type workspaceOverlay struct {
	ServiceAccountName string
	Image              string
	Resources          *corev1.ResourceRequirements
	Env                []corev1.EnvVar
	NodeSelector       map[string]string
	Tolerations        []corev1.Toleration
	Volumes            []corev1.Volume
	VolumeMounts       []corev1.VolumeMount
}

// pkoWorkspace mirrors PKO v2's WorkspaceTemplate. Every field PKO defines is listed, so
// that one Stackwright does not honour is named in the error instead of being dropped.
type pkoWorkspace struct {
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Spec     struct {
		ServiceAccountName string                       `json:"serviceAccountName,omitempty"`
		Image              string                       `json:"image,omitempty"`
		ImagePullPolicy    string                       `json:"imagePullPolicy,omitempty"`
		Resources          *corev1.ResourceRequirements `json:"resources,omitempty"`
		Env                []corev1.EnvVar              `json:"env,omitempty"`
		PodTemplate        *struct {
			Metadata json.RawMessage `json:"metadata,omitempty"`
			Spec     *corev1.PodSpec `json:"spec,omitempty"`
		} `json:"podTemplate,omitempty"`
		// Not honoured: named when set.
		SecurityProfile json.RawMessage `json:"securityProfile,omitempty"`
		EnvFrom         json.RawMessage `json:"envFrom,omitempty"`
		Git             json.RawMessage `json:"git,omitempty"`
		Flux            json.RawMessage `json:"flux,omitempty"`
		// PKO's custom source (the program baked into spec.image); the Stack controller
		// resolves it as the Stack's source.
		Local *struct {
			Dir string `json:"dir,omitempty"`
		} `json:"local,omitempty"`
		PulumiLogLevel json.RawMessage `json:"pulumiLogLevel,omitempty"`
		Stacks         json.RawMessage `json:"stacks,omitempty"`
	} `json:"spec,omitempty"`
}

// pkoContainer is the container of PKO's workspace Pod whose settings map onto the
// runner container.
const pkoContainer = "pulumi"

// parseWorkspaceTemplate reads the honoured part of a workspaceTemplate, and refuses,
// naming them, the settings the Job executor cannot honour: silently running without
// them would be worse than not running.
func parseWorkspaceTemplate(raw *apiextensionsv1.JSON) (*workspaceOverlay, error) {
	if raw == nil || len(bytes.TrimSpace(raw.Raw)) == 0 || string(raw.Raw) == "null" {
		return nil, nil
	}
	var ws pkoWorkspace
	dec := json.NewDecoder(bytes.NewReader(raw.Raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ws); err != nil {
		return nil, fmt.Errorf("workspaceTemplate: %w", err)
	}
	var unsupported []string
	set := func(name string, v json.RawMessage) {
		if len(v) > 0 && string(v) != "null" && string(v) != "{}" {
			unsupported = append(unsupported, name)
		}
	}
	set("metadata", ws.Metadata)
	set("spec.securityProfile", ws.Spec.SecurityProfile)
	set("spec.envFrom", ws.Spec.EnvFrom)
	set("spec.git", ws.Spec.Git)
	set("spec.flux", ws.Spec.Flux)
	set("spec.pulumiLogLevel", ws.Spec.PulumiLogLevel)
	set("spec.stacks", ws.Spec.Stacks)
	if ws.Spec.ImagePullPolicy != "" {
		unsupported = append(unsupported, "spec.imagePullPolicy")
	}
	o := &workspaceOverlay{
		ServiceAccountName: ws.Spec.ServiceAccountName,
		Image:              ws.Spec.Image,
		Resources:          ws.Spec.Resources,
		Env:                ws.Spec.Env,
	}
	if ws.Spec.Local != nil && ws.Spec.Local.Dir != "" && ws.Spec.Image == "" {
		unsupported = append(unsupported, "spec.local without spec.image")
	}
	if pt := ws.Spec.PodTemplate; pt != nil {
		set("spec.podTemplate.metadata", pt.Metadata)
		if p := pt.Spec; p != nil {
			o.NodeSelector, o.Tolerations, o.Volumes = p.NodeSelector, p.Tolerations, p.Volumes
			for _, c := range p.Containers {
				if c.Name != pkoContainer {
					unsupported = append(unsupported, "spec.podTemplate.spec.containers["+c.Name+"]")
					continue
				}
				o.VolumeMounts = c.VolumeMounts
				o.Env = append(o.Env, c.Env...)
				if c.Image != "" || len(c.Command) > 0 || len(c.Args) > 0 || c.SecurityContext != nil || len(c.EnvFrom) > 0 {
					unsupported = append(unsupported, "spec.podTemplate.spec.containers[pulumi] (only env and volumeMounts)")
				}
			}
			rest := *p
			rest.NodeSelector, rest.Tolerations, rest.Volumes, rest.Containers = nil, nil, nil, nil
			if b, _ := json.Marshal(rest); string(b) != "{}" && string(b) != `{"containers":null}` {
				var fields map[string]json.RawMessage
				_ = json.Unmarshal(b, &fields)
				for k := range fields {
					if k != "containers" {
						unsupported = append(unsupported, "spec.podTemplate.spec."+k)
					}
				}
			}
		}
	}
	if len(unsupported) > 0 {
		sort.Strings(unsupported)
		return nil, fmt.Errorf("workspaceTemplate sets %s, which the Job executor does not apply (it honours spec.serviceAccountName, spec.image, spec.local.dir, spec.resources, spec.env, and in spec.podTemplate.spec: nodeSelector, tolerations, volumes, and the env and volumeMounts of container %q)",
			strings.Join(unsupported, ", "), pkoContainer)
	}
	for _, v := range o.Volumes {
		if v.HostPath != nil {
			return nil, fmt.Errorf("workspaceTemplate volume %q is a hostPath, which the restricted Pod Security profile of runner Pods forbids", v.Name)
		}
	}
	return o, nil
}
