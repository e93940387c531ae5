package v1

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// SpecReview is what Stackwright thinks of a Stack spec that admission let in. Admission is
// deliberately no stricter than PKO's CRDs (a GitOps sync fails as a whole on one rejected
// manifest), so the checks PKO does not make at admission live here instead:
//
//   - Problems keep the Stack from running at all: the controller stalls it (reason
//     SpecInvalid) with the first one as the message, before it touches the source.
//   - Ignored lists fields that are set but have no effect with the rest of the spec; the
//     Stack runs as if they were absent.
//
// The install's guidance ValidatingAdmissionPolicy (config/admission) warns about both at
// apply time, with the same wording; a test holds the two in step.
type SpecReview struct {
	Problems []string
	Ignored  []string
}

// resourceSelectorTypes are the values a ResourceRef's type may take. Matching is exact,
// as in PKO: "secret" is not "Secret".
var resourceSelectorTypes = []ResourceSelectorType{ResourceSelectorEnv, ResourceSelectorFS, ResourceSelectorSecret, ResourceSelectorLiteral}

// Review checks spec for everything admission does not refuse but the controller cannot
// honour. Messages name the field as a user would write it in the manifest.
func (s *StackSpec) Review() SpecReview {
	var r SpecReview
	problem := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }
	ignored := func(format string, args ...any) { r.Ignored = append(r.Ignored, fmt.Sprintf(format, args...)) }

	if strings.TrimSpace(s.Stack) == "" {
		problem("spec.stack is empty: name the Pulumi stack to deploy")
	}
	if f := s.sourceFields(); len(f) > 1 {
		problem("spec sets %d sources (%s): set exactly one of spec.projectRepo, spec.fluxSource or spec.programRef", len(f), strings.Join(f, ", "))
	}
	git := s.ProjectRepo != ""
	switch {
	case git && s.Commit != "" && s.Branch != "":
		problem("spec.commit and spec.branch are both set: set spec.commit to pin a revision or spec.branch to follow one, not both")
	case git && s.Commit == "" && s.Branch == "":
		problem("spec.projectRepo needs spec.commit or spec.branch")
	case !git && (s.Commit != "" || s.Branch != ""):
		ignored("spec.commit and spec.branch are ignored without spec.projectRepo")
	}
	if !git && s.RepoDir != "" {
		ignored("spec.repoDir is ignored without spec.projectRepo (a Flux source takes spec.fluxSource.dir)")
	}
	if !git && s.Shallow {
		ignored("spec.shallow is ignored without spec.projectRepo")
	}
	if !git && (s.GitAuth != nil || s.GitAuthSecret != "") {
		ignored("spec.gitAuth and spec.gitAuthSecret are ignored without spec.projectRepo")
	}
	if git && s.GitAuth != nil && s.GitAuth.AccessToken == nil && s.GitAuth.SSHAuth == nil && s.GitAuth.BasicAuth == nil && s.GitAuth.GitHubApp == nil {
		problem("spec.gitAuth sets none of accessToken, sshAuth, basicAuth or githubApp")
	}
	if git && s.GitAuth != nil {
		reviewRef(&r, "spec.gitAuth.accessToken", s.GitAuth.AccessToken)
		if a := s.GitAuth.SSHAuth; a != nil {
			reviewRef(&r, "spec.gitAuth.sshAuth.sshPrivateKey", &a.SSHPrivateKey)
			reviewRef(&r, "spec.gitAuth.sshAuth.password", a.Password)
		}
		if a := s.GitAuth.BasicAuth; a != nil {
			reviewRef(&r, "spec.gitAuth.basicAuth.userName", &a.UserName)
			reviewRef(&r, "spec.gitAuth.basicAuth.password", &a.Password)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.EnvRefs)) {
		ref := s.EnvRefs[k]
		reviewRef(&r, fmt.Sprintf("spec.envRefs[%s]", k), &ref)
	}
	for _, k := range slices.Sorted(maps.Keys(s.SecretsRef)) {
		ref := s.SecretsRef[k]
		reviewRef(&r, fmt.Sprintf("spec.secretsRef[%s]", k), &ref)
	}
	for _, k := range slices.Sorted(maps.Keys(s.ConfigRef)) {
		if ref := s.ConfigRef[k]; ref.Name == "" || ref.Key == "" {
			problem("spec.configRef[%s] needs name and key", k)
		}
	}
	if f := s.FluxSource; f != nil && (f.SourceRef.APIVersion == "" || f.SourceRef.Kind == "" || f.SourceRef.Name == "") {
		problem("spec.fluxSource.sourceRef needs apiVersion, kind and name")
	}
	if s.ProgramRef != nil && s.ProgramRef.Name == "" {
		problem("spec.programRef.name is empty")
	}
	for i, pr := range s.Prerequisites {
		if pr.Name == "" {
			problem("spec.prerequisites[%d].name is empty", i)
		}
		if _, err := pr.SucceededWithin(); err != nil {
			problem("spec.prerequisites[%d].requirement.succeededWithinDuration: %v", i, err)
		}
	}
	if d := s.DriftDetection; d != nil {
		for i, sc := range d.Schedules {
			if _, err := sc.Parse(); err != nil {
				problem("spec.driftDetection.schedules[%d].cron: %v", i, err)
			}
		}
	}
	if s.ResyncFrequencySeconds < 0 {
		ignored("spec.resyncFrequencySeconds is negative and is ignored (the default applies)")
	}
	if s.RetryMaxBackoffDurationSeconds < 0 {
		ignored("spec.retryMaxBackoffDurationSeconds is negative and is ignored (the default applies)")
	}
	return r
}

