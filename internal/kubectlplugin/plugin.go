package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/clip"
)

// fieldManager names the plugin's writes in managedFields.
const fieldManager = "kubectl-stackwright"

// Output formats of -o.
const (
	formatTable = ""
	formatJSON  = "json"
	formatYAML  = "yaml"
)

// Env is what the commands run against: a client, the namespace to use, where to write,
// and the clock. Tests build one directly; NewCommand builds it from the kubeconfig.
type Env struct {
	Client    client.Client
	Namespace string
	Out       io.Writer
	Now       func() time.Time
	// Config is the connection Client was made from, for what a client.Client cannot do
	// (watches, Pod logs); nil in an Env a test builds directly.
	Config *rest.Config
}

// NewCommand is the root `kubectl stackwright` command. connect, called once a command
// runs, turns the parsed kubeconfig flags into an Env; nil uses the kubeconfig. extra adds
// commands of packages that build on this one (the web console), which cannot be imported
// here without a cycle.
func NewCommand(scheme *runtime.Scheme, out io.Writer, connect func() (*Env, error), extra ...func(connect func() (*Env, error)) *cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:           "kubectl-stackwright",
		Short:         "Work with Stackwright Stacks, their Updates and StackRollouts",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Completions are written to the command's output, which tests capture.
	root.SetOut(out)
	if connect == nil {
		connect = kubeconfig(root, scheme, out)
	}
	var allNamespaces bool
	var format string
	get := &cobra.Command{
		Use:   "get [STACK]",
		Short: "List Stacks with their state, deployed revision and last update",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			return env.get(cmd.Context(), args, allNamespaces, format)
		},
	}
	get.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "List the Stacks of every namespace")
	history := &cobra.Command{
		Use:   "history STACK",
		Short: "List a Stack's Updates, newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			return env.history(cmd.Context(), args[0], format)
		},
	}
	logs := &cobra.Command{
		Use:   "logs UPDATE",
		Short: "Print the engine output recorded for an Update (its last 8 KiB)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			return env.logs(cmd.Context(), args[0])
		},
	}
	outputs := &cobra.Command{
		Use:   "outputs STACK",
		Short: "Print a Stack's outputs (secret ones as [secret])",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			return env.outputs(cmd.Context(), args[0], format)
		},
	}
	retry := &cobra.Command{
		Use:   "retry STACK",
		Short: "Run the Stack's update again now (sets its " + pulumiv1.ReconcileRequestAnnotation + " annotation)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			return env.retry(cmd.Context(), args[0])
		},
	}
	suspend := &cobra.Command{
		Use:   "suspend STACK",
		Short: "Stop all engine runs of a Stack (spec.stackwright.suspend: true)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			return env.setSuspend(cmd.Context(), args[0], true)
		},
	}
	resume := &cobra.Command{
		Use:   "resume STACK",
		Short: "Let a suspended Stack run again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			return env.setSuspend(cmd.Context(), args[0], false)
		},
	}
	preview := &cobra.Command{
		Use:   "preview STACK",
		Short: "Show the Stack's change under review: its preview's planned steps and the policies' verdict",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			return env.preview(cmd.Context(), args[0], format)
		},
	}
	approve := &cobra.Command{
		Use:   "approve STACK",
		Short: "Approve the change awaiting approval (sets " + pulumiv1.ApproveAnnotation + " to its preview)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			return env.Decide(cmd.Context(), args[0], Approve, "")
		},
	}
	reject := &cobra.Command{
		Use:   "reject STACK",
		Short: "Reject the change awaiting approval (sets " + pulumiv1.RejectAnnotation + " to its preview)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			return env.Decide(cmd.Context(), args[0], Reject, "")
		},
	}
	var by time.Duration
	extend := &cobra.Command{
		Use:   "extend STACK",
		Short: "Push back the expiry of a Stack's TTL (sets " + pulumiv1.ExpiresAtAnnotation + ")",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			return env.extend(cmd.Context(), args[0], by)
		},
	}
	extend.Flags().DurationVar(&by, "by", 0, "How much longer than its current expiry (or than now, if later) the Stack lives (default: its TTL's length)")
	trace := traceCommand(connect, &format)
	for _, c := range []*cobra.Command{get, history, outputs, preview, trace} {
		c.Flags().StringVarP(&format, "output", "o", formatTable, "Output format: json or yaml (a table when unset)")
	}
	for _, c := range []*cobra.Command{history, outputs, retry, suspend, resume, preview, approve, reject, extend} {
		c.ValidArgsFunction = completeStacks(connect)
	}
	root.AddCommand(get, history, logs, outputs, retry, suspend, resume, preview, approve, reject, extend, trace, runCommand(connect), rolloutCommand(connect))
	for _, f := range extra {
		root.AddCommand(f(connect))
	}
	return root
}

