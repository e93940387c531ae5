package v1

import (
	"encoding/json"
)

// WorkspaceProgram is PKO v2's custom source: the program baked into the workspace image
// (spec.workspaceTemplate.spec.image) at spec.workspaceTemplate.spec.local.dir.
type WorkspaceProgram struct {
	Image string
	Dir   string
}

// WorkspaceProgram reads the custom source from spec.workspaceTemplate. ok is false when
// the template sets no local.dir (an image alone only changes the runner's image). A
// template that is not valid JSON of PKO's shape has no custom source either: the Job
// executor reports it when it applies the template.
func (s *StackSpec) WorkspaceProgram() (p WorkspaceProgram, ok bool) {
	if s.WorkspaceTemplate == nil || len(s.WorkspaceTemplate.Raw) == 0 {
		return p, false
	}
	var ws struct {
		Spec struct {
			Image string `json:"image"`
			Local *struct {
				Dir string `json:"dir"`
			} `json:"local"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(s.WorkspaceTemplate.Raw, &ws); err != nil || ws.Spec.Local == nil || ws.Spec.Local.Dir == "" {
		return p, false
	}
	return WorkspaceProgram{Image: ws.Spec.Image, Dir: ws.Spec.Local.Dir}, true
}
