package kubectlplugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// rolloutCommand is `rollout`: the status of a StackRollout, and the requests a person
// makes of it (promote, abort, resume), each an annotation the controller acts on once
// per new value.
func rolloutCommand(connect func() (*Env, error)) *cobra.Command {
	rollout := &cobra.Command{
		Use:   "rollout",
		Short: "Show and steer StackRollouts: status, promote, abort, pause, resume",
	}
	var format string
	status := &cobra.Command{
		Use:   "status ROLLOUT",
		Short: "Show a StackRollout's phase, revisions, progress, conditions and waves",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			return env.rolloutStatus(cmd.Context(), args[0], format)
		},
	}
	status.Flags().StringVarP(&format, "output", "o", formatTable, "Output format: json or yaml (a table when unset)")
	request := func(use, short string, req rolloutRequest) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ROLLOUT",
			Short: short + " (sets " + req.annotation + ")",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				env, err := connect()
				if err != nil {
					return err
				}
				return env.requestRollout(cmd.Context(), args[0], req)
			},
		}
	}
	commands := []*cobra.Command{
		status,
		request(RolloutPromote, "Open the next wave of a rollout whose current wave awaits promotion", promoteRequest),
		request(RolloutAbort, "Abort a progressing or halted rollout: its open waves deploy the stable revision again", abortRequest),
		request(RolloutPause, "Pause a rollout: nothing new starts until it is resumed; running Updates finish", pauseRequest),
		request(RolloutResume, "Resume a paused or halted rollout: a halted one retries the Stacks that halted it, and the wave continues", resumeRequest),
	}
	for _, c := range commands {
		c.ValidArgsFunction = completeRollouts(connect)
	}
	rollout.AddCommand(commands...)
	return rollout
}

func completeRollouts(connect func() (*Env, error)) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return completeNames(connect, func(ctx context.Context, e *Env) ([]string, error) {
		list := &v1alpha1.StackRolloutList{}
		if err := e.Client.List(ctx, list, client.InNamespace(e.Namespace)); err != nil {
			return nil, err
		}
		var names []string
		for _, r := range list.Items {
			names = append(names, r.Name)
		}
		return names, nil
	})
}

func (e *Env) rolloutStatus(ctx context.Context, name, format string) error {
	r, err := e.rollout(ctx, name)
	if err != nil {
		return err
	}
	if format != formatTable {
		return e.print(format, r)
	}
	st := &r.Status
	field := func(label, value string) { fmt.Fprintf(e.Out, "%-13s%s\n", label+":", value) }
	field("Phase", phaseOf(r))
	field("Target", revisionOf(st.Target))
	field("Stable", revisionOf(st.Stable))
	wave := "-"
	if w := currentWave(r); w != nil {
		wave = fmt.Sprintf("%s (%d of %d)", w.Name, st.Wave+1, len(st.Waves))
	}
	field("Wave", wave)
	field("Updated", fmt.Sprintf("%d/%d", st.Updated, st.Stacks))
	switch {
	case r.Spec.Paused:
		field("Paused", "by spec.paused: set it false to resume")
	case st.PauseTime != nil:
		field("Paused", fmt.Sprintf("%s ago by %s: resume with `kubectl stackwright rollout resume %s`", e.age(*st.PauseTime), v1alpha1.RolloutPauseAnnotation, r.Name))
	}
	halted := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionHalted)
	if halted != nil && halted.Status == metav1.ConditionTrue {
		field("Halted", halted.Reason+": "+halted.Message)
	} else if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		// Stalled without a halt: nothing moves until a person fixes the spec or the
		// manager's flags (SpecInvalid, MixedSources, MetricGateURLNotAllowed).
		field("Stalled", c.Reason+": "+c.Message)
	}
	if len(st.FailedStacks) > 0 {
		field("Failed", strings.Join(st.FailedStacks, ", "))
	}
	if gate := e.gateOf(r); gate != "" {
		field("Gate", gate)
	}
	if limit := r.AutoAbortLimit(); limit > 0 {
		field("Auto abort", fmt.Sprintf("%d of %d in a row used", st.AutomaticAborts, limit))
	}
	if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReconciling); c != nil && c.Status == metav1.ConditionTrue {
		field("Waiting", c.Message)
	}
	fmt.Fprintln(e.Out)
	rows := make([][]string, 0, len(st.Waves))
	for _, w := range st.Waves {
		readyAt := "-"
		if w.ReadyTime != nil {
			readyAt = e.age(*w.ReadyTime) + " ago"
		}
		gateJob := w.GateJob
		if gateJob == "" {
			gateJob = "-"
		}
		rows = append(rows, []string{w.Name, string(w.State), fmt.Sprint(w.Released),
			fmt.Sprintf("%d/%d", w.Updated, len(w.Stacks)), fmt.Sprint(r.MaxParallelOf(w.Name, len(w.Stacks))),
			r.BakeTimeOf(w.Name).String(), readyAt, gateJob})
	}
	return e.table([]string{"NAME", "STATE", "RELEASED", "UPDATED/STACKS", "MAX-PARALLEL", "BAKE", "READY-AT", "GATE JOB"}, rows)
}

// previewRules lists the rules of a preview gate.
func previewRules(p *v1alpha1.RolloutPreviewGate) string {
	if p == nil {
		return "no gate any more: the wave is released next"
	}
	var rules []string
	if p.NoDeletes {
		rules = append(rules, "no deletes")
	}
	if p.NoReplaces {
		rules = append(rules, "no replaces")
	}
	if p.MaxChanges != nil {
		rules = append(rules, fmt.Sprintf("at most %d changes", *p.MaxChanges))
	}
	if len(rules) == 0 {
		return "policies only"
	}
	return strings.Join(rules, ", ")
}

// gateOf says which gate the current wave is at, and what it waits for, "" when it is at
// none.
func (e *Env) gateOf(r *v1alpha1.StackRollout) string {
	w := currentWave(r)
	if w == nil || r.Status.Target == nil {
		return ""
	}
	switch w.State {
	case v1alpha1.WavePreviewing:
		return fmt.Sprintf("preview of %s on wave %s (%s)", revisionOf(r.Status.Target), w.Name, previewRules(r.Spec.Gates.Preview))
	case v1alpha1.WaveBaking:
		gate := fmt.Sprintf("bake of wave %s (%s)", w.Name, r.BakeTimeOf(w.Name))
		for _, g := range r.Spec.Gates.Metrics {
			for _, m := range w.Metrics {
				if m.Name == g.Name && m.SampleTime != nil {
					gate += fmt.Sprintf("; metric %s (%s): %d success(es), %d failure(s) in a row, last sample %s ago: %s",
						g.Name, g.SuccessCondition, m.Successes, m.Failures, e.age(*m.SampleTime), m.Value)
				}
			}
		}
		return gate
	case v1alpha1.WaveGating:
		return fmt.Sprintf("Job %s of wave %s", w.GateJob, w.Name)
	case v1alpha1.WaveAwaitingPromotion:
		return fmt.Sprintf("promotion of wave %s: kubectl stackwright rollout promote %s", w.Name, r.Name)
	}
	return ""
}

// rolloutRequest is a request a person makes of a StackRollout: an annotation, set to a
// new value each time, and check, which returns what the request asks of r, or why it
// does not apply to r's state.
type rolloutRequest struct {
	annotation string
	check      func(r *v1alpha1.StackRollout) (string, error)
}

var (
	promoteRequest = rolloutRequest{annotation: v1alpha1.RolloutPromoteAnnotation, check: func(r *v1alpha1.StackRollout) (string, error) {
		w := currentWave(r)
		if w == nil || w.State != v1alpha1.WaveAwaitingPromotion {
			state := "no wave"
			if w != nil {
				state = fmt.Sprintf("wave %s is %s", w.Name, w.State)
			}
			return "", fmt.Errorf("rollout %s has no wave awaiting promotion (phase %s, %s)", r.Name, phaseOf(r), state)
		}
		return fmt.Sprintf("promotion of wave %q of rollout %s", w.Name, r.Name), nil
	}}
	abortRequest = rolloutRequest{annotation: v1alpha1.RolloutAbortAnnotation, check: func(r *v1alpha1.StackRollout) (string, error) {
		if p := r.Status.Phase; p != v1alpha1.RolloutProgressing && p != v1alpha1.RolloutHalted {
			return "", fmt.Errorf("rollout %s cannot be aborted (phase %s): only a Progressing or Halted rollout can", r.Name, phaseOf(r))
		}
		return fmt.Sprintf("abort of revision %s of rollout %s", revisionOf(r.Status.Target), r.Name), nil
	}}
	pauseRequest = rolloutRequest{annotation: v1alpha1.RolloutPauseAnnotation, check: func(r *v1alpha1.StackRollout) (string, error) {
		if r.Status.PauseTime != nil {
			return "", fmt.Errorf("rollout %s is paused already (since %s)", r.Name, r.Status.PauseTime.UTC().Format(time.RFC3339))
		}
		return fmt.Sprintf("pause of rollout %s (phase %s)", r.Name, phaseOf(r)), nil
	}}
	resumeRequest = rolloutRequest{annotation: v1alpha1.RolloutResumeAnnotation, check: func(r *v1alpha1.StackRollout) (string, error) {
		halted, paused := r.Status.Phase == v1alpha1.RolloutHalted, r.Status.PauseTime != nil
		if !halted && !paused {
			if r.Spec.Paused {
				return "", fmt.Errorf("rollout %s is paused by spec.paused, which a resume does not lift: set spec.paused to false (in the repository it is applied from)", r.Name)
			}
			return "", fmt.Errorf("rollout %s cannot be resumed (phase %s): only a paused or Halted rollout can", r.Name, phaseOf(r))
		}
		wave := "-"
		if w := currentWave(r); w != nil {
			wave = w.Name
		}
		var what []string
		if paused {
			what = append(what, "paused")
		}
		if halted {
			what = append(what, "halted")
		}
		return fmt.Sprintf("resume of rollout %s, %s at wave %q", r.Name, strings.Join(what, " and "), wave), nil
	}}
	rolloutRequests = map[string]rolloutRequest{RolloutPromote: promoteRequest, RolloutAbort: abortRequest, RolloutPause: pauseRequest, RolloutResume: resumeRequest}
)

// The requests a person makes of a StackRollout, by the name of their command.
const (
	RolloutPromote = "promote"
	RolloutAbort   = "abort"
	RolloutPause   = "pause"
	RolloutResume  = "resume"
)

// RequestRollout makes the request named (RolloutPromote, RolloutAbort, RolloutPause or
// RolloutResume)
// of the rollout, as its command does.
func (e *Env) RequestRollout(ctx context.Context, name, request string) error {
	req, ok := rolloutRequests[request]
	if !ok {
		return fmt.Errorf("unknown rollout request %q: want %s, %s, %s or %s", request, RolloutPromote, RolloutAbort, RolloutPause, RolloutResume)
	}
	return e.requestRollout(ctx, name, req)
}

// RolloutRequestsFor names the requests that apply to r's state, in the order promote,
// abort, pause, resume.
func RolloutRequestsFor(r *v1alpha1.StackRollout) []string {
	var names []string
	for _, name := range []string{RolloutPromote, RolloutAbort, RolloutPause, RolloutResume} {
		if _, err := rolloutRequests[name].check(r); err == nil {
			names = append(names, name)
		}
	}
	return names
}

// requestRollout sets req's annotation on the rollout to a new value, if req applies to
// the rollout's state. The patch names the resourceVersion checked, so that the check and
// the write see the same rollout: should the rollout change in between, it is read and
// checked again. The controller acts once per new value, and ignores (with an event) a
// request that no longer applies when it gets to it.
func (e *Env) requestRollout(ctx context.Context, name string, req rolloutRequest) error {
	value := e.Now().UTC().Format(time.RFC3339Nano)
	var what string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := e.rollout(ctx, name)
		if err != nil {
			return err
		}
		if what, err = req.check(r); err != nil {
			return err
		}
		patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"annotations":{%q:%q}}}`, r.ResourceVersion, req.annotation, value)
		if err := e.Client.Patch(ctx, r, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(fieldManager)); err != nil {
			// Wrapped, a conflict is still one to retry.
			return fmt.Errorf("failed to patch StackRollout %s/%s: %w", e.Namespace, name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.Out, "requested %s (%s=%s)\n", what, req.annotation, value)
	return err
}

func (e *Env) rollout(ctx context.Context, name string) (*v1alpha1.StackRollout, error) {
	r := &v1alpha1.StackRollout{}
	if err := e.Client.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: name}, r); err != nil {
		return nil, fmt.Errorf("failed to get StackRollout %s/%s: %w", e.Namespace, name, err)
	}
	return r, nil
}

// currentWave is status.waves[status.wave], or nil while the rollout has none.
func currentWave(r *v1alpha1.StackRollout) *v1alpha1.RolloutWaveStatus {
	if i := int(r.Status.Wave); i >= 0 && i < len(r.Status.Waves) {
		return &r.Status.Waves[i]
	}
	return nil
}

// phaseOf is the rollout's phase, "none" before the controller wrote one.
func phaseOf(r *v1alpha1.StackRollout) string {
	if r.Status.Phase == "" {
		return "none"
	}
	return string(r.Status.Phase)
}

func revisionOf(rev *v1alpha1.RolloutRevision) string {
	if rev == nil {
		return "-"
	}
	return short(rev.Revision)
}
