package v1

import "time"

// SourceKind names where a Stack takes its program from.
type SourceKind string

const (
	// SourceKindGit is a git repository (spec.projectRepo).
	SourceKindGit SourceKind = "Git"
	// SourceKindFlux is a Flux source object (spec.fluxSource).
	SourceKindFlux SourceKind = "Flux"
	// SourceKindProgram is a Program object (spec.programRef).
	SourceKindProgram SourceKind = "Program"
	// SourceKindImage is PKO's custom source: none of the above, and a program baked into
	// the workspace image (spec.workspaceTemplate spec.image and spec.local.dir).
	SourceKindImage SourceKind = "Image"
)

// SourceKind reports which source the spec selects. It returns "" when more than one is
// set or none at all (both admitted, as PKO does, and stalled by Review).
func (s *StackSpec) SourceKind() SourceKind {
	switch f := s.sourceFields(); {
	case len(f) > 1:
		return ""
	case len(f) == 1:
		return sourceKinds[f[0]]
	}
	if _, ok := s.WorkspaceProgram(); ok {
		return SourceKindImage
	}
	return ""
}

// sourceKinds maps the source fields of a spec to their kinds.
var sourceKinds = map[string]SourceKind{
	"spec.projectRepo": SourceKindGit, "spec.fluxSource": SourceKindFlux, "spec.programRef": SourceKindProgram,
}

// Suspended reports whether spec.stackwright.suspend is set.
func (s *StackSpec) Suspended() bool {
	return s.Stackwright != nil && s.Stackwright.Suspend
}

// ApprovalMode returns spec.stackwright.approval, Auto when unset.
func (s *StackSpec) ApprovalMode() ApprovalMode {
	if s.Stackwright == nil || s.Stackwright.Approval == "" {
		return ApprovalAuto
	}
	return s.Stackwright.Approval
}

// OutputsExport returns spec.stackwright.outputs, or nil when the outputs are
// not published.
func (s *StackSpec) OutputsExport() *OutputsExport {
	if s.Stackwright == nil {
		return nil
	}
	return s.Stackwright.Outputs
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

// Resync periods, as PKO defines them, except for the floor: PKO raises anything under 60s
// to 60s; Stackwright allows down to 10s, which is still far from hammering a git server.
const (
	DefaultResyncPeriod = 60 * time.Second
	MinResyncPeriod     = 10 * time.Second
)

// ResyncPeriod is how often the Stack polls its source (branches) and, with
// continueResyncOnCommitMatch, re-runs an unchanged desired state. Zero means never: Flux
// sources and Programs announce their changes through watches.
func (s *StackSpec) ResyncPeriod() time.Duration {
	d := time.Duration(max(s.ResyncFrequencySeconds, 0)) * time.Second
	polls := s.Branch != "" || s.ContinueResyncOnCommitMatch
	switch {
	case d == 0 && polls:
		return DefaultResyncPeriod
	case d == 0:
		return 0
	case d < MinResyncPeriod:
		return MinResyncPeriod
	}
	return d
}

// IdentityTokens returns spec.stackwright.identityTokens.
func (s *StackSpec) IdentityTokens() []IdentityToken {
	if s.Stackwright == nil {
		return nil
	}
	return s.Stackwright.IdentityTokens
}

// Expiration returns the token's lifetime in seconds, defaulted as admission would.
func (t *IdentityToken) Expiration() int64 {
	if t.ExpirationSeconds == nil || *t.ExpirationSeconds == 0 {
		return DefaultIdentityTokenExpirationSeconds
	}
	return *t.ExpirationSeconds
}
