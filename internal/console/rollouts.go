package console

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/kubectlplugin"
)

// rolloutRow is a StackRollout in the list of rollouts.
type rolloutRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	Target    string `json:"target,omitempty"`
	Stable    string `json:"stable,omitempty"`
	// Wave is the current wave's name.
	Wave    string `json:"wave,omitempty"`
	Updated int32  `json:"updated"`
	Stacks  int32  `json:"stacks"`
	// Waiting says what the rollout waits for, or why it halted: the Halted or
	// Reconciling condition's reason and message.
	Waiting string `json:"waiting,omitempty"`
}

type rolloutsView struct {
	scope
	Rollouts []rolloutRow `json:"rollouts"`
}

// stackCard is a Stack of a wave.
type stackCard struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// Revision is the revision it last deployed; AtTarget whether that is the rollout's
	// target.
	Revision string `json:"revision,omitempty"`
	AtTarget bool   `json:"atTarget"`
	// Released: the wave lets it update to the target.
	Released bool   `json:"released"`
	HeldAt   string `json:"heldAt,omitempty"`
	Failed   bool   `json:"failed,omitempty"`
	Missing  bool   `json:"missing,omitempty"`
}

type waveView struct {
	Name      string       `json:"name"`
	State     string       `json:"state"`
	Current   bool         `json:"current"`
	Released  int32        `json:"released"`
	Updated   int32        `json:"updated"`
	ReadyTime *metav1.Time `json:"readyTime,omitempty"`
	GateJob   string       `json:"gateJob,omitempty"`
	Stacks    []stackCard  `json:"stacks"`
}

// rolloutView is the Rollout page: the waves as columns, their Stacks as cards, the gates
// between waves, and the requests that apply now.
type rolloutView struct {
	rolloutRow
	// Gates between waves: the bake time, the gate CronJob, and whether a person promotes.
	BakeTime     string      `json:"bakeTime,omitempty"`
	GateJobFrom  string      `json:"gateJobFrom,omitempty"`
	Approval     string      `json:"approval"`
	MaxParallel  string      `json:"maxParallel,omitempty"`
	Conditions   []condition `json:"conditions"`
	FailedStacks []string    `json:"failedStacks,omitempty"`
	Waves        []waveView  `json:"waves"`
	// Requests are the requests (promote, abort, pause, resume) that apply to the
	// rollout's state: its buttons.
	Requests []string `json:"requests"`
}

func newRolloutRow(r *v1alpha1.StackRollout) rolloutRow {
	st := &r.Status
	row := rolloutRow{Namespace: r.Namespace, Name: r.Name, Phase: string(st.Phase), Wave: st.WaveName,
		Updated: st.Updated, Stacks: st.Stacks}
	if row.Phase == "" {
		row.Phase = "Pending"
	}
	if st.Target != nil {
		row.Target = st.Target.Revision
	}
	if st.Stable != nil {
		row.Stable = st.Stable.Revision
	}
	for _, t := range []string{v1alpha1.ConditionHalted, v1alpha1.ConditionReconciling} {
		if c := apimeta.FindStatusCondition(st.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			row.Waiting = c.Reason + ": " + c.Message
			break
		}
	}
	return row
}

// newRolloutView is r with its waves' Stacks, from stacks (those of r's namespace).
func newRolloutView(r *v1alpha1.StackRollout, stacks []pulumiv1.Stack) rolloutView {
	v := rolloutView{rolloutRow: newRolloutRow(r), Approval: string(v1alpha1.RolloutApprovalAuto),
		Conditions:   conditions(r.Status.Conditions),
		FailedStacks: r.Status.FailedStacks, Waves: []waveView{}, Requests: kubectlplugin.RolloutRequestsFor(r)}
	if mp := r.Spec.MaxParallel; mp != nil {
		v.MaxParallel = mp.String()
	}
	if v.Requests == nil {
		v.Requests = []string{}
	}
	if r.Spec.BakeTime != nil {
		v.BakeTime = r.Spec.BakeTime.Duration.String()
	}
	if r.Spec.Gates.JobFrom != nil {
		v.GateJobFrom = r.Spec.Gates.JobFrom.Name
	}
	if r.Spec.Gates.Approval != "" {
		v.Approval = string(r.Spec.Gates.Approval)
	}
	byName := map[string]*pulumiv1.Stack{}
	for i := range stacks {
		byName[stacks[i].Name] = &stacks[i]
	}
	for i, w := range r.Status.Waves {
		wv := waveView{Name: w.Name, State: string(w.State), Current: i == int(r.Status.Wave), Released: w.Released,
			Updated: w.Updated, ReadyTime: w.ReadyTime, GateJob: w.GateJob, Stacks: []stackCard{}}
		for j, name := range w.Stacks {
			card := stackCard{Name: name, Released: j < int(w.Released), Failed: slices.Contains(r.Status.FailedStacks, name)}
			s, ok := byName[name]
			if !ok {
				card.Missing, card.State = true, "Gone"
				wv.Stacks = append(wv.Stacks, card)
				continue
			}
			row := newStackRow(s)
			card.State, card.Revision = row.State, row.Revision
			card.AtTarget = v.Target != "" && row.Revision == v.Target
			if sw := s.Status.Stackwright; sw != nil && sw.Rollout != nil {
				card.HeldAt = sw.Rollout.HeldAt
			}
			wv.Stacks = append(wv.Stacks, card)
		}
		v.Waves = append(v.Waves, wv)
	}
	return v
}

func (s *Server) rollouts(w http.ResponseWriter, r *http.Request) {
	list := &v1alpha1.StackRolloutList{}
	sc, err := s.list(r.Context(), list, "StackRollouts")
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	v := rolloutsView{scope: sc, Rollouts: make([]rolloutRow, 0, len(list.Items))}
	for i := range list.Items {
		v.Rollouts = append(v.Rollouts, newRolloutRow(&list.Items[i]))
	}
	slices.SortFunc(v.Rollouts, func(a, b rolloutRow) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) rollout(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	ro := &v1alpha1.StackRollout{}
	if err := s.env.Client.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, ro); err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("failed to get StackRollout %s/%s: %w", ns, name, err))
		return
	}
	stacks := &pulumiv1.StackList{}
	if err := s.env.Client.List(r.Context(), stacks, client.InNamespace(ns)); err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("failed to list the Stacks of StackRollout %s/%s: %w", ns, name, err))
		return
	}
	writeJSON(w, http.StatusOK, newRolloutView(ro, stacks.Items))
}
