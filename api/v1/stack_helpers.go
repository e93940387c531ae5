package v1

// SourceKind names where a Stack takes its program from.
type SourceKind string

const (
	// SourceKindGit is a git repository (spec.projectRepo).
	SourceKindGit SourceKind = "Git"
	// SourceKindFlux is a Flux source object (spec.fluxSource).
	SourceKindFlux SourceKind = "Flux"
	// SourceKindProgram is a Program object (spec.programRef).
	SourceKindProgram SourceKind = "Program"
)

// SourceKind reports which source the spec selects. It returns "" when no
// source or more than one is set; admission rejects such specs, so "" only
// shows up for objects that bypassed validation.
func (s *StackSpec) SourceKind() SourceKind {
	var kind SourceKind
	n := 0
	if s.ProjectRepo != "" {
		kind = SourceKindGit
		n++
	}
	if s.FluxSource != nil {
		kind = SourceKindFlux
		n++
	}
	if s.ProgramRef != nil {
		kind = SourceKindProgram
		n++
	}
	if n != 1 {
		return ""
	}
	return kind
}

// Suspended reports whether spec.stackwright.suspend is set.
func (s *StackSpec) Suspended() bool {
	return s.Stackwright != nil && s.Stackwright.Suspend
}

// ReconcileRequest returns the value of the pulumi.com/reconciliation-request
// annotation, or "" when it is absent.
func (s *Stack) ReconcileRequest() string {
	return s.GetAnnotations()[ReconcileRequestAnnotation]
}

// ReconcileRequested reports whether the reconciliation-request annotation
// carries a value not handled yet.
func (s *Stack) ReconcileRequested() bool {
	r := s.ReconcileRequest()
	return r != "" && r != s.Status.ObservedReconcileRequest
}
