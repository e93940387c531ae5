package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GetConditions lets code that is generic over kinds (condition setters, the status
// patcher, test harnesses) reach an Update's conditions.
func (u *Update) GetConditions() []metav1.Condition { return u.Status.Conditions }

// SetConditions replaces the Update's conditions.
func (u *Update) SetConditions(c []metav1.Condition) { u.Status.Conditions = c }

// GetConditions returns the StackTemplate's conditions.
func (t *StackTemplate) GetConditions() []metav1.Condition { return t.Status.Conditions }

// SetConditions replaces the StackTemplate's conditions.
func (t *StackTemplate) SetConditions(c []metav1.Condition) { t.Status.Conditions = c }

// GetConditions returns the StackSet's conditions.
func (s *StackSet) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions replaces the StackSet's conditions.
func (s *StackSet) SetConditions(c []metav1.Condition) { s.Status.Conditions = c }

// GetConditions returns the StackRollout's conditions.
func (r *StackRollout) GetConditions() []metav1.Condition { return r.Status.Conditions }

// SetConditions replaces the StackRollout's conditions.
func (r *StackRollout) SetConditions(c []metav1.Condition) { r.Status.Conditions = c }
