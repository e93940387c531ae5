package stack_test

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// The samples that run without a cloud account deploy as written: the files Stack (with
// its drift schedule) and the prerequisite chain whose second Stack reads the first one's
// published outputs. Only the directory the test provider writes to is changed, to the
// test's own.
func TestSamples_Apply_ReachReady(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{
		"pulumi_v1_program_files.yaml", "pulumi_v1_stack_files.yaml", "pulumi_v1_stack_chain.yaml",
		"pulumi_v1_stack_gated.yaml", "stackwright_v1alpha1_policy_protected.yaml", "stackwright_v1alpha1_clusterpolicy_owner.yaml",
	} {
		docs, err := kubetest.ReadDocs(filepath.Join(root, "config", "samples", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range docs {
			if doc.GetKind() == "ClusterPolicy" {
				// It selects only Stacks labelled tier: production, which no other test has.
				t.Cleanup(func() { _ = env.Client.Delete(context.Background(), doc) })
			} else {
				doc.SetNamespace(s.ns)
			}
			if doc.GetKind() == "Stack" {
				// The gated Stack runs the files Program too: its files go apart.
				dir := s.files
				if doc.GetName() == "gated" {
					dir = filepath.Join(s.files, "gated")
				}
				if err := unstructured.SetNestedField(doc.Object, dir, "spec", "envRefs", "STACKWRIGHT_TESTING_ROOT", "literal", "value"); err != nil {
					t.Fatalf("failed to point %s at the test's directory: %v", doc.GetName(), err)
				}
			}
			s.create(doc)
		}
	}

	// The gated Stack waits for its approval, judged by both sample policies.
	gated := s.waitAwaiting("gated", "generation/1")
	p := s.update(gated)
	if p.Status.Policy == nil || len(p.Status.Policy.Evaluated) != 2 || p.Status.Policy.Blocking() {
		t.Errorf("the gated preview's policy results = %+v; want both sample policies, passed", p.Status.Policy)
	}
	s.annotate(s.get(s.g, "gated"), pulumiv1.ApproveAnnotation, gated)
	for _, name := range []string{"files", "network", "app", "gated"} {
		st := s.waitReady(name)
		if st.Status.LastUpdate.Type != "up" {
			t.Errorf("Stack %s: last update %+v, want a successful up", name, st.Status.LastUpdate)
		}
	}
	if got, err := s.readFile("app/app.txt"); err != nil || got != "listen on 10.0.1.0/24" {
		t.Errorf("app wrote %q (%v), want the subnet network published", got, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "network-outputs"}}
	if err := s.kube.Get(cm); err != nil {
		t.Fatalf("failed to get the published outputs: %v", err)
	}
	if got, want := cm.Data["subnetFile"], "network/subnet.txt"; got != want {
		t.Errorf("network-outputs subnetFile = %q, want %q", got, want)
	}
	if got, err := s.readFile("gated/greeting.txt"); err != nil || got != "Approved by a person" {
		t.Errorf("gated wrote %q (%v), want the sample's message", got, err)
	}
	if got, err := s.readFile("greeting.txt"); err != nil || got != "Hello from Stackwright" {
		t.Errorf("files wrote %q (%v), want the sample's message", got, err)
	}
}
