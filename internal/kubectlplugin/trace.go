package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/clip"
)

// TraceNode is one object of `trace`'s tree, and what `trace -o json|yaml` prints: the
// target, with what it leads to nested in Children.
type TraceNode struct {
	// Kind and APIVersion are the object's; Name is empty on a node that stands for
	// objects that could not be listed, or for a Stack that an instance does not have.
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
	// Role is why an Update is under its Stack: "current" (status.currentUpdate) or
	// "last" (status.lastUpdate).
	Role string `json:"role,omitempty"`
	// Status is one word: a Stack's state as `get` has it (Ready, Reconciling, Stalled,
	// Suspended, ...); an instance's Ready, Reconciling, Stalled or NotReady; an Update's
	// phase; a one-off request's Pending, Progressing, Succeeded or Failed; a Job's
	// Pending, Running, Complete, Failed or Suspended; a Pod's phase, or Terminating.
	// Gone: the object does not exist. The API's reason (Forbidden, ...): it could not be
	// read, and Error says why.
	Status string `json:"status,omitempty"`
	// Reason and Message explain Status: a condition's, an Update's, or a container's
	// state (OOMKilled, CrashLoopBackOff, ...). Message is whole here; the table cuts it.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Error is the API's error when the object could not be read.
	Error             string       `json:"error,omitempty"`
	CreationTimestamp *metav1.Time `json:"creationTimestamp,omitempty"`
	// Suspended is set on a suspended Stack.
	Suspended bool `json:"suspended,omitempty"`
	// Conditions are a Stack's, an instance's, an Update's or a one-off request's.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Type, Result and Runner are an Update's (Type a one-off request's too).
	Type   string `json:"type,omitempty"`
	Result string `json:"result,omitempty"`
	Runner string `json:"runner,omitempty"`
	// Active, Succeeded and Failed count a Job's Pods.
	Active    *int32 `json:"active,omitempty"`
	Succeeded *int32 `json:"succeeded,omitempty"`
	Failed    *int32 `json:"failed,omitempty"`
	// Restarts adds up the restarts of a Pod's containers.
	Restarts *int32      `json:"restarts,omitempty"`
	Children []TraceNode `json:"children,omitempty"`
}

// statusGone is the Status of an object that does not exist.
const statusGone = "Gone"

// traceMessageWidth keeps a row of the tree on one line of a wide terminal.
const traceMessageWidth = 60

var (
	stackGVK   = pulumiv1.GroupVersion.WithKind("Stack")
	updateGVK  = v1alpha1.GroupVersion.WithKind("Update")
	requestGVK = autov1alpha1.GroupVersion.WithKind("Update")
	jobGVK     = batchv1.SchemeGroupVersion.WithKind("Job")
	podGVK     = corev1.SchemeGroupVersion.WithKind("Pod")
	crdGVK     = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
)

// traceAliases are the names of Stackwright's kinds that the plugin resolves itself: the
// short names, which the REST mapper does not know, and a bare "update", which kubectl
// takes to be auto.pulumi.com's once both CRDs are installed, while the plugin's UPDATE
// (logs, history) is Stackwright's.
var traceAliases = map[string]schema.GroupVersionKind{
	"stack": stackGVK, "stacks": stackGVK, "stk": stackGVK,
	"update": updateGVK, "updates": updateGVK, "upd": updateGVK,
}

func traceCommand(connect func() (*Env, error), format *string) *cobra.Command {
	return &cobra.Command{
		Use:   "trace TYPE/NAME",
		Short: "Show the tree from an instance or Stack down to its Updates' runner Pods, with each one's status and last error",
		Long: "Shows in one tree what an object leads to, with each one's status, reason and last error:\n" +
			"a template instance (any kind a StackTemplate defines), its Stacks in the template's platform\n" +
			"namespace, their current and last Updates, and the runner Job and Pods of each. TYPE is stack,\n" +
			"update (Stackwright's), updates.auto.pulumi.com (a one-off request), or an instance's kind\n" +
			"(plural, singular or kind, optionally .group); TYPE NAME works too. An object that is gone,\n" +
			"or that you may not read, shows as such in the tree.",
		Example: "  kubectl stackwright trace stack/web\n  kubectl stackwright trace buckets.platform.example.com/data -o json",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			typ, name, err := splitTarget(args)
			if err != nil {
				return err
			}
			env, err := connect()
			if err != nil {
				return err
			}
			return env.trace(cmd.Context(), typ, name, *format)
		},
		ValidArgsFunction: completeTargets(connect),
	}
}