// kubeconfig binds kubectl's connection flags (--kubeconfig, --context, -n, ...) to root
// and returns the function that connects with them.
func kubeconfig(root *cobra.Command, scheme *runtime.Scheme, out io.Writer) func() (*Env, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	root.PersistentFlags().StringVar(&rules.ExplicitPath, "kubeconfig", "", "Path to the kubeconfig file")
	overrides := &clientcmd.ConfigOverrides{}
	clientcmd.BindOverrideFlags(overrides, root.PersistentFlags(), clientcmd.RecommendedConfigOverrideFlags(""))
	return func() (*Env, error) {
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
		cfg, err := cc.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("failed to load kubeconfig: %w", err)
		}
		ns, _, err := cc.Namespace()
		if err != nil {
			return nil, fmt.Errorf("failed to find the namespace: %w", err)
		}
		return Connect(cfg, scheme, ns, out)
	}
}

// Connect returns an Env on cfg.
func Connect(cfg *rest.Config, scheme *runtime.Scheme, namespace string, out io.Writer) (*Env, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("failed to create client: %w", err)
	}
	return &Env{Client: c, Namespace: namespace, Out: out, Now: time.Now, Config: cfg}, nil
}

func completeStacks(connect func() (*Env, error)) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return completeNames(connect, func(ctx context.Context, e *Env) ([]string, error) {
		list := &pulumiv1.StackList{}
		if err := e.Client.List(ctx, list, client.InNamespace(e.Namespace)); err != nil {
			return nil, err
		}
		var names []string
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		return names, nil
	})
}

// completeNames completes a command's one argument with the names list returns, and
// never with file names.
func completeNames(connect func() (*Env, error), list func(context.Context, *Env) ([]string, error)) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		env, err := connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		names, err := list(cmd.Context(), env)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

