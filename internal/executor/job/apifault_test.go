package job

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/fault"
)

func TestAPIFault_ClassifiesRefusals(t *testing.T) {
	jobs := schema.GroupResource{Group: "batch", Resource: "jobs"}
	terminating := apierrors.NewForbidden(jobs, "r", errors.New("namespace is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	for _, tc := range []struct {
		name    string
		err     error
		stalled bool
	}{
		{name: "invalidJobStalls", err: apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "r", field.ErrorList{field.Duplicate(field.NewPath("spec", "template", "spec", "volumes").Index(3).Child("name"), "work")}), stalled: true},
		{name: "forbiddenStalls", err: apierrors.NewForbidden(jobs, "r", errors.New("no RBAC")), stalled: true},
		{name: "terminatingNamespaceRetries", err: terminating},
		{name: "timeoutRetries", err: apierrors.NewServerTimeout(jobs, "create", 1)},
		{name: "throttledRetries", err: apierrors.NewTooManyRequests("slow down", 1)},
		{name: "connectionErrorRetries", err: errors.New("dial tcp 10.96.0.1:443: connect: connection refused")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := fault.As(apiFault(tc.err, "failed to create runner Job %s", "r"))
			if !ok {
				t.Fatalf("apiFault returned no fault")
			}
			wantReason := v1alpha1.ReasonTransientFailure
			if tc.stalled {
				wantReason = v1alpha1.ReasonPermanentFailure
			}
			if f.Stalled != tc.stalled || f.Reason != wantReason {
				t.Errorf("fault = {Stalled: %v, Reason: %s}; want {%v, %s}", f.Stalled, f.Reason, tc.stalled, wantReason)
			}
		})
	}
}
