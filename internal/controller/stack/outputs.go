package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/crashpoint"
)

// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=create;update;delete

// ExportedFromAnnotation on a published outputs object names the Update whose outputs it
// holds, so a reader can tell which deployment they describe.
const ExportedFromAnnotation = "stackwright.dev/outputs-of"

// exportedOutputs is what one successful Update's outputs become in the objects
// spec.stackwright.outputs names.
type exportedOutputs struct {
	// all holds every output (the Secret's data), public the non-secret ones (the
	// ConfigMap's).
	all, public map[string]string
	// skipped lists outputs whose names cannot be keys.
	skipped []string
}

// exportTarget is one object outputs are published to; mutate fills in its data and says
// whether that changed anything.
type exportTarget struct {
	kind   string
	obj    client.Object
	mutate func() bool
}

// exportValues encodes an outputs Secret's data (JSON values, secret ones listed) as keys
// a Pod or a configRef can read: a string as its text, anything else as its JSON.
func exportValues(data map[string][]byte, secret map[string]bool) exportedOutputs {
	out := exportedOutputs{all: map[string]string{}, public: map[string]string{}}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if len(validation.IsConfigMapKey(k)) > 0 {
			out.skipped = append(out.skipped, k)
			continue
		}
		v := string(data[k])
		var s string
		// null decodes into a string too, as "".
		if len(v) > 0 && v[0] == '"' && json.Unmarshal(data[k], &s) == nil {
			v = s
		}
		out.all[k] = v
		if !secret[k] {
			out.public[k] = v
		}
	}
	return out
}

// exportOutputs publishes the outputs of the Stack's last successful update to the Secret
// and ConfigMap its spec names, and removes the ones it published under names the spec no
// longer gives. It runs on every reconcile of a Stack at its desired state, so an object
// edited or deleted by hand is put back; writes happen only when something differs.
func (r *Reconciler) exportOutputs(ctx context.Context, s *scope) (bool, error) {
	st := s.stack
	want := st.Spec.OutputsExport()
	if st.Spec.Preview {
		// A preview Stack deploys nothing and has no outputs to publish.
		want = nil
	}
	if want == nil && st.Status.OutputsExport == nil {
		return true, nil
	}
	if err := r.dropStaleExports(ctx, st, want); err != nil {
		return false, err
	}
	if want == nil {
		st.Status.OutputsExport = nil
		return true, nil
	}
	status := st.Status.OutputsExport
	if status == nil {
		status = &pulumiv1.OutputsExportStatus{}
		st.Status.OutputsExport = status
	}
	status.SecretName, status.ConfigMapName = want.SecretName, want.ConfigMapName

	from := exportSource(st)
	if from == "" {
		return true, nil
	}
	data, secret, err := r.exportedOutputs(ctx, st.Namespace, from)
	if err != nil || data == nil {
		// Without the outputs (pruned, or deleted by hand) the published objects keep
		// what they hold.
		return err == nil, err
	}
	values := exportValues(data, secret)
	var targets []exportTarget
	if name := want.SecretName; name != "" {
		obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: st.Namespace}}
		targets = append(targets, exportTarget{"Secret", obj, func() bool {
			data := stringsToBytes(values.all)
			if obj.Type == corev1.SecretTypeOpaque && bytesMapsEqual(obj.Data, data) {
				return false
			}
			obj.Type, obj.Data, obj.StringData = corev1.SecretTypeOpaque, data, nil
			return true
		}})
	}
	if name := want.ConfigMapName; name != "" {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: st.Namespace}}
		targets = append(targets, exportTarget{"ConfigMap", obj, func() bool {
			if maps.Equal(obj.Data, values.public) && len(obj.BinaryData) == 0 {
				return false
			}
			obj.Data, obj.BinaryData = values.public, nil
			return true
		}})
	}
	var wrote []string
	for _, t := range targets {
		res, err := r.publish(ctx, st, t.kind, t.obj, from, t.mutate)
		switch {
		case err != nil:
			return false, err
		case res == publishConflict:
			return false, nil
		case res == publishWritten:
			wrote = append(wrote, t.kind+" "+t.obj.GetName())
		}
	}
	status.Update, status.Skipped = from, values.skipped
	if len(wrote) > 0 {
		crashpoint.Hit(crashpoint.StackOutputsExported)
		status.LastExportTime = &metav1.Time{Time: r.Now()}
		s.event(corev1.EventTypeNormal, EventOutputsExported, "Outputs of Update %s written to %s", from, strings.Join(wrote, " and "))
		if len(values.skipped) > 0 {
			s.event(corev1.EventTypeWarning, EventOutputsExported, "Outputs %s left out: their names cannot be keys of a Secret or ConfigMap", strings.Join(values.skipped, ", "))
		}
	}
	return true, nil
}

// exportSource names the Update whose outputs are to be published: the last update if it
// deployed successfully, otherwise the one published before (a failed update changes
// nothing that was deployed). "" when no deployment has outputs yet.
func exportSource(st *pulumiv1.Stack) string {
	if lu := st.Status.LastUpdate; lu != nil && lu.State == pulumiv1.UpdateStateSucceeded && lu.Type == string(v1alpha1.UpdateTypeUp) {
		return lu.Name
	}
	if e := st.Status.OutputsExport; e != nil {
		return e.Update
	}
	return ""
}

// publishResult is what publish did.
type publishResult int

const (
	publishUnchanged publishResult = iota
	publishWritten
	// publishConflict: the object belongs to someone else and the Stack is stalled.
	publishConflict
)

// publish creates obj, or brings the existing object up to date, with mutate filling in
// its data (and reporting whether it changed anything). An object this Stack did not
// create stalls it instead: taking it over, or overwriting it, could break whoever did.
func (r *Reconciler) publish(ctx context.Context, st *pulumiv1.Stack, kind string, obj client.Object, from string, mutate func() bool) (publishResult, error) {
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	switch {
	case apierrors.IsNotFound(err):
		mutate()
		label(obj, st.Name, from)
		if err := controllerutil.SetControllerReference(st, obj, r.Client.Scheme()); err != nil {
			return 0, fmt.Errorf("failed to set owner of %s %s: %w", kind, obj.GetName(), err)
		}
		if err := r.Client.Create(ctx, obj, client.FieldOwner(fieldManager)); err != nil {
			return 0, fmt.Errorf("failed to create %s %s: %w", kind, obj.GetName(), err)
		}
		return publishWritten, nil
	case err != nil:
		return 0, fmt.Errorf("failed to get %s %s: %w", kind, obj.GetName(), err)
	case !exportedBy(obj, st):
		markStalled(st, pulumiv1.ReasonOutputsExportConflict, fmt.Sprintf(
			"%s %s exists and was not created by this Stack, which does not take it over: delete it, or name another in spec.stackwright.outputs", kind, obj.GetName()))
		return publishConflict, nil
	}
	changed := mutate()
	if !changed && metav1.IsControlledBy(obj, st) && obj.GetAnnotations()[ExportedFromAnnotation] == from && obj.GetLabels()[v1alpha1.StackLabel] == st.Name {
		return publishUnchanged, nil
	}
	label(obj, st.Name, from)
	// A Stack recreated under the same name takes back what its predecessor published.
	obj.SetOwnerReferences(slices.DeleteFunc(obj.GetOwnerReferences(), func(o metav1.OwnerReference) bool {
		return o.Controller != nil && *o.Controller
	}))
	if err := controllerutil.SetControllerReference(st, obj, r.Client.Scheme()); err != nil {
		return 0, fmt.Errorf("failed to set owner of %s %s: %w", kind, obj.GetName(), err)
	}
	if err := r.Client.Update(ctx, obj, client.FieldOwner(fieldManager)); err != nil {
		return 0, fmt.Errorf("failed to update %s %s: %w", kind, obj.GetName(), err)
	}
	return publishWritten, nil
}