// splitTarget reads TYPE/NAME, or TYPE NAME as kubectl takes them.
func splitTarget(args []string) (string, string, error) {
	if len(args) == 2 {
		return args[0], args[1], nil
	}
	typ, name, ok := strings.Cut(args[0], "/")
	if !ok || typ == "" || name == "" {
		return "", "", fmt.Errorf("want TYPE/NAME (stack/web, update/web-0a1b2c3d4e-1, or an instance's kind: buckets/data), got %q", args[0])
	}
	return typ, name, nil
}

// completeTargets completes TYPE/ with Stackwright's kinds and, when the user may list
// StackTemplates, their instances' kinds; and TYPE/NAME with the names of the objects of
// that kind in the namespace.
func completeTargets(connect func() (*Env, error)) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		env, err := connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx := cmd.Context()
		typ, _, found := strings.Cut(toComplete, "/")
		if !found {
			kinds := []string{"stack/", "update/"}
			templates := &v1alpha1.StackTemplateList{}
			if err := env.Client.List(ctx, templates); err == nil {
				for _, t := range templates.Items {
					kinds = append(kinds, strings.ToLower(t.Spec.API.Kind)+"/")
				}
			}
			return kinds, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
		}
		gvk, _, err := env.resolveKind(typ)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := env.Client.List(ctx, list, client.InNamespace(env.Namespace)); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []string
		for _, o := range list.Items {
			names = append(names, typ+"/"+o.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// resolveKind returns the kind TYPE names, and its resource (plural) when the REST mapper
// resolved it: Stackwright's aliases first, then TYPE as resource.version.group,
// resource.group or resource, plural or singular (a kind's lower case is its singular).
func (e *Env) resolveKind(typ string) (schema.GroupVersionKind, string, error) {
	lower := strings.ToLower(typ)
	if gvk, ok := traceAliases[lower]; ok {
		return gvk, "", nil
	}
	mapper := e.Client.RESTMapper()
	full, gr := schema.ParseResourceArg(lower)
	var gvr schema.GroupVersionResource
	var err error
	if full != nil {
		gvr, err = mapper.ResourceFor(*full)
	}
	if full == nil || err != nil {
		if gvr, err = mapper.ResourceFor(gr.WithVersion("")); err != nil {
			return schema.GroupVersionKind{}, "", fmt.Errorf("failed to resolve kind %q: %w", typ, err)
		}
	}
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return schema.GroupVersionKind{}, "", fmt.Errorf("failed to resolve kind %q: %w", typ, err)
	}
	return gvk, gvr.Resource, nil
}

func (e *Env) trace(ctx context.Context, typ, name, format string) error {
	if format != formatTable && format != formatJSON && format != formatYAML {
		return fmt.Errorf("unknown output format %q: want json or yaml", format)
	}
	gvk, resource, err := e.resolveKind(typ)
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: e.Namespace, Name: name}
	var root TraceNode
	switch gvk.GroupKind() {
	case stackGVK.GroupKind():
		s := &pulumiv1.Stack{}
		if err := e.Client.Get(ctx, key, s); err != nil {
			return fmt.Errorf("failed to get Stack %s: %w", key, err)
		}
		root = e.traceStack(ctx, s)
	case updateGVK.GroupKind():
		u := &v1alpha1.Update{}
		if err := e.Client.Get(ctx, key, u); err != nil {
			return fmt.Errorf("failed to get Update %s: %w", key, err)
		}
		root = e.traceUpdate(ctx, u, "")
	case requestGVK.GroupKind():
		r := &autov1alpha1.Update{}
		if err := e.Client.Get(ctx, key, r); err != nil {
			return fmt.Errorf("failed to get auto.pulumi.com Update %s: %w", key, err)
		}
		root = e.traceRequest(ctx, r)
	default:
		if root, err = e.traceInstance(ctx, gvk, resource, name); err != nil {
			return err
		}
	}
	if format != formatTable {
		return e.print(format, root)
	}
	return e.printTree(root)
}

