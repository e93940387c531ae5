package v1

// WorkspaceProgram is PKO v2's custom source: the program baked into the workspace image
// (spec.workspaceTemplate.spec.image) at spec.workspaceTemplate.spec.local.dir.
type WorkspaceProgram struct {
	Image string
	Dir   string
}

// WorkspaceProgram reads the custom source from spec.workspaceTemplate. ok is false when
// the template sets no local.dir (an image alone only changes the runner's image).
func (s *StackSpec) WorkspaceProgram() (p WorkspaceProgram, ok bool) {
	t := s.WorkspaceTemplate
	if t == nil || t.Spec == nil || t.Spec.Local == nil || t.Spec.Local.Dir == "" {
		return p, false
	}
	return WorkspaceProgram{Image: t.Spec.Image, Dir: t.Spec.Local.Dir}, true
}
