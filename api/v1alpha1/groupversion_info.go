package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion identifies this API: stackwright.dev/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "stackwright.dev", Version: "v1alpha1"}

	// SchemeGroupVersion is an alias of GroupVersion for code that expects the
	// client-go naming.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	// It is apimachinery's builder rather than controller-runtime's (deprecated
	// there), which keeps this package free of controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Update{}, &UpdateList{},
		&StackRollout{}, &StackRolloutList{},
		&Policy{}, &PolicyList{},
		&ClusterPolicy{}, &ClusterPolicyList{},
		&StackTemplate{}, &StackTemplateList{},
		&StackTemplateRevision{}, &StackTemplateRevisionList{},
		&StackSet{}, &StackSetList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