// traceInstance traces an object of a kind a StackTemplate defines: the Stacks of the
// template's platform namespace labelled with the template and the instance's UID. A
// tenant commonly may read neither the kind's CustomResourceDefinition, the template nor
// the platform namespace: what could not be read is a node of the tree.
func (e *Env) traceInstance(ctx context.Context, gvk schema.GroupVersionKind, resource, name string) (TraceNode, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	display := gvk.GroupKind().String()
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, obj); err != nil {
		return TraceNode{}, fmt.Errorf("failed to get %s %s/%s: %w", display, e.Namespace, name, err)
	}
	root := instanceNode(obj)
	t, missing, err := e.templateOf(ctx, gvk, resource)
	switch {
	case err != nil:
		return TraceNode{}, fmt.Errorf("%s %s/%s is not an instance of a StackTemplate: %w", display, e.Namespace, name, err)
	case missing != nil:
		root.Children = []TraceNode{*missing}
		return root, nil
	}
	stacks := &pulumiv1.StackList{}
	if err := e.Client.List(ctx, stacks, client.InNamespace(t.Spec.Namespace),
		client.MatchingLabels{v1alpha1.TemplateLabel: t.Name, v1alpha1.InstanceUIDLabel: string(obj.GetUID())}); err != nil {
		root.Children = []TraceNode{unreadable(stackGVK, t.Spec.Namespace, "", err)}
		return root, nil
	}
	if len(stacks.Items) == 0 {
		gone := node(stackGVK, t.Spec.Namespace, "")
		gone.Status = statusGone
		gone.Message = fmt.Sprintf("StackTemplate %s has made no Stack of the instance", t.Name)
		root.Children = []TraceNode{gone}
		return root, nil
	}
	slices.SortFunc(stacks.Items, func(a, b pulumiv1.Stack) int { return strings.Compare(a.Name, b.Name) })
	for i := range stacks.Items {
		root.Children = append(root.Children, e.traceStack(ctx, &stacks.Items[i]))
	}
	return root, nil
}

// templateOf finds the StackTemplate that defines gvk: the one its
// CustomResourceDefinition's label names or, should the user not be allowed to read the
// definition, the one whose spec.api names the kind. It returns a node instead when the
// template could not be read, and an error when the kind is not a template's.
func (e *Env) templateOf(ctx context.Context, gvk schema.GroupVersionKind, resource string) (*v1alpha1.StackTemplate, *TraceNode, error) {
	templateGVK := v1alpha1.GroupVersion.WithKind("StackTemplate")
	crdName := resource + "." + gvk.Group
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(crdGVK)
	crdErr := e.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd)
	switch {
	case apierrors.IsNotFound(crdErr):
		return nil, nil, errors.New("no CustomResourceDefinition defines its kind")
	case crdErr == nil && crd.Labels[v1alpha1.TemplateLabel] == "":
		return nil, nil, fmt.Errorf("its CustomResourceDefinition %s has no %s label", crdName, v1alpha1.TemplateLabel)
	case crdErr == nil:
		name := crd.Labels[v1alpha1.TemplateLabel]
		t := &v1alpha1.StackTemplate{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, t); err != nil {
			n := unreadable(templateGVK, "", name, err)
			return nil, &n, nil
		}
		return t, nil, nil
	}
	templates := &v1alpha1.StackTemplateList{}
	if err := e.Client.List(ctx, templates); err != nil {
		n := unreadable(templateGVK, "", "", fmt.Errorf("failed to get CustomResourceDefinition %s (%w) and to list StackTemplates (%w)", crdName, crdErr, err))
		return nil, &n, nil
	}
	for i, t := range templates.Items {
		if t.Spec.API.Group == gvk.Group && t.Spec.API.Kind == gvk.Kind {
			return &templates.Items[i], nil, nil
		}
	}
	return nil, nil, errors.New("no StackTemplate defines its kind")
}