// exportedBy tells whether obj was published by this Stack or by an earlier Stack of the
// same name (whose owner reference the garbage collector has not acted on yet).
func exportedBy(obj client.Object, st *pulumiv1.Stack) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.Kind == "Stack" && strings.HasPrefix(ref.APIVersion, pulumiv1.GroupVersion.Group+"/") && ref.Name == st.Name
}

func label(obj client.Object, stack, from string) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.StackLabel] = stack
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[ExportedFromAnnotation] = from
	obj.SetAnnotations(annotations)
}

// dropStaleExports deletes the objects the Stack published under names want no longer
// gives. Objects someone else has meanwhile taken over are left alone.
func (r *Reconciler) dropStaleExports(ctx context.Context, st *pulumiv1.Stack, want *pulumiv1.OutputsExport) error {
	prev := st.Status.OutputsExport
	if prev == nil {
		return nil
	}
	if want == nil {
		want = &pulumiv1.OutputsExport{}
	}
	stale := map[string]client.Object{}
	if prev.SecretName != "" && prev.SecretName != want.SecretName {
		stale["Secret"] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: prev.SecretName, Namespace: st.Namespace}}
	}
	if prev.ConfigMapName != "" && prev.ConfigMapName != want.ConfigMapName {
		stale["ConfigMap"] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: prev.ConfigMapName, Namespace: st.Namespace}}
	}
	for kind, obj := range stale {
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(obj, st)) {
			continue
		}
		if err != nil {
			return fmt.Errorf("failed to get %s %s: %w", kind, obj.GetName(), err)
		}
		precondition := client.Preconditions{UID: new(obj.GetUID())}
		if err := r.Client.Delete(ctx, obj, precondition); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete %s %s: %w", kind, obj.GetName(), err)
		}
	}
	return nil
}

// exportedOutputs returns the outputs of Update from (outputsOf), nil when they are gone.
// An Update that is gone may have left its outputs Secret (deleted with it, or soon by the
// garbage collector), which is read as before Updates could hold their outputs themselves.
func (r *Reconciler) exportedOutputs(ctx context.Context, namespace, from string) (map[string][]byte, map[string]bool, error) {
	u := &v1alpha1.Update{}
	key := client.ObjectKey{Namespace: namespace, Name: from}
	err := r.Client.Get(ctx, key, u)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		err = r.APIReader.Get(ctx, key, u)
	}
	switch {
	case err == nil:
		return r.outputsOf(ctx, u)
	case !apierrors.IsNotFound(err):
		return nil, nil, fmt.Errorf("failed to get Update %s: %w", from, err)
	}
	sec, err := r.getOutputsSecret(ctx, namespace, from+v1alpha1.OutputsSecretSuffix)
	if err != nil || sec == nil {
		return nil, nil, err
	}
	return sec.Data, secretOutputNames(sec), nil
}

// getOutputsSecret reads an Update's outputs Secret; nil when it does not exist.
func (r *Reconciler) getOutputsSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	err := r.Client.Get(ctx, key, sec)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		// The runner wrote the Secret just before the Update's result, and the cache may
		// not have it yet: only the API server can say it is really gone.
		err = r.APIReader.Get(ctx, key, sec)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get outputs Secret %s: %w", name, err)
	}
	return sec, nil
}

// secretOutputNames reads which outputs of an outputs Secret are secret.
func secretOutputNames(sec *corev1.Secret) map[string]bool {
	secret := map[string]bool{}
	for k := range strings.SplitSeq(sec.Annotations[v1alpha1.SecretOutputsAnnotation], ",") {
		if k != "" {
			secret[k] = true
		}
	}
	return secret
}

func stringsToBytes(m map[string]string) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}

func bytesMapsEqual(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, func(x, y []byte) bool { return string(x) == string(y) })
}
