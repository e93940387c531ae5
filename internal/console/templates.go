package console

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

type versionView struct {
	Name       string `json:"name"`
	Served     bool   `json:"served"`
	Storage    bool   `json:"storage"`
	Deprecated bool   `json:"deprecated,omitempty"`
}

// namespaceInstances counts a template's instances in one namespace.
type namespaceInstances struct {
	Namespace string `json:"namespace"`
	Instances int    `json:"instances"`
	// Behind counts those rendered from an older revision than the template's; NotReady
	// those not Ready.
	Behind   int `json:"behind"`
	NotReady int `json:"notReady"`
}

// templateView is one StackTemplate on the Templates page.
type templateView struct {
	Name     string        `json:"name"`
	Kind     string        `json:"kind"`
	Group    string        `json:"group"`
	State    string        `json:"state"`
	Message  string        `json:"message,omitempty"`
	Versions []versionView `json:"versions"`
	Revision int64         `json:"revision"`
	// Revisions are the StackTemplateRevisions kept, newest first.
	Revisions  []int64              `json:"revisions"`
	Strategy   string               `json:"strategy,omitempty"`
	Instances  int                  `json:"instances"`
	Behind     int                  `json:"behind"`
	Namespaces []namespaceInstances `json:"namespaces"`
	// InstancesError is why the instances could not be listed (the API's words);
	// InstancesNotice that only the kubeconfig's namespace could be.
	InstancesError  string `json:"instancesError,omitempty"`
	InstancesNotice string `json:"instancesNotice,omitempty"`
}

type templatesView struct {
	Templates []templateView `json:"templates"`
	// RevisionsError is why the revisions could not be listed.
	RevisionsError string `json:"revisionsError,omitempty"`
}

// newTemplateView is t with its revisions (numbers) and instances.
func newTemplateView(t *v1alpha1.StackTemplate, revisions []int64, instances []unstructured.Unstructured) templateView {
	v := templateView{Name: t.Name, Kind: t.Spec.API.Kind, Group: t.Spec.API.Group, State: "Unknown",
		Revision: t.Status.Revision, Revisions: revisions, Strategy: string(t.Spec.UpdateStrategy.Type),
		Namespaces: []namespaceInstances{}}
	if v.Revisions == nil {
		v.Revisions = []int64{}
	}
	switch {
	case apimeta.IsStatusConditionTrue(t.Status.Conditions, pulumiv1.ConditionStalled):
		v.State = "Stalled"
	case apimeta.IsStatusConditionTrue(t.Status.Conditions, pulumiv1.ConditionReady):
		v.State = "Ready"
	case apimeta.FindStatusCondition(t.Status.Conditions, pulumiv1.ConditionReady) != nil:
		v.State = "NotReady"
	}
	if c := apimeta.FindStatusCondition(t.Status.Conditions, pulumiv1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
		v.Message = c.Message
	}
	for _, kv := range t.KindVersions() {
		v.Versions = append(v.Versions, versionView{Name: kv.Name, Served: kv.IsServed(), Storage: kv.Name == t.StorageVersion(), Deprecated: kv.Deprecated})
	}
	byNS := map[string]*namespaceInstances{}
	for i := range instances {
		in := &instances[i]
		var st v1alpha1.InstanceStatus
		// A status that does not read as one counts as not rendered and not Ready.
		if m, ok := in.Object["status"].(map[string]any); ok {
			_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st)
		}
		n := byNS[in.GetNamespace()]
		if n == nil {
			n = &namespaceInstances{Namespace: in.GetNamespace()}
			byNS[in.GetNamespace()] = n
		}
		n.Instances++
		v.Instances++
		if st.TemplateRevision < t.Status.Revision {
			n.Behind++
			v.Behind++
		}
		if !apimeta.IsStatusConditionTrue(st.Conditions, pulumiv1.ConditionReady) {
			n.NotReady++
		}
	}
	for _, n := range byNS {
		v.Namespaces = append(v.Namespaces, *n)
	}
	slices.SortFunc(v.Namespaces, func(a, b namespaceInstances) int { return strings.Compare(a.Namespace, b.Namespace) })
	return v
}

func (s *Server) templates(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	list := &v1alpha1.StackTemplateList{}
	if err := s.env.Client.List(ctx, list); err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("failed to list StackTemplates: %w", err))
		return
	}
	v := templatesView{Templates: []templateView{}}
	revisions := map[string][]int64{}
	revs := &v1alpha1.StackTemplateRevisionList{}
	if err := s.env.Client.List(ctx, revs); err != nil {
		v.RevisionsError = fmt.Sprintf("failed to list StackTemplateRevisions: %v", err)
	}
	for _, rev := range revs.Items {
		revisions[rev.Spec.Template] = append(revisions[rev.Spec.Template], rev.Spec.Revision)
	}
	for i := range list.Items {
		t := &list.Items[i]
		rs := revisions[t.Name]
		slices.SortFunc(rs, func(a, b int64) int { return cmp.Compare(b, a) })
		instances := &unstructured.UnstructuredList{}
		gvk := t.GVK()
		instances.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		var sc scope
		var listErr error
		if t.Status.CustomResourceDefinition != "" { // else the kind is not served yet
			sc, listErr = s.list(ctx, instances, gvk.Kind+" instances")
		}
		tv := newTemplateView(t, rs, instances.Items)
		tv.InstancesNotice = sc.Notice
		if listErr != nil {
			tv.InstancesError = listErr.Error()
		}
		v.Templates = append(v.Templates, tv)
	}
	slices.SortFunc(v.Templates, func(a, b templateView) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, v)
}
