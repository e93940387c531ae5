package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GetConditions and SetConditions let code that is generic over kinds (condition setters,
// the status patcher, test harnesses) reach a Stack's conditions.
func (s *Stack) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions replaces the Stack's conditions.
func (s *Stack) SetConditions(c []metav1.Condition) { s.Status.Conditions = c }

// GetConditions returns the Program's conditions.
func (p *Program) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions replaces the Program's conditions.
func (p *Program) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }
