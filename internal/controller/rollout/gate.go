package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Environment of a gate Job's containers.
const (
	EnvRollout  = "STACKWRIGHT_ROLLOUT"
	EnvWave     = "STACKWRIGHT_WAVE"
	EnvRevision = "STACKWRIGHT_REVISION"
	EnvStacks   = "STACKWRIGHT_STACKS"
	// EnvOutputs holds {"<stack>": {<output>: <value>}} for the wave's Stacks, from their
	// status (secret values masked).
	EnvOutputs = "STACKWRIGHT_OUTPUTS"
)

// maxOutputsEnv bounds the outputs put into a gate Job: a Job is an API object, and the
// API server refuses large ones. Beyond it the variable says the outputs were too large.
const maxOutputsEnv = 256 << 10

// gate runs the wave's gate Job (once per wave and target) and reports whether it passed,
// or why it failed.
func (r *Reconciler) gate(ctx context.Context, s *scope) (passed bool, failure string, err error) {
	ro, st := s.ro, &s.ro.Status
	w := &st.Waves[st.Wave]
	name := gateJobName(ro.Name, int(st.Wave), gateRun(st))
	w.GateJob = name
	j := &batchv1.Job{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: ro.Namespace, Name: name}, j)
	if apierrors.IsNotFound(err) {
		failure, err := r.startGate(ctx, s, name)
		return false, failure, err
	}
	if err != nil {
		return false, "", fmt.Errorf("failed to get gate Job %s: %w", name, err)
	}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, "", nil
		case batchv1.JobFailed:
			return false, fmt.Sprintf("gate Job %s failed (%s): %s", name, c.Reason, c.Message), nil
		}
	}
	return false, "", nil
}

// startGate creates the gate Job from the CronJob's template, as
// `kubectl create job --from=cronjob/<name>` does: the tenant wrote that Pod template
// (and may run it), the manager only starts it. failure says why no gate can start (the
// gate then fails: its caller halts the rollout).
func (r *Reconciler) startGate(ctx context.Context, s *scope, name string) (failure string, err error) {
	ro, st := s.ro, &s.ro.Status
	cj := &batchv1.CronJob{}
	ref := ro.Spec.Gates.JobFrom.Name
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ro.Namespace, Name: ref}, cj); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("CronJob %q (spec.gates.jobFrom) not found", ref), nil
		}
		return "", fmt.Errorf("failed to get CronJob %s: %w", ref, err)
	}
	// The manager may create Jobs where the rollout's author may not: only a CronJob
	// whose author (who could run its Pods anyway) marked it as a gate is started.
	if cj.Labels[v1alpha1.RolloutGateLabel] != "true" {
		return fmt.Sprintf("CronJob %q (spec.gates.jobFrom) is not labelled %s=true, which its author sets to let rollouts run it as a gate", ref, v1alpha1.RolloutGateLabel), nil
	}
	w := &st.Waves[st.Wave]
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ro.Namespace,
			Labels:      map[string]string{},
			Annotations: map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
		},
		Spec: *cj.Spec.JobTemplate.Spec.DeepCopy(),
	}
	for k, v := range cj.Spec.JobTemplate.Labels {
		j.Labels[k] = v
	}
	for k, v := range cj.Spec.JobTemplate.Annotations {
		j.Annotations[k] = v
	}
	// The manager's cache sees only Jobs it labels as its own; a runner is told apart by
	// its controller (an Update), which a gate Job never has.
	j.Labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedBy
	j.Labels[v1alpha1.RolloutLabel] = ro.Name
	env := []corev1.EnvVar{
		{Name: EnvRollout, Value: ro.Name},
		{Name: EnvWave, Value: w.Name},
		{Name: EnvRevision, Value: st.Target.Revision},
		{Name: EnvStacks, Value: strings.Join(w.Stacks, ",")},
		{Name: EnvOutputs, Value: waveOutputs(s, w)},
	}
	spec := &j.Spec.Template.Spec
	for i := range spec.Containers {
		spec.Containers[i].Env = append(spec.Containers[i].Env, env...)
	}
	if err := controllerutil.SetControllerReference(ro, j, r.Client.Scheme()); err != nil {
		return "", fmt.Errorf("failed to own gate Job %s: %w", name, err)
	}
	err = r.Client.Create(ctx, j, client.FieldOwner(FieldManager))
	switch {
	case apierrors.IsAlreadyExists(err):
		// An earlier reconcile, which the cache had not caught up with, started it and
		// announced it.
		return "", nil
	case err != nil:
		return "", fmt.Errorf("failed to create gate Job %s: %w", name, err)
	}
	s.event(corev1.EventTypeNormal, EventGateStarted, "gate Job %s started for wave %s (from CronJob %s)", name, w.Name, ref)
	return "", nil
}

// gateRun tells one run of a wave's gate from another: a resume after a failed gate runs
// it again, under a new name.
func gateRun(st *v1alpha1.StackRolloutStatus) string {
	if st.ResumeTime == nil {
		return st.Target.Revision
	}
	return st.Target.Revision + "@" + st.ResumeTime.UTC().Format(time.RFC3339)
}

// waveOutputs is the JSON of the wave's Stacks' outputs, as their status shows them.
func waveOutputs(s *scope, w *v1alpha1.RolloutWaveStatus) string {
	out := map[string]any{}
	for _, n := range w.Stacks {
		if st, ok := s.stacks[n]; ok && st.Status.Outputs != nil {
			out[n] = st.Status.Outputs
		}
	}
	b, err := json.Marshal(out)
	if err != nil || len(b) > maxOutputsEnv {
		return `{"error":"the wave's outputs exceed ` + strconv.Itoa(maxOutputsEnv) + ` bytes"}`
	}
	return string(b)
}

// gateJobName is unique per rollout, wave and target, and a valid Job name (the Job
// controller puts it in a label, so at most 63 characters).
func gateJobName(rollout string, wave int, revision string) string {
	sum := sha256.Sum256([]byte(revision))
	suffix := fmt.Sprintf("-gate-%d-%s", wave, hex.EncodeToString(sum[:])[:8])
	if len(rollout) > 63-len(suffix) {
		rollout = strings.TrimRight(rollout[:63-len(suffix)], "-.")
	}
	return rollout + suffix
}
