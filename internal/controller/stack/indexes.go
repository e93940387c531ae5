package stack

import (
	"context"
	"fmt"
	"sort"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/inputs"
	"github.com/stackwright/stackwright/internal/source/flux"
)

// Cache indexes. Each maps an object to the names it is looked up by.
const (
	// IndexProgramRef indexes Stacks by the Program they use.
	IndexProgramRef = "stackwright.dev/programRef"
	// IndexSecretRefs indexes Stacks by every Secret they reference or publish outputs to.
	IndexSecretRefs = "stackwright.dev/secretRefs"
	// IndexConfigMapRefs indexes Stacks by every ConfigMap they reference or publish
	// outputs to.
	IndexConfigMapRefs = "stackwright.dev/configMapRefs"
	// IndexUpdateStack indexes Updates by the Stack they run on.
	IndexUpdateStack = "stackwright.dev/stackName"
	// IndexPrerequisites indexes Stacks by the names of their prerequisites.
	IndexPrerequisites = "stackwright.dev/prerequisites"
	// IndexRequestWorkspace indexes auto.pulumi.com Updates by the Stack they name.
	IndexRequestWorkspace = "stackwright.dev/workspaceName"
	// IndexFluxSourceRef indexes Stacks by the Flux source they use ("<kind>/<name>").
	IndexFluxSourceRef = "stackwright.dev/fluxSourceRef"
)

// enqueueReferrers maps an object to the Stacks in its namespace whose index names it.
func (r *Reconciler) enqueueReferrers(index string) handler.EventHandler {
	return r.enqueueReferrersBy(index, client.Object.GetName)
}

// enqueueReferrersBy maps an object to the Stacks in its namespace whose index holds the
// object's key ("" matches none).
func (r *Reconciler) enqueueReferrersBy(index string, key func(client.Object) string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		k := key(o)
		if k == "" {
			return nil
		}
		var stacks pulumiv1.StackList
		if err := r.Client.List(ctx, &stacks, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: k}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to list Stacks referencing object", "index", index, "object", client.ObjectKeyFromObject(o))
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(stacks.Items))
		for i := range stacks.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&stacks.Items[i])})
		}
		return reqs
	})
}

// enqueueGated maps a Policy (a ClusterPolicy: namespace "") to the Stacks of its namespace
// (of every namespace) whose change is held at the gate, which a new verdict may release.
func (r *Reconciler) enqueueGated() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var stacks pulumiv1.StackList
		if err := r.Client.List(ctx, &stacks, client.InNamespace(o.GetNamespace())); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to list Stacks a policy may apply to", "policy", client.ObjectKeyFromObject(o))
			return nil
		}
		var reqs []reconcile.Request
		for i := range stacks.Items {
			st := &stacks.Items[i]
			if sw := st.Status.Stackwright; sw != nil && sw.Approval != nil && sw.Approval.State != pulumiv1.ApprovalApproved {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(st)})
			}
		}
		return reqs
	})
}

// secretRefs are the Secrets a Stack reads for its inputs (whichever namespace they
// name: a cross-namespace one stalls the Stack, and must be watched to release it), for
// git, and publishes outputs to.
func secretRefs(st *pulumiv1.Stack) []string {
	spec := &st.Spec
	names, _ := inputs.References(st)
	add := func(ref *pulumiv1.ResourceRef) {
		if ref != nil && ref.Type == pulumiv1.ResourceSelectorSecret && ref.Secret != nil {
			names = append(names, ref.Secret.Name)
		}
	}
	for _, ref := range spec.EnvRefs {
		add(&ref)
	}
	for _, ref := range spec.SecretsRef {
		add(&ref)
	}
	if spec.GitAuthSecret != "" {
		names = append(names, spec.GitAuthSecret)
	}
	// A published Secret edited by hand is put back; a foreign one in the way, once
	// deleted, releases the Stack.
	if e := spec.OutputsExport(); e != nil && e.SecretName != "" {
		names = append(names, e.SecretName)
	}
	if a := spec.GitAuth; a != nil {
		add(a.AccessToken)
		if a.SSHAuth != nil {
			add(&a.SSHAuth.SSHPrivateKey)
			add(a.SSHAuth.Password)
		}
		if a.BasicAuth != nil {
			add(&a.BasicAuth.UserName)
			add(&a.BasicAuth.Password)
		}
	}
	return dedupe(names)
}

func configMapRefs(st *pulumiv1.Stack) []string {
	_, names := inputs.References(st)
	if e := st.Spec.OutputsExport(); e != nil && e.ConfigMapName != "" {
		names = append(names, e.ConfigMapName)
	}
	return dedupe(names)
}

func dedupe(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// registerIndexes registers the cache indexes the Stack controller looks objects up by;
// with oneOffs, auto.pulumi.com Updates' too.
func registerIndexes(ctx context.Context, idx client.FieldIndexer, oneOffs bool) error {
	type index struct {
		obj client.Object
		key string
		fn  client.IndexerFunc
	}
	indexes := []index{
		{&pulumiv1.Stack{}, IndexProgramRef, func(o client.Object) []string {
			if ref := o.(*pulumiv1.Stack).Spec.ProgramRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		}},
		{&pulumiv1.Stack{}, IndexSecretRefs, func(o client.Object) []string { return secretRefs(o.(*pulumiv1.Stack)) }},
		{&pulumiv1.Stack{}, IndexConfigMapRefs, func(o client.Object) []string { return configMapRefs(o.(*pulumiv1.Stack)) }},
		{&pulumiv1.Stack{}, IndexPrerequisites, func(o client.Object) []string { return prerequisiteNames(&o.(*pulumiv1.Stack).Spec) }},
		{&v1alpha1.Update{}, IndexUpdateStack, func(o client.Object) []string { return []string{o.(*v1alpha1.Update).Spec.StackName} }},
		{&pulumiv1.Stack{}, IndexFluxSourceRef, func(o client.Object) []string {
			if key := flux.IndexKey(o.(*pulumiv1.Stack)); key != "" {
				return []string{key}
			}
			return nil
		}},
	}
	if oneOffs {
		indexes = append(indexes, index{&autov1alpha1.Update{}, IndexRequestWorkspace, func(o client.Object) []string {
			return []string{o.(*autov1alpha1.Update).Spec.WorkspaceName}
		}})
	}
	for _, i := range indexes {
		if err := idx.IndexField(ctx, i.obj, i.key, i.fn); err != nil {
			return fmt.Errorf("failed to index %s: %w", i.key, err)
		}
	}
	return nil
}