// traceStack is a Stack with its current and last Updates.
func (e *Env) traceStack(ctx context.Context, s *pulumiv1.Stack) TraceNode {
	n := node(stackGVK, s.Namespace, s.Name)
	n.CreationTimestamp = &s.CreationTimestamp
	n.Status = State(s)
	n.Reason, n.Message = stackReason(s)
	n.Suspended = s.Spec.Stackwright != nil && s.Spec.Stackwright.Suspend
	n.Conditions = s.Status.Conditions
	current := ""
	if cu := s.Status.CurrentUpdate; cu != nil && cu.Name != "" {
		current = cu.Name
		n.Children = append(n.Children, e.traceUpdateNamed(ctx, s.Namespace, cu.Name, "current"))
	}
	if lu := s.Status.LastUpdate; lu != nil && lu.Name != "" && lu.Name != current {
		n.Children = append(n.Children, e.traceUpdateNamed(ctx, s.Namespace, lu.Name, "last"))
	}
	return n
}

// stackReason is the reason and message of the condition State chose.
func stackReason(s *pulumiv1.Stack) (string, string) {
	typ := pulumiv1.ConditionReady
	switch State(s) {
	case "Suspended":
		typ = pulumiv1.ConditionSuspended
	case "Stalled":
		typ = pulumiv1.ConditionStalled
	case "Reconciling":
		typ = pulumiv1.ConditionReconciling
	case "Ready (drift detected)":
		typ = pulumiv1.ConditionDriftDetected
	}
	if c := apimeta.FindStatusCondition(s.Status.Conditions, typ); c != nil {
		return c.Reason, c.Message
	}
	return "", ""
}

// instanceNode is an instance with the conditions its Stack's are mirrored into.
func instanceNode(obj *unstructured.Unstructured) TraceNode {
	n := node(obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName())
	created := obj.GetCreationTimestamp()
	n.CreationTimestamp = &created
	var st v1alpha1.InstanceStatus
	if m, ok := obj.Object["status"].(map[string]any); ok {
		// A status that does not read shows as none: the instance itself was found.
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st)
	}
	n.Conditions = st.Conditions
	for _, typ := range []string{pulumiv1.ConditionStalled, pulumiv1.ConditionReconciling} {
		if c := apimeta.FindStatusCondition(st.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue {
			n.Status, n.Reason, n.Message = typ, c.Reason, c.Message
			return n
		}
	}
	n.Status = "Unknown"
	if c := apimeta.FindStatusCondition(st.Conditions, pulumiv1.ConditionReady); c != nil {
		switch c.Status {
		case metav1.ConditionTrue:
			n.Status = pulumiv1.ConditionReady
		case metav1.ConditionFalse:
			n.Status = "NotReady"
		}
		n.Reason, n.Message = c.Reason, c.Message
	}
	return n
}

func (e *Env) traceUpdateNamed(ctx context.Context, namespace, name, role string) TraceNode {
	u := &v1alpha1.Update{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		n := unreadable(updateGVK, namespace, name, err)
		n.Role = role
		return n
	}
	return e.traceUpdate(ctx, u, role)
}

// traceUpdate is an Update with its runner Job, when a Job runs it.
func (e *Env) traceUpdate(ctx context.Context, u *v1alpha1.Update, role string) TraceNode {
	n := node(updateGVK, u.Namespace, u.Name)
	n.CreationTimestamp = &u.CreationTimestamp
	n.Role = role
	n.Status = string(u.Status.Phase)
	n.Message = u.Status.Message
	n.Conditions = u.Status.Conditions
	n.Type, n.Result, n.Runner = string(u.Spec.Type), string(u.Status.Result), u.Status.Runner
	// Complete, True or False, says how a finished Update ended; Reconciling that it runs;
	// the queue why it waits.
	if c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete); c != nil {
		n.Reason = c.Reason
	} else if c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionReconciling); c != nil && c.Status == metav1.ConditionTrue {
		n.Reason = c.Reason
	} else if u.Status.Queue != nil {
		n.Reason = u.Status.Queue.Reason
	}
	if ns, job, ok := RunnerJob(u); ok {
		n.Children = []TraceNode{e.traceJob(ctx, ns, job)}
	}
	return n
}

