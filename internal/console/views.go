package console

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/kubectlplugin"
)

// secretOutput is how the Stack controller writes a secret output's value into
// status.outputs.
const secretOutput = `"[secret]"`

// maxUpdates bounds a Stack's timeline: the oldest Updates matter least, and the history
// controller prunes them anyway.
const maxUpdates = 50

// The views are what the API serves: built field by field from the objects, so that
// nothing the console does not mean to show (a spec's clear-text secrets, a config value)
// can reach the page.

// stackRow is a Stack in the fleet.
type stackRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// State is one word: Ready, Reconciling, Stalled, Suspended or Unknown.
	State string `json:"state"`
	// Reason and Message are those of the condition that explains State.
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	Drift    bool   `json:"drift,omitempty"`
	Revision string `json:"revision,omitempty"`
	// LastUpdate is "up succeeded", LastUpdateTime when it ended.
	LastUpdate     string       `json:"lastUpdate,omitempty"`
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
	ExpiresAt      *metav1.Time `json:"expiresAt,omitempty"`
	Rollout        string       `json:"rollout,omitempty"`
	// Approval is the approval state of the current change, when there is one.
	Approval string `json:"approval,omitempty"`
}

// fleetView is the fleet page.
type fleetView struct {
	scope
	// Counts are the Stacks by State.
	Counts map[string]int `json:"counts"`
	Stacks []stackRow     `json:"stacks"`
}

// scope is where a list was made: every namespace, or the kubeconfig's namespace when the
// person may not list across namespaces (Notice then says so, with the API's words).
type scope struct {
	Namespace string `json:"namespace,omitempty"`
	Notice    string `json:"notice,omitempty"`
}

type field struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