func (e *Env) get(ctx context.Context, args []string, all bool, format string) error {
	var stacks []pulumiv1.Stack
	if len(args) == 1 {
		s, err := e.stack(ctx, args[0])
		if err != nil {
			return err
		}
		stacks = []pulumiv1.Stack{*s}
	} else {
		list := &pulumiv1.StackList{}
		var opts []client.ListOption
		if !all {
			opts = append(opts, client.InNamespace(e.Namespace))
		}
		if err := e.Client.List(ctx, list, opts...); err != nil {
			return fmt.Errorf("failed to list Stacks: %w", err)
		}
		stacks = list.Items
	}
	slices.SortFunc(stacks, func(a, b pulumiv1.Stack) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	if format != formatTable {
		return e.print(format, stacks)
	}
	header := []string{"NAME", "STATE", "REVISION", "LAST UPDATE", "AGE"}
	if all {
		header = append([]string{"NAMESPACE"}, header...)
	}
	var rows [][]string
	for _, s := range stacks {
		row := []string{s.Name, State(&s), short(lastSuccessfulCommit(&s)), e.lastUpdate(&s), e.age(s.CreationTimestamp)}
		if all {
			row = append([]string{s.Namespace}, row...)
		}
		rows = append(rows, row)
	}
	return e.table(header, rows)
}

// State is one word for a Stack's state, the way a person asks: Suspended, Stalled,
// Reconciling, Ready, or Unknown before the controller has written anything.
func State(s *pulumiv1.Stack) string {
	switch {
	case s.Spec.Stackwright != nil && s.Spec.Stackwright.Suspend:
		return "Suspended"
	case apimeta.IsStatusConditionTrue(s.Status.Conditions, pulumiv1.ConditionStalled):
		return "Stalled"
	case apimeta.IsStatusConditionTrue(s.Status.Conditions, pulumiv1.ConditionReconciling):
		return "Reconciling"
	case apimeta.IsStatusConditionTrue(s.Status.Conditions, pulumiv1.ConditionReady):
		if apimeta.IsStatusConditionTrue(s.Status.Conditions, pulumiv1.ConditionDriftDetected) {
			return "Ready (drift detected)"
		}
		return "Ready"
	}
	return "Unknown"
}

func lastSuccessfulCommit(s *pulumiv1.Stack) string {
	if lu := s.Status.LastUpdate; lu != nil {
		return lu.LastSuccessfulCommit
	}
	return ""
}

// lastUpdate is "up succeeded 5m ago".
func (e *Env) lastUpdate(s *pulumiv1.Stack) string {
	lu := s.Status.LastUpdate
	if lu == nil {
		return "-"
	}
	text := strings.TrimSpace(lu.Type + " " + string(lu.State))
	if lu.LastResyncTime != nil {
		text += " " + e.age(*lu.LastResyncTime) + " ago"
	}
	return text
}

func (e *Env) history(ctx context.Context, stack string, format string) error {
	if _, err := e.stack(ctx, stack); err != nil {
		return err
	}
	list := &v1alpha1.UpdateList{}
	if err := e.Client.List(ctx, list, client.InNamespace(e.Namespace)); err != nil {
		return fmt.Errorf("failed to list Updates: %w", err)
	}
	var updates []v1alpha1.Update
	for _, u := range list.Items {
		if u.Spec.StackName == stack {
			updates = append(updates, u)
		}
	}
	slices.SortFunc(updates, func(a, b v1alpha1.Update) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(b.Name, a.Name)
	})
	if format != formatTable {
		return e.print(format, updates)
	}
	var rows [][]string
	for _, u := range updates {
		took := "-"
		if u.Status.StartTime != nil && u.Status.EndTime != nil {
			took = u.Status.EndTime.Sub(u.Status.StartTime.Time).Round(time.Second).String()
		}
		rows = append(rows, []string{u.Name, string(u.Spec.Type), string(u.Status.Phase), short(u.Spec.Revision), took,
			e.age(u.CreationTimestamp), clip.Line(u.Status.Message, 80)})
	}
	return e.table([]string{"UPDATE", "TYPE", "PHASE", "REVISION", "DURATION", "AGE", "MESSAGE"}, rows)
}

func (e *Env) logs(ctx context.Context, name string) error {
	u := &v1alpha1.Update{}
	if err := e.Client.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: name}, u); err != nil {
		return fmt.Errorf("failed to get Update %s/%s: %w", e.Namespace, name, err)
	}
	if u.Status.LogTail == "" {
		_, err := fmt.Fprintf(e.Out, "Update %s has no engine output recorded (phase %q)\n", name, u.Status.Phase)
		return err
	}
	text := u.Status.LogTail
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	_, err := io.WriteString(e.Out, text)
	return err
}

func (e *Env) outputs(ctx context.Context, name, format string) error {
	s, err := e.stack(ctx, name)
	if err != nil {
		return err
	}
	values := map[string]any{}
	for k, v := range s.Status.Outputs {
		var x any
		if err := json.Unmarshal(v.Raw, &x); err != nil {
			return fmt.Errorf("failed to read output %s of Stack %s: %w", k, name, err)
		}
		values[k] = x
	}
	if format != formatTable {
		return e.print(format, values)
	}
	var rows [][]string
	for _, k := range slices.Sorted(maps.Keys(values)) {
		b, _ := json.Marshal(values[k])
		rows = append(rows, []string{k, string(b)})
	}
	return e.table([]string{"OUTPUT", "VALUE"}, rows)
}