// RunnerJob reads the Job out of status.runner: job/<namespace>/<name> (a detached run's
// Job is in the manager's namespace), or job/<name> in the Update's namespace.
func RunnerJob(u *v1alpha1.Update) (string, string, bool) {
	rest, ok := strings.CutPrefix(u.Status.Runner, "job/")
	if !ok || rest == "" {
		return "", "", false
	}
	if ns, name, ok := strings.Cut(rest, "/"); ok {
		return ns, name, ns != "" && name != ""
	}
	return u.Namespace, rest, true
}

// traceRequest is a one-off request with the Update that runs it.
func (e *Env) traceRequest(ctx context.Context, r *autov1alpha1.Update) TraceNode {
	n := node(requestGVK, r.Namespace, r.Name)
	n.CreationTimestamp = &r.CreationTimestamp
	n.Type = string(r.Spec.Type)
	n.Message = r.Status.Message
	n.Conditions = r.Status.Conditions
	complete := apimeta.FindStatusCondition(r.Status.Conditions, autov1alpha1.ConditionComplete)
	failed := apimeta.FindStatusCondition(r.Status.Conditions, autov1alpha1.ConditionFailed)
	progressing := apimeta.FindStatusCondition(r.Status.Conditions, autov1alpha1.ConditionProgressing)
	switch {
	case complete != nil && complete.Status == metav1.ConditionTrue && failed != nil && failed.Status == metav1.ConditionTrue:
		n.Status, n.Reason = "Failed", failed.Reason
	case complete != nil && complete.Status == metav1.ConditionTrue:
		n.Status, n.Reason = "Succeeded", complete.Reason
	case progressing != nil && progressing.Status == metav1.ConditionTrue:
		n.Status, n.Reason = "Progressing", progressing.Reason
	default:
		n.Status = "Pending"
	}
	if r.Status.Update != "" {
		n.Children = []TraceNode{e.traceUpdateNamed(ctx, r.Namespace, r.Status.Update, "")}
	}
	return n
}

// traceJob is a runner Job with its Pods.
func (e *Env) traceJob(ctx context.Context, namespace, name string) TraceNode {
	j := &batchv1.Job{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, j); err != nil {
		return unreadable(jobGVK, namespace, name, err)
	}
	n := node(jobGVK, namespace, name)
	n.CreationTimestamp = &j.CreationTimestamp
	n.Active, n.Succeeded, n.Failed = &j.Status.Active, &j.Status.Succeeded, &j.Status.Failed
	n.Status, n.Reason, n.Message = jobState(j)
	selector := labels.SelectorFromSet(labels.Set{batchv1.JobNameLabel: name})
	if j.Spec.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
		if err == nil {
			selector = s
		}
	}
	pods := &corev1.PodList{}
	if err := e.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		n.Children = []TraceNode{unreadable(podGVK, namespace, "", err)}
		return n
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i := range pods.Items {
		n.Children = append(n.Children, podNode(&pods.Items[i]))
	}
	return n
}

// jobState is a Job's status in kubectl's words, with the reason and message of its
// Failed condition.
func jobState(j *batchv1.Job) (string, string, string) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			return "Failed", c.Reason, c.Message
		case batchv1.JobComplete:
			return "Complete", c.Reason, c.Message
		}
	}
	switch {
	case j.Spec.Suspend != nil && *j.Spec.Suspend:
		return "Suspended", "", ""
	case j.Status.Active > 0:
		return "Running", "", ""
	}
	return "Pending", "", ""
}

