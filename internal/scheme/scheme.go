package scheme

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// New returns a scheme with the Kubernetes built-ins and every Stackwright API group.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, pulumiv1.AddToScheme, v1alpha1.AddToScheme, autov1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("failed to build scheme: %w", err)
		}
	}
	return s, nil
}
