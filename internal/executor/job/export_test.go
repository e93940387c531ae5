package job

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// JobNameOf and WorkSecretNameOf name the runner objects of an Update the envtest suite
// has yet to see, so that it can create objects in their way.
func JobNameOf(update string) string {
	return jobName(&v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: update}})
}

func WorkSecretNameOf(update string) string {
	return workSecretName(&v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: update}})
}
