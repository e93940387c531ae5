package kubectlplugin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
)

// runOptions are the flags of `run`, PKO's options of a hand-made Update.
type runOptions struct {
	targets, replace                                                    []string
	targetDependents, refresh, expectNoChanges, continueOnError, remove bool
	previewOnly, wait, yes                                              bool
	parallel                                                            int32
	message                                                             string
	ttl, timeout, poll                                                  time.Duration
}

// runTypes are the operations `run` asks for.
var runTypes = []string{string(autov1alpha1.PreviewType), string(autov1alpha1.UpType), string(autov1alpha1.RefreshType), string(autov1alpha1.DestroyType)}

// runCommand is `run TYPE STACK`: a one-off operation on a Stack, requested as PKO's
// auto.pulumi.com Update, which the Stack runs as one of its Updates.
func runCommand(connect func() (*Env, error)) *cobra.Command {
	o := &runOptions{poll: time.Second}
	cmd := &cobra.Command{
		Use:   "run " + strings.Join(runTypes, "|") + " STACK",
		Short: "Run a one-off preview, up, refresh or destroy of a Stack (creates an auto.pulumi.com Update) and wait for its result",
		Long: "Requests a one-off operation of the Stack as an auto.pulumi.com Update (PKO's kind), which the Stack runs\n" +
			"as one of its Updates as soon as it has none in flight, and waits for the result. The Stack's own record\n" +
			"(its last update, outputs and conditions) is left alone: a destroy of a Stack that is not suspended is\n" +
			"undone by its next up. up and destroy change resources: they need --yes.",
		Args: cobra.ExactArgs(2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return runTypes, cobra.ShellCompDirectiveNoFileComp
			}
			return completeStacks(connect)(cmd, args[1:], toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := connect()
			if err != nil {
				return err
			}
			return env.run(cmd.Context(), autov1alpha1.UpdateType(args[0]), args[1], o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.targets, "target", nil, "Limit the operation to this resource URN (repeatable)")
	f.BoolVar(&o.targetDependents, "target-dependents", false, "Include the targets' dependents")
	f.StringArrayVar(&o.replace, "replace", nil, "Replace this resource URN (up, preview; repeatable)")
	f.BoolVar(&o.refresh, "refresh", false, "Refresh the state first (up, preview, destroy)")
	f.BoolVar(&o.expectNoChanges, "expect-no-changes", false, "Fail if the operation would change anything")
	f.BoolVar(&o.continueOnError, "continue-on-error", false, "Go on past a failed resource with those that do not depend on it (up, destroy)")
	f.BoolVar(&o.remove, "remove", false, "Remove the stack from its backend after the destroy")
	f.BoolVar(&o.previewOnly, "preview-only", false, "Report what a refresh finds without recording it")
	f.Int32Var(&o.parallel, "parallel", 0, "Resource operations run at once (0: the CLI's default)")
	f.StringVar(&o.message, "message", "", "Message recorded with the operation in the backend's history")
	f.DurationVar(&o.ttl, "ttl", time.Hour, "Delete the request this long after it completed (0: keep it)")
	f.BoolVar(&o.wait, "wait", true, "Wait for the result, and fail if the operation failed")
	f.DurationVar(&o.timeout, "timeout", 30*time.Minute, "How long to wait for the result")
	f.BoolVarP(&o.yes, "yes", "y", false, "Confirm an up or destroy")
	return cmd
}

// run requests the operation, and with o.wait waits until it has completed.
func (e *Env) run(ctx context.Context, typ autov1alpha1.UpdateType, stack string, o *runOptions) error {
	if !slices.Contains(runTypes, string(typ)) {
		return fmt.Errorf("unknown operation %q: use one of %s", typ, strings.Join(runTypes, ", "))
	}
	if (typ == autov1alpha1.UpType || typ == autov1alpha1.DestroyType) && !o.yes {
		return fmt.Errorf("%s changes the resources of Stack %s/%s: confirm with --yes", typ, e.Namespace, stack)
	}
	if _, err := e.stack(ctx, stack); err != nil {
		return err
	}
	req := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, GenerateName: stack + "-" + string(typ) + "-"},
		Spec: autov1alpha1.UpdateSpec{
			WorkspaceName: stack, Type: typ, Target: o.targets, Replace: o.replace,
			TargetDependents: flag(o.targetDependents), Refresh: flag(o.refresh), ExpectNoChanges: flag(o.expectNoChanges),
			ContinueOnError: flag(o.continueOnError), Remove: flag(o.remove), PreviewOnly: flag(o.previewOnly),
		},
	}
	if o.parallel > 0 {
		req.Spec.Parallel = ptr.To(o.parallel)
	}
	if o.message != "" {
		req.Spec.Message = ptr.To(o.message)
	}
	if o.ttl > 0 {
		req.Spec.TtlAfterCompleted = &metav1.Duration{Duration: o.ttl}
	}
	if err := e.Client.Create(ctx, req, client.FieldOwner(fieldManager)); err != nil {
		return fmt.Errorf("failed to create auto.pulumi.com Update for Stack %s/%s: %w", e.Namespace, stack, err)
	}
	fmt.Fprintf(e.Out, "Requested %s of Stack %s/%s: update.auto.pulumi.com/%s\n", typ, e.Namespace, stack, req.Name)
	if !o.wait {
		return nil
	}
	return e.awaitRequest(ctx, req, o)
}

// awaitRequest polls the request until it has completed, printing once when it starts,
// then its result; a failed operation is an error.
func (e *Env) awaitRequest(ctx context.Context, req *autov1alpha1.Update, o *runOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	key := client.ObjectKeyFromObject(req)
	started := false
	for {
		if err := e.Client.Get(ctx, key, req); err != nil {
			return fmt.Errorf("failed to get auto.pulumi.com Update %s: %w", key, err)
		}
		if !started && req.Status.Update != "" {
			started = true
			fmt.Fprintf(e.Out, "Running as Update %s (kubectl stackwright logs %s)\n", req.Status.Update, req.Status.Update)
		}
		if c := apimeta.FindStatusCondition(req.Status.Conditions, autov1alpha1.ConditionComplete); c != nil && c.Status == metav1.ConditionTrue {
			failed := apimeta.FindStatusCondition(req.Status.Conditions, autov1alpha1.ConditionFailed)
			if failed != nil && failed.Status == metav1.ConditionTrue {
				return fmt.Errorf("%s of Stack %s/%s failed (%s): %s", req.Spec.Type, req.Namespace, req.Spec.WorkspaceName, failed.Reason, req.Status.Message)
			}
			fmt.Fprintf(e.Out, "%s\n", req.Status.Message)
			if req.Status.Permalink != "" {
				fmt.Fprintf(e.Out, "%s\n", req.Status.Permalink)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped waiting for update.auto.pulumi.com/%s after %s (it goes on; its status says how it ends): %s", req.Name, o.timeout, req.Status.Message)
		case <-time.After(o.poll):
		}
	}
}

func flag(b bool) *bool {
	if !b {
		return nil
	}
	return ptr.To(true)
}