// reviewRef checks one ResourceRef: a known type and the selector that type reads.
func reviewRef(r *SpecReview, field string, ref *ResourceRef) {
	if ref == nil {
		return
	}
	add := func(format string, args ...any) {
		r.Problems = append(r.Problems, field+": "+fmt.Sprintf(format, args...))
	}
	switch ref.Type {
	case ResourceSelectorEnv:
		if ref.Env == nil || ref.Env.Name == "" {
			add("type Env needs env.name")
		}
	case ResourceSelectorFS:
		if ref.FileSystem == nil || ref.FileSystem.Path == "" {
			add("type FS needs filesystem.path")
		}
	case ResourceSelectorSecret:
		if ref.Secret == nil || ref.Secret.Name == "" || ref.Secret.Key == "" {
			add("type Secret needs secret.name and secret.key")
		}
	case ResourceSelectorLiteral:
		if ref.Literal == nil {
			add("type Literal needs literal.value")
		}
	default:
		add("type %q is not one of %s (the match is case-sensitive)", ref.Type, joinTypes(resourceSelectorTypes))
	}
}

func joinTypes(ts []ResourceSelectorType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// sourceFields names the source fields spec sets, in PKO's order of precedence.
func (s *StackSpec) sourceFields() []string {
	var f []string
	if s.ProjectRepo != "" {
		f = append(f, "spec.projectRepo")
	}
	if s.FluxSource != nil {
		f = append(f, "spec.fluxSource")
	}
	if s.ProgramRef != nil {
		f = append(f, "spec.programRef")
	}
	return f
}

// SucceededWithin parses requirement.succeededWithinDuration; zero means no requirement.
// The field is a string on the wire (as metav1.Duration encodes), parsed here rather than
// by the JSON decoder, so a malformed value stalls one Stack instead of failing the decoding
// of every Stack list the manager's cache reads.
func (p *PrerequisiteRef) SucceededWithin() (time.Duration, error) {
	if p.Requirement == nil || p.Requirement.SucceededWithinDuration == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(p.Requirement.SucceededWithinDuration)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 30m or 1h", p.Requirement.SucceededWithinDuration)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", p.Requirement.SucceededWithinDuration)
	}
	return d, nil
}

// cronParser reads the standard five fields (minute, hour, day of month, month, day of
// week) and the @hourly-style descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse parses the schedule's cron expression.
func (d *DriftSchedule) Parse() (cron.Schedule, error) {
	sc, err := cronParser.Parse(d.Cron)
	if err != nil {
		return nil, fmt.Errorf("%q is not a five-field cron expression such as \"*/15 * * * *\": %w", d.Cron, err)
	}
	return sc, nil
}
