package policy

import (
	"context"
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/policy"
)

// Condition reasons of Policies and ClusterPolicies.
const (
	// ReasonCompiled (Ready=True): the module compiles and defines deny.
	ReasonCompiled = "Compiled"
	// ReasonCompileError (Stalled=True): the module does not compile; every Stack it
	// selects is stopped (PolicyInvalid) until it is fixed.
	ReasonCompileError = "CompileError"
)

// FieldManager owns the status fields this controller writes.
const FieldManager = "stackwright-policy-controller"

// +kubebuilder:rbac:groups=stackwright.dev,resources=policies;clusterpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=stackwright.dev,resources=policies/status;clusterpolicies/status,verbs=get;update;patch

// object is one Policy or ClusterPolicy, with the parts the reconciler needs.
type object struct {
	obj interface {
		client.Object
		conditions.Object
	}
	spec   *v1alpha1.PolicySpec
	status *v1alpha1.PolicyStatus
}

func newPolicy() object {
	p := &v1alpha1.Policy{}
	return object{obj: p, spec: &p.Spec, status: &p.Status}
}

func newClusterPolicy() object {
	p := &v1alpha1.ClusterPolicy{}
	return object{obj: p, spec: &p.Spec, status: &p.Status}
}

// Reconciler reports whether policies compile. One instance serves one kind.
type Reconciler struct {
	Client client.Client
	kind   string
	newObj func() object
}

// Controllers are the Policy and ClusterPolicy controllers.
type Controllers struct {
	Client client.Client
}

// SetupWithManager registers a controller for Policies and one for ClusterPolicies.
func (c *Controllers) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	for _, r := range []*Reconciler{
		{Client: c.Client, kind: "Policy", newObj: newPolicy},
		{Client: c.Client, kind: "ClusterPolicy", newObj: newClusterPolicy},
	} {
		if err := ctrl.NewControllerManagedBy(mgr).
			Named(r.kind).
			WithOptions(opts).
			For(r.newObj().obj, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			Complete(r); err != nil {
			return fmt.Errorf("failed to set up the %s controller: %w", r.kind, err)
		}
	}
	return nil
}

// Reconcile compiles the policy's module and records the verdict.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	o := r.newObj()
	if err := r.Client.Get(ctx, req.NamespacedName, o.obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	p := patch.New(r.Client, o.obj, r.kind, FieldManager)
	defer func() {
		finalizeStatus(o)
		if err := p.Status(ctx, o.obj); err != nil {
			retErr = errors.Join(retErr, err)
		}
		ctrl.LoggerFrom(ctx).Info("Reconciled "+r.kind, "duration", time.Since(start).Round(time.Millisecond),
			"generation", o.obj.GetGeneration(), "ready", conditions.IsTrue(o.obj, pulumiv1.ConditionReady))
	}()
	_, err := policy.Compile(ctx, o.obj.GetName(), o.spec.Rego)
	markCompiled(o, err)
	return ctrl.Result{}, nil
}
