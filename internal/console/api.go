package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/kubectlplugin"
)

// maxPodLog bounds the runner log read from a Pod: the end of a long run is what explains
// it, and a browser renders a few hundred kilobytes without trouble.
const maxPodLog = 256 << 10

// maxBody bounds a POST's body: it only ever names a preview.
const maxBody = 4 << 10

// apiError is what the API answers when something fails: the message, verbatim from the
// API server when it said no (Forbidden, NotFound, ...), and its reason.
type apiError struct {
	Error  string `json:"error"`
	Reason string `json:"reason,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the connection is all that can fail
}

// writeError answers err with the API server's status code and reason when it comes from
// the API server, else with code.
func writeError(w http.ResponseWriter, code int, err error) {
	var st apierrors.APIStatus
	reason := ""
	if errors.As(err, &st) {
		code, reason = int(st.Status().Code), string(st.Status().Reason)
	}
	writeJSON(w, code, apiError{Error: err.Error(), Reason: reason})
}

// envIn is the person's Env in namespace, writing what a command prints to out.
func (s *Server) envIn(namespace string, out io.Writer) *kubectlplugin.Env {
	e := *s.env
	e.Namespace, e.Out = namespace, out
	return &e
}

// list lists what the person may see: every namespace, or the kubeconfig's namespace when
// listing across namespaces is forbidden.
func (s *Server) list(ctx context.Context, list client.ObjectList, what string) (scope, error) {
	all := s.env.Client.List(ctx, list)
	switch {
	case all == nil:
		return scope{}, nil
	case !apierrors.IsForbidden(all) || s.env.Namespace == "":
		return scope{}, fmt.Errorf("failed to list %s: %w", what, all)
	}
	ns := s.env.Namespace
	if err := s.env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return scope{}, fmt.Errorf("failed to list %s in namespace %s: %w", what, ns, err)
	}
	return scope{Namespace: ns, Notice: fmt.Sprintf("Showing namespace %s only: %v", ns, all)}, nil
}

func (s *Server) fleet(w http.ResponseWriter, r *http.Request) {
	stacks := &pulumiv1.StackList{}
	sc, err := s.list(r.Context(), stacks, "Stacks")
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, newFleet(sc, stacks.Items))
}

func (s *Server) getStack(ctx context.Context, namespace, name string) (*pulumiv1.Stack, error) {
	st := &pulumiv1.Stack{}
	if err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, st); err != nil {
		return nil, fmt.Errorf("failed to get Stack %s/%s: %w", namespace, name, err)
	}
	return st, nil
}

func (s *Server) getUpdate(ctx context.Context, namespace, name string) (*v1alpha1.Update, error) {
	u := &v1alpha1.Update{}
	if err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		return nil, fmt.Errorf("failed to get Update %s/%s: %w", namespace, name, err)
	}
	return u, nil
}

func (s *Server) stack(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	st, err := s.getStack(r.Context(), ns, name)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	updates := &v1alpha1.UpdateList{}
	err = s.env.Client.List(r.Context(), updates, client.InNamespace(ns), client.MatchingLabels{v1alpha1.StackLabel: name})
	v := newStackView(st, updates.Items)
	if err != nil {
		// The Stack is still worth showing to someone who may not list its Updates.
		v.UpdatesError = fmt.Sprintf("failed to list the Updates of Stack %s/%s: %v", ns, name, err)
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	u, err := s.getUpdate(r.Context(), r.PathValue("namespace"), r.PathValue("name"))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	v := updateView{Namespace: u.Namespace, Stack: u.Spec.StackName, updateRow: newUpdateRow(u)}
	v.Log, v.LogSource, v.LogNote = s.runnerLog(r.Context(), u)
	writeJSON(w, http.StatusOK, v)
}

// runnerLog is the output of u's runner: its Pod's log, through the API server, while the
// Pod exists; the log tail the runner recorded in u's status once it is gone, or when the
// Update ran in the manager's process. note says why a Pod's log was not read.
func (s *Server) runnerLog(ctx context.Context, u *v1alpha1.Update) (text, source, note string) {
	tail := func() (string, string, string) {
		return u.Status.LogTail, "the Update's log tail (status.logTail)", note
	}
	ns, job, ok := kubectlplugin.RunnerJob(u)
	if !ok {
		return tail()
	}
	pods := &corev1.PodList{}
	if err := s.env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: job}); err != nil {
		note = fmt.Sprintf("failed to list the Pods of runner Job %s/%s: %v", ns, job, err)
		return tail()
	}
	if len(pods.Items) == 0 {
		return tail()
	}
	// The newest Pod is the one running, or the last that ran.
	p := slices.MaxFunc(pods.Items, func(a, b corev1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	limit := int64(maxPodLog)
	opts := &corev1.PodLogOptions{LimitBytes: &limit}
	if len(p.Spec.Containers) > 0 {
		opts.Container = p.Spec.Containers[0].Name
	}
	b, err := s.pods.Pods(ns).GetLogs(p.Name, opts).DoRaw(ctx)
	if err != nil {
		note = fmt.Sprintf("failed to read the log of runner Pod %s/%s: %v", ns, p.Name, err)
		return tail()
	}
	return string(b), fmt.Sprintf("runner Pod %s/%s", ns, p.Name), ""
}

func (s *Server) plan(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	st, err := s.getStack(r.Context(), ns, name)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	var a *pulumiv1.ApprovalStatus
	if st.Status.Stackwright != nil {
		a = st.Status.Stackwright.Approval
	}
	if a == nil {
		writeError(w, http.StatusNotFound, fmt.Errorf("no change of Stack %s/%s was previewed: it has neither approval: Manual nor a policy selecting it, or no change came since", ns, name))
		return
	}
	p, err := s.getUpdate(r.Context(), ns, a.Preview)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, newPlanView(st, a, p))
}

// decision is the body of an approve or reject: the preview the person reviewed.
type decision struct {
	Preview string `json:"preview"`
}

// result is what a request that changed something answers: what the command would print.
type result struct {
	Message string `json:"message"`
}

// decisions are the decisions by the last part of their path.
var decisions = map[string]kubectlplugin.Decision{"approve": kubectlplugin.Approve, "reject": kubectlplugin.Reject}

func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	what, ok := decisions[r.PathValue("decision")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	var body decision
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&body); err != nil || body.Preview == "" {
		writeError(w, http.StatusBadRequest, errors.New("the request must name the preview reviewed: {\"preview\": \"<update>\"}"))
		return
	}
	var out bytes.Buffer
	if err := s.envIn(r.PathValue("namespace"), &out).Decide(r.Context(), r.PathValue("name"), what, body.Preview); err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	writeJSON(w, http.StatusOK, result{Message: strings.TrimSpace(out.String())})
}

func (s *Server) requestRollout(w http.ResponseWriter, r *http.Request) {
	var out bytes.Buffer
	if err := s.envIn(r.PathValue("namespace"), &out).RequestRollout(r.Context(), r.PathValue("name"), r.PathValue("request")); err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	writeJSON(w, http.StatusOK, result{Message: strings.TrimSpace(out.String())})
}
