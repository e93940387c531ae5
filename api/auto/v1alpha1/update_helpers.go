package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GetConditions lets code that is generic over kinds (the status patcher, test harnesses)
// reach an Update's conditions.
func (u *Update) GetConditions() []metav1.Condition { return u.Status.Conditions }

// SetConditions replaces the Update's conditions.
func (u *Update) SetConditions(c []metav1.Condition) { u.Status.Conditions = c }