func (e *Env) retry(ctx context.Context, name string) error {
	value := e.Now().UTC().Format(time.RFC3339Nano)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, pulumiv1.ReconcileRequestAnnotation, value)
	if err := e.patchStack(ctx, name, patch); err != nil {
		return err
	}
	_, err := fmt.Fprintf(e.Out, "stack.pulumi.com/%s retry requested (%s=%s)\n", name, pulumiv1.ReconcileRequestAnnotation, value)
	return err
}

// extend sets the Stack's expires-at annotation to by past its current expiry, or past
// now if that is later: an expired Stack is already being deleted and cannot be extended.
func (e *Env) extend(ctx context.Context, name string, by time.Duration) error {
	s, err := e.stack(ctx, name)
	if err != nil {
		return err
	}
	var ttl *pulumiv1.StackTTL
	if s.Spec.Stackwright != nil {
		ttl = s.Spec.Stackwright.TTL
	}
	sw := s.Status.Stackwright
	switch {
	case ttl == nil:
		return fmt.Errorf("stack.pulumi.com/%s has no TTL (spec.stackwright.ttl)", name)
	case sw != nil && sw.ExpiredAt != nil:
		return fmt.Errorf("stack.pulumi.com/%s expired at %s and is being destroyed", name, sw.ExpiredAt.UTC().Format(time.RFC3339))
	case by <= 0:
		by = ttl.After.Duration
	}
	from := e.Now()
	if sw != nil && sw.ExpiresAt != nil && sw.ExpiresAt.After(from) {
		from = sw.ExpiresAt.Time
	}
	value := from.Add(by).UTC().Format(time.RFC3339)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, pulumiv1.ExpiresAtAnnotation, value)
	if err := e.patchStack(ctx, name, patch); err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.Out, "stack.pulumi.com/%s expires at %s\n", name, value)
	return err
}

func (e *Env) setSuspend(ctx context.Context, name string, suspend bool) error {
	value, verb := "true", "suspended"
	if !suspend {
		value, verb = "null", "resumed"
	}
	if err := e.patchStack(ctx, name, []byte(`{"spec":{"stackwright":{"suspend":`+value+`}}}`)); err != nil {
		return err
	}
	_, err := fmt.Fprintf(e.Out, "stack.pulumi.com/%s %s\n", name, verb)
	return err
}

// review is what `preview -o json|yaml` prints.
type review struct {
	Approval *pulumiv1.ApprovalStatus `json:"approval"`
	Steps    []v1alpha1.UpdateStep    `json:"steps,omitempty"`
	Policy   *v1alpha1.PolicyResults  `json:"policy,omitempty"`
}

func (e *Env) preview(ctx context.Context, name, format string) error {
	s, err := e.stack(ctx, name)
	if err != nil {
		return err
	}
	a := approvalOf(s)
	if a == nil {
		return fmt.Errorf("no change of Stack %s/%s was previewed: it has neither approval: Manual nor a policy selecting it, or no change came since", e.Namespace, name)
	}
	u := &v1alpha1.Update{}
	if err := e.Client.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: a.Preview}, u); err != nil {
		return fmt.Errorf("failed to get Update %s/%s: %w", e.Namespace, a.Preview, err)
	}
	if format != formatTable {
		return e.print(format, review{Approval: a, Steps: u.Status.Steps, Policy: u.Status.Policy})
	}
	fmt.Fprintf(e.Out, "Preview:  %s (revision %s)\nState:    %s\nSummary:  %s\n", a.Preview, a.Revision, a.State, a.Summary)
	if a.Message != "" {
		fmt.Fprintf(e.Out, "Note:     %s\n", a.Message)
	}
	for _, v := range a.Violations {
		fmt.Fprintf(e.Out, "Policy:   %s (%s): %s\n", v.Policy, v.Enforcement, v.Message)
	}
	fmt.Fprintln(e.Out)
	rows := make([][]string, 0, len(u.Status.Steps))
	for _, st := range u.Status.Steps {
		rows = append(rows, []string{st.Op, st.URN, strings.Join(st.Changed, ",")})
	}
	if u.Status.StepsOmitted > 0 {
		rows = append(rows, []string{"…", fmt.Sprintf("%d more steps", u.Status.StepsOmitted), ""})
	}
	return e.table([]string{"OP", "RESOURCE", "CHANGED"}, rows)
}

