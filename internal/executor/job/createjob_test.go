package job

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/scheme"
)

// stubRunner resolves every Update to its stack and an empty request.
type stubRunner struct{ stack *pulumiv1.Stack }

func (r stubRunner) Claim(context.Context, *v1alpha1.Update, string) (bool, error) { return true, nil }
func (r stubRunner) Request(context.Context, *v1alpha1.Update) (*pulumiv1.Stack, engine.Request, error) {
	return r.stack, engine.Request{}, nil
}
func (r stubRunner) Record(context.Context, *v1alpha1.Update, *v1alpha1.Update, engine.Result) error {
	return nil
}

// planted marks the objects a test creates beforehand under a runner object's name.
const planted = "planted"

func TestCreateJob_ExistingObjects_AreRefusedAndLeftAlone(t *testing.T) {
	u := testUpdate("web-abc-1")
	ownedBy := func(uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Update", Name: u.Name, UID: types.UID("uid-" + uid), Controller: ptr(true)}}
	}
	secret := func(owners []metav1.OwnerReference) client.Object {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: u.Namespace, Name: workSecretName(u), OwnerReferences: owners},
			Data:       map[string][]byte{WorkFile: []byte(planted)},
		}
	}
	job := func(owners []metav1.OwnerReference) client.Object {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
			Namespace: u.Namespace, Name: jobName(u), OwnerReferences: owners, Annotations: map[string]string{planted: "true"},
		}}
	}
	type outcome struct {
		Reason, Error string
		Secret, Job   string
	}
	refused := func(what, name string) string {
		return what + " " + name + " already exists and was not created by Stackwright for Update web-abc-1: Stackwright refuses to use it (delete it, or stop creating objects under that name)"
	}
	for _, tc := range []struct {
		name     string
		existing []client.Object
		template *pulumiv1.WorkspaceTemplate
		want     outcome
	}{
		{
			name: "nothing in the way: both are created",
			want: outcome{Secret: "ours", Job: "ours"},
		},
		{
			name:     "a Secret with a forged owner reference to this Update is refused",
			existing: []client.Object{secret(ownedBy("1"))},
			want:     outcome{Reason: v1alpha1.ReasonPermanentFailure, Error: refused("work Secret", workSecretName(u)), Secret: planted, Job: "absent"},
		},
		{
			name:     "a tenant's Secret under the work Secret's name is refused and left alone",
			existing: []client.Object{secret(nil)},
			want:     outcome{Reason: v1alpha1.ReasonPermanentFailure, Error: refused("work Secret", workSecretName(u)), Secret: planted, Job: "absent"},
		},
		{
			name:     "a Secret controlled by another Update is refused",
			existing: []client.Object{secret(ownedBy("2"))},
			want:     outcome{Reason: v1alpha1.ReasonPermanentFailure, Error: refused("work Secret", workSecretName(u)), Secret: planted, Job: "absent"},
		},
		{
			name:     "a tenant's Job under the runner Job's name is refused, and the work Secret deleted",
			existing: []client.Object{job(nil)},
			want:     outcome{Reason: v1alpha1.ReasonPermanentFailure, Error: refused("runner Job", jobName(u)), Secret: "absent", Job: planted},
		},
		{
			name:     "a Job with a forged owner reference to this Update is refused, and the work Secret deleted",
			existing: []client.Object{job(ownedBy("1"))},
			want:     outcome{Reason: v1alpha1.ReasonPermanentFailure, Error: refused("runner Job", jobName(u)), Secret: "absent", Job: planted},
		},
		{
			name:     "a refused workspaceTemplate volume stalls the Stack, as its other refusals do",
			template: workspaceTemplate(t, `{"spec":{"podTemplate":{"spec":{"volumes":[{"name":"data","nfs":{"server":"s","path":"/"}}]}}}}`),
			want: outcome{
				Reason: pulumiv1.ReasonSpecInvalid, Error: refusal("data", "nfs", defaultsList),
				Secret: "absent", Job: "absent",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sch, err := scheme.New()
			if err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(sch).WithObjects(tc.existing...).Build()
			stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: u.Namespace, Name: "web"}, Spec: pulumiv1.StackSpec{WorkspaceTemplate: tc.template}}
			e := &Executor{client: c, reader: c, runner: stubRunner{stack: stack}, opts: Options{Pod: PodOptions{Image: "runner:1"}}, url: "https://manager"}

			var got outcome
			if err := e.createJob(t.Context(), u); err != nil {
				got.Error = err.Error()
				if f, ok := fault.As(err); ok && f.Stalled {
					got.Reason = f.Reason
				}
			}
			got.Secret, got.Job = secretState(t, c, u), jobState(t, c, u)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// secretState says whose work Secret of u is there: "ours", "planted" or "absent".
func secretState(t *testing.T, c client.Client, u *v1alpha1.Update) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: u.Namespace, Name: workSecretName(u)}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "absent"
		}
		t.Fatal(err)
	}
	if string(s.Data[WorkFile]) == planted {
		return planted
	}
	var w Work
	if err := json.Unmarshal(s.Data[WorkFile], &w); err != nil || w.UpdateUID != string(u.UID) || !metav1.IsControlledBy(s, u) {
		t.Errorf("work Secret is neither planted nor ours: %v, %+v", err, s)
	}
	return "ours"
}

// jobState says whose runner Job of u is there: "ours", "planted" or "absent".
func jobState(t *testing.T, c client.Client, u *v1alpha1.Update) string {
	t.Helper()
	j := &batchv1.Job{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: u.Namespace, Name: jobName(u)}, j); err != nil {
		if apierrors.IsNotFound(err) {
			return "absent"
		}
		t.Fatal(err)
	}
	if j.Annotations[planted] == "true" {
		return planted
	}
	if !metav1.IsControlledBy(j, u) || j.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedBy {
		t.Errorf("runner Job is neither planted nor ours: %+v", j.ObjectMeta)
	}
	return "ours"
}

// cleanup deletes only a work Secret that the Update controls.
func TestCleanup_WorkSecret_DeletedOnlyWhenTheUpdateControlsIt(t *testing.T) {
	u := testUpdate("web-abc-1")
	for _, tc := range []struct {
		name   string
		owners []metav1.OwnerReference
		want   string
	}{
		{name: "this Update's is deleted", owners: []metav1.OwnerReference{{APIVersion: "stackwright.dev/v1alpha1", Kind: "Update", Name: u.Name, UID: u.UID, Controller: ptr(true)}}, want: "absent"},
		{name: "a tenant's is kept", want: planted},
		{name: "one this Update owns without controlling is kept", owners: []metav1.OwnerReference{{APIVersion: "stackwright.dev/v1alpha1", Kind: "Update", Name: u.Name, UID: u.UID}}, want: planted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sch, err := scheme.New()
			if err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(sch).WithObjects(&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: u.Namespace, Name: workSecretName(u), OwnerReferences: tc.owners},
				Data:       map[string][]byte{WorkFile: []byte(planted)},
			}).Build()
			(&Executor{client: c, reader: c}).cleanup(t.Context(), u)
			if got := secretState(t, c, u); got != tc.want {
				t.Errorf("work Secret is %s; want %s", got, tc.want)
			}
		})
	}
}