// podNode is a runner Pod: its phase, and the state of the container that explains it.
func podNode(p *corev1.Pod) TraceNode {
	n := node(podGVK, p.Namespace, p.Name)
	n.CreationTimestamp = &p.CreationTimestamp
	n.Status = string(p.Status.Phase)
	if p.DeletionTimestamp != nil {
		n.Status = "Terminating"
	}
	statuses := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
	var restarts int32
	for _, c := range statuses {
		restarts += c.RestartCount
	}
	n.Restarts = &restarts
	n.Reason, n.Message = podReason(p, statuses)
	return n
}

// podReason is why a Pod is not simply running or done: the Pod's own reason (Evicted,
// DeadlineExceeded), a container waiting (ImagePullBackOff, CrashLoopBackOff) or ended in
// failure (OOMKilled, Error), or else how a container that runs again ended last time.
func podReason(p *corev1.Pod, statuses []corev1.ContainerStatus) (string, string) {
	if p.Status.Reason != "" {
		return p.Status.Reason, p.Status.Message
	}
	for _, c := range statuses {
		if w := c.State.Waiting; w != nil && w.Reason != "" {
			return w.Reason, w.Message
		}
		if t := c.State.Terminated; t != nil && t.ExitCode != 0 {
			return t.Reason, terminated(c.Name, t)
		}
	}
	for _, c := range statuses {
		if t := c.LastTerminationState.Terminated; t != nil {
			return t.Reason, terminated(c.Name, t)
		}
	}
	return "", ""
}

func terminated(container string, t *corev1.ContainerStateTerminated) string {
	if t.Message != "" {
		return t.Message
	}
	return fmt.Sprintf("container %s exited with code %d", container, t.ExitCode)
}

func node(gvk schema.GroupVersionKind, namespace, name string) TraceNode {
	return TraceNode{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(), Namespace: namespace, Name: name}
}

// unreadable is the node of an object that could not be read: Gone when it does not
// exist, the API's reason otherwise.
func unreadable(gvk schema.GroupVersionKind, namespace, name string, err error) TraceNode {
	n := node(gvk, namespace, name)
	if apierrors.IsNotFound(err) {
		n.Status = statusGone
		return n
	}
	n.Status = "Error"
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Reason != "" {
		n.Status = string(status.Status().Reason)
	}
	n.Error = err.Error()
	return n
}

// printTree prints the tree as a table, each object's name indented under its parent's.
func (e *Env) printTree(root TraceNode) error {
	var rows [][]string
	var walk func(n TraceNode, lead, indent string)
	walk = func(n TraceNode, lead, indent string) {
		status := n.Status
		if status == statusGone {
			status = "(gone)"
		}
		message := n.Message
		if n.Error != "" {
			message = n.Error
		}
		if n.Restarts != nil && *n.Restarts > 0 {
			message = strings.TrimSuffix(fmt.Sprintf("restarts: %d; %s", *n.Restarts, message), "; ")
		}
		age := "-"
		if n.CreationTimestamp != nil {
			age = e.age(*n.CreationTimestamp)
		}
		rows = append(rows, []string{dash(n.Namespace), lead + traceName(n), dash(status), dash(n.Reason), age, clip.Line(message, traceMessageWidth)})
		for i, c := range n.Children {
			if i == len(n.Children)-1 {
				walk(c, indent+"└─ ", indent+"   ")
			} else {
				walk(c, indent+"├─ ", indent+"│  ")
			}
		}
	}
	walk(root, "", "")
	return e.table([]string{"NAMESPACE", "NAME", "STATUS", "REASON", "AGE", "MESSAGE"}, rows)
}

// traceName is Kind/name, the kind qualified where Stackwright's Update would be
// ambiguous, with an Update's role and type.
func traceName(n TraceNode) string {
	kind := n.Kind
	if gv, err := schema.ParseGroupVersion(n.APIVersion); err == nil && gv.WithKind(n.Kind) == requestGVK {
		kind += "." + gv.Group
	}
	name := kind
	if n.Name != "" {
		name += "/" + n.Name
	}
	var notes []string
	for _, s := range []string{n.Role, n.Type} {
		if s != "" {
			notes = append(notes, s)
		}
	}
	if len(notes) > 0 {
		name += " (" + strings.Join(notes, " ") + ")"
	}
	return name
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