// Decision is what a person decides about a change awaiting approval: the annotation that
// says it, and the word for it.
type Decision struct {
	annotation, verb string
}

// Approve and Reject are the two decisions.
var (
	Approve = Decision{annotation: pulumiv1.ApproveAnnotation, verb: "approved"}
	Reject  = Decision{annotation: pulumiv1.RejectAnnotation, verb: "rejected"}
)

// Decide sets d's annotation to the preview awaiting approval. preview, when not empty, is
// the one the person reviewed: should another preview await approval instead, nothing is
// written. The controller checks the name again: should another preview have replaced it
// meanwhile, the annotation is refused there, and nothing is applied.
func (e *Env) Decide(ctx context.Context, name string, d Decision, preview string) error {
	s, err := e.stack(ctx, name)
	if err != nil {
		return err
	}
	a := approvalOf(s)
	if a == nil || a.State != pulumiv1.ApprovalAwaiting {
		state := "none"
		if a != nil {
			state = string(a.State)
		}
		return fmt.Errorf("no change of Stack %s/%s awaits approval (state: %s)", e.Namespace, name, state)
	}
	if preview != "" && preview != a.Preview {
		return fmt.Errorf("the change of Stack %s/%s awaiting approval is now the one previewed by Update %s, not %s: review it first", e.Namespace, name, a.Preview, preview)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, d.annotation, a.Preview)
	if err := e.patchStack(ctx, name, patch); err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.Out, "stack.pulumi.com/%s: %s the change previewed by Update %s (%s)\n", name, d.verb, a.Preview, a.Summary)
	return err
}

func approvalOf(s *pulumiv1.Stack) *pulumiv1.ApprovalStatus {
	if s.Status.Stackwright == nil {
		return nil
	}
	return s.Status.Stackwright.Approval
}

func (e *Env) patchStack(ctx context.Context, name string, patch []byte) error {
	s := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: name}}
	if err := e.Client.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(fieldManager)); err != nil {
		return fmt.Errorf("failed to patch Stack %s/%s: %w", e.Namespace, name, err)
	}
	return nil
}

func (e *Env) stack(ctx context.Context, name string) (*pulumiv1.Stack, error) {
	s := &pulumiv1.Stack{}
	if err := e.Client.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: name}, s); err != nil {
		return nil, fmt.Errorf("failed to get Stack %s/%s: %w", e.Namespace, name, err)
	}
	return s, nil
}

func (e *Env) print(format string, v any) error {
	var b []byte
	var err error
	switch format {
	case formatJSON:
		b, err = json.MarshalIndent(v, "", "  ")
		b = append(b, '\n')
	case formatYAML:
		b, err = yaml.Marshal(v)
	default:
		return fmt.Errorf("unknown output format %q: want json or yaml", format)
	}
	if err != nil {
		return fmt.Errorf("failed to render %s: %w", format, err)
	}
	_, err = e.Out.Write(b)
	return err
}

func (e *Env) table(header []string, rows [][]string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(e.Out, "No resources found.")
		return err
	}
	w := tabwriter.NewWriter(e.Out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	return w.Flush()
}

// age is kubectl's short duration since t ("45s", "3m", "2h", "5d").
func (e *Env) age(t metav1.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := e.Now().Sub(t.Time)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// short keeps a revision readable: a commit SHA's first 12 characters, anything else as is.
func short(rev string) string {
	if rev == "" {
		return "-"
	}
	if len(rev) == 40 && strings.Trim(rev, "0123456789abcdef") == "" {
		return rev[:12]
	}
	return rev
}