type condition struct {
	Type               string       `json:"type"`
	Status             string       `json:"status"`
	Reason             string       `json:"reason,omitempty"`
	Message            string       `json:"message,omitempty"`
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

type output struct {
	Name string `json:"name"`
	// Value is the output as JSON; empty for a secret one.
	Value  string `json:"value,omitempty"`
	Secret bool   `json:"secret,omitempty"`
}

// updateRow is an Update in a Stack's timeline.
type updateRow struct {
	Name      string           `json:"name"`
	Type      string           `json:"type"`
	Phase     string           `json:"phase,omitempty"`
	Result    string           `json:"result,omitempty"`
	Revision  string           `json:"revision,omitempty"`
	Created   metav1.Time      `json:"created"`
	Started   *metav1.Time     `json:"started,omitempty"`
	Ended     *metav1.Time     `json:"ended,omitempty"`
	Duration  string           `json:"duration,omitempty"`
	Message   string           `json:"message,omitempty"`
	Changes   map[string]int64 `json:"changes,omitempty"`
	Runner    string           `json:"runner,omitempty"`
	Plan      string           `json:"plan,omitempty"`
	Permalink string           `json:"permalink,omitempty"`
}

// approvalView is where the current change stands in its preview and approval.
type approvalView struct {
	State      string                     `json:"state"`
	Preview    string                     `json:"preview"`
	Revision   string                     `json:"revision,omitempty"`
	Summary    string                     `json:"summary,omitempty"`
	Message    string                     `json:"message,omitempty"`
	Violations []pulumiv1.PolicyViolation `json:"violations,omitempty"`
}

// stackView is the Stack page.
type stackView struct {
	stackRow
	Spec       []field       `json:"spec"`
	Conditions []condition   `json:"conditions"`
	Outputs    []output      `json:"outputs"`
	Approval   *approvalView `json:"approval,omitempty"`
	Current    string        `json:"current,omitempty"`
	HeldAt     string        `json:"heldAt,omitempty"`
	Updates    []updateRow   `json:"updates"`
	// UpdatesError is why the Updates could not be listed (the API's words).
	UpdatesError string `json:"updatesError,omitempty"`
}

// updateView is the Update page: the Update and its runner's output.
type updateView struct {
	Namespace string `json:"namespace"`
	Stack     string `json:"stack"`
	updateRow
	// Log is the runner Pod's log while the Pod exists, else the Update's log tail;
	// LogSource says which, LogNote why the Pod's could not be read.
	Log       string `json:"log"`
	LogSource string `json:"logSource"`
	LogNote   string `json:"logNote,omitempty"`
}

// planStep is one resource operation of a preview.
type planStep struct {
	Op        string   `json:"op"`
	URN       string   `json:"urn"`
	Name      string   `json:"name"`
	Type      string   `json:"type,omitempty"`
	Changed   []string `json:"changed,omitempty"`
	Replacing []string `json:"replacing,omitempty"`
}

// planGroup is the steps of one operation.
type planGroup struct {
	Op    string     `json:"op"`
	Steps []planStep `json:"steps"`
}

// planView is the Plan page: the change awaiting (or past) approval, its steps by
// operation, and what the policies said.
type planView struct {
	Namespace    string                  `json:"namespace"`
	Stack        string                  `json:"stack"`
	Approval     approvalView            `json:"approval"`
	Groups       []planGroup             `json:"groups"`
	StepsOmitted int32                   `json:"stepsOmitted,omitempty"`
	Changes      map[string]int64        `json:"changes,omitempty"`
	Policy       *v1alpha1.PolicyResults `json:"policy,omitempty"`
	// Decidable: the change awaits a decision, so Approve and Reject apply.
	Decidable bool `json:"decidable"`
}

// opOrder is the order of a plan's groups: what is added, what changes in place, what is
// replaced, what goes, then anything else (import, read, ...).
var opOrder = []string{"create", "update", "replace", "create-replacement", "delete-replaced", "delete"}

// newStackRow is s as a fleet row.
func newStackRow(s *pulumiv1.Stack) stackRow {
	state, _, _ := strings.Cut(kubectlplugin.State(s), " ")
	row := stackRow{
		Namespace: s.Namespace, Name: s.Name, State: state,
		Drift: apimeta.IsStatusConditionTrue(s.Status.Conditions, pulumiv1.ConditionDriftDetected),
	}
	// The condition that explains the state; Ready's for a Stack Ready, suspended or not
	// yet judged.
	explaining := pulumiv1.ConditionReady
	switch state {
	case "Stalled":
		explaining = pulumiv1.ConditionStalled
	case "Reconciling":
		explaining = pulumiv1.ConditionReconciling
	}
	if c := apimeta.FindStatusCondition(s.Status.Conditions, explaining); c != nil {
		row.Reason, row.Message = c.Reason, c.Message
	}
	if lu := s.Status.LastUpdate; lu != nil {
		row.Revision = lu.LastSuccessfulCommit
		row.LastUpdate = strings.TrimSpace(lu.Type + " " + string(lu.State))
		row.LastUpdateTime = lu.LastResyncTime
	}
	if sw := s.Status.Stackwright; sw != nil {
		row.ExpiresAt = sw.ExpiresAt
		if sw.Rollout != nil {
			row.Rollout = sw.Rollout.Name
		}
		if sw.Approval != nil {
			row.Approval = string(sw.Approval.State)
		}
	}
	return row
}

// newFleet is the fleet of stacks, sorted by namespace and name.
func newFleet(sc scope, stacks []pulumiv1.Stack) fleetView {
	v := fleetView{scope: sc, Counts: map[string]int{}, Stacks: make([]stackRow, 0, len(stacks))}
	for i := range stacks {
		row := newStackRow(&stacks[i])
		v.Counts[row.State]++
		v.Stacks = append(v.Stacks, row)
	}
	slices.SortFunc(v.Stacks, func(a, b stackRow) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return v
}

// newStackView is the Stack page of s with its Updates, newest first.
func newStackView(s *pulumiv1.Stack, updates []v1alpha1.Update) stackView {
	v := stackView{stackRow: newStackRow(s), Spec: specSummary(s), Conditions: conditions(s.Status.Conditions),
		Outputs: outputs(s.Status.Outputs), Updates: []updateRow{}}
	if cu := s.Status.CurrentUpdate; cu != nil {
		v.Current = cu.Name
	}
	if sw := s.Status.Stackwright; sw != nil {
		if sw.Approval != nil {
			a := newApprovalView(sw.Approval)
			v.Approval = &a
		}
		if sw.Rollout != nil {
			v.HeldAt = sw.Rollout.HeldAt
		}
	}
	slices.SortFunc(updates, func(a, b v1alpha1.Update) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(b.Name, a.Name)
	})
	for i := range updates[:min(len(updates), maxUpdates)] {
		v.Updates = append(v.Updates, newUpdateRow(&updates[i]))
	}
	return v
}

// specSummary is what a person reads of a Stack's spec to know what it deploys and how:
// never config or secret values, nor credentials in a repository's address.
func specSummary(s *pulumiv1.Stack) []field {
	sp := &s.Spec
	f := []field{{"Stack", sp.Stack}}
	switch {
	case sp.ProgramRef != nil:
		f = append(f, field{"Source", "Program " + sp.ProgramRef.Name})
	case sp.FluxSource != nil:
		f = append(f, field{"Source", sp.FluxSource.SourceRef.Kind + " " + sp.FluxSource.SourceRef.Name + dirSuffix(sp.FluxSource.Dir)})
	case sp.ProjectRepo != "":
		ref := sp.Branch
		if sp.Commit != "" {
			ref = sp.Commit
		}
		f = append(f, field{"Source", withoutUserinfo(sp.ProjectRepo) + "@" + ref + dirSuffix(sp.RepoDir)})
	}
	approval, suspended, ttl := string(pulumiv1.ApprovalAuto), "no", "none"
	if sw := sp.Stackwright; sw != nil {
		if sw.Approval != "" {
			approval = string(sw.Approval)
		}
		if sw.Suspend {
			suspended = "yes"
		}
		if sw.TTL != nil {
			ttl = sw.TTL.After.Duration.String()
		}
	}
	f = append(f, field{"Approval", approval}, field{"Suspended", suspended}, field{"TTL", ttl},
		field{"Destroy on delete", yesNo(sp.DestroyOnFinalize)}, field{"Refresh", yesNo(sp.Refresh)})
	if sp.ServiceAccountName != "" {
		f = append(f, field{"Service account", sp.ServiceAccountName})
	}
	if d := sp.DriftDetection; d != nil && len(d.Schedules) > 0 {
		var crons []string
		for _, sc := range d.Schedules {
			crons = append(crons, sc.Cron)
		}
		f = append(f, field{"Drift checks", strings.Join(crons, ", ")})
	}
	return f
}

func dirSuffix(dir string) string {
	if dir == "" {
		return ""
	}
	return " (" + dir + ")"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// withoutUserinfo drops the user and password a repository's address may carry.
func withoutUserinfo(repo string) string {
	u, err := url.Parse(repo)
	if err != nil || u.User == nil {
		return repo
	}
	u.User = nil
	return u.String()
}

func conditions(cs []metav1.Condition) []condition {
	out := make([]condition, 0, len(cs))
	for _, c := range cs {
		out = append(out, condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			LastTransitionTime: &c.LastTransitionTime})
	}
	return out
}

// outputs are status.outputs, sorted, with secret values left out.
func outputs(in map[string]apiextensionsv1.JSON) []output {
	out := make([]output, 0, len(in))
	for k, v := range in {
		if string(v.Raw) == secretOutput {
			out = append(out, output{Name: k, Secret: true})
			continue
		}
		var b bytes.Buffer
		if err := json.Compact(&b, v.Raw); err != nil {
			b.Reset()
			b.Write(v.Raw)
		}
		out = append(out, output{Name: k, Value: b.String()})
	}
	slices.SortFunc(out, func(a, b output) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func newUpdateRow(u *v1alpha1.Update) updateRow {
	row := updateRow{
		Name: u.Name, Type: string(u.Spec.Type), Phase: string(u.Status.Phase), Result: string(u.Status.Result),
		Revision: u.Spec.Revision, Created: u.CreationTimestamp, Started: u.Status.StartTime, Ended: u.Status.EndTime,
		Message: u.Status.Message, Changes: u.Status.Changes, Runner: u.Status.Runner, Permalink: u.Status.Permalink,
	}
	if u.Spec.Options != nil {
		row.Plan = u.Spec.Options.Plan
	}
	if u.Status.StartTime != nil && u.Status.EndTime != nil {
		row.Duration = u.Status.EndTime.Sub(u.Status.StartTime.Time).Round(time.Second).String()
	}
	return row
}

func newApprovalView(a *pulumiv1.ApprovalStatus) approvalView {
	return approvalView{State: string(a.State), Preview: a.Preview, Revision: a.Revision, Summary: a.Summary,
		Message: a.Message, Violations: a.Violations}
}

// newPlanView is the plan of preview p, the change a awaits a decision on.
func newPlanView(s *pulumiv1.Stack, a *pulumiv1.ApprovalStatus, p *v1alpha1.Update) planView {
	v := planView{Namespace: s.Namespace, Stack: s.Name, Approval: newApprovalView(a), Groups: []planGroup{},
		StepsOmitted: p.Status.StepsOmitted, Changes: p.Status.Changes, Policy: p.Status.Policy,
		Decidable: a.State == pulumiv1.ApprovalAwaiting}
	byOp := map[string][]planStep{}
	for _, st := range p.Status.Steps {
		byOp[st.Op] = append(byOp[st.Op], planStep{Op: st.Op, URN: st.URN, Name: urnName(st.URN), Type: st.Type,
			Changed: st.Changed, Replacing: st.Replacing})
	}
	ops := slices.Sorted(maps.Keys(byOp))
	slices.SortStableFunc(ops, func(a, b string) int { return rank(a) - rank(b) })
	for _, op := range ops {
		steps := byOp[op]
		slices.SortFunc(steps, func(a, b planStep) int { return strings.Compare(a.URN, b.URN) })
		v.Groups = append(v.Groups, planGroup{Op: op, Steps: steps})
	}
	return v
}

// rank is op's place in opOrder; the others after, as they come.
func rank(op string) int {
	if i := slices.Index(opOrder, op); i >= 0 {
		return i
	}
	return len(opOrder)
}

// urnName is the resource's name, the URN's last part
// (urn:pulumi:<stack>::<project>::<type>::<name>).
func urnName(urn string) string {
	if i := strings.LastIndex(urn, "::"); i >= 0 {
		return urn[i+2:]
	}
	return urn
}
