package v1_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// Every sample and every PKO seed manifest is accepted by the real API server, passes
// strict field validation (so no field is silently dropped), and is stored unchanged.
func TestSamples_Create_Accepted(t *testing.T) {
	root := repoRoot(t)
	var files []string
	for _, pattern := range []string{
		filepath.Join(root, "config", "samples", "*.yaml"),
		filepath.Join(root, "api", "v1", "testdata", "seeds", "*.yaml"),
	} {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range matches {
			if filepath.Base(m) != "kustomization.yaml" {
				files = append(files, m)
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("found only %d sample and seed files: %v", len(files), files)
	}

	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			ctx, warnings, c := warningClient(t)
			ns := env.Namespace(t)
			// PKO's seeds and our samples must not draw a guidance warning either.
			kubetest.InstallGuidance(ctx, t, c, ns)
			docs := readDocs(t, file)
			if len(docs) == 0 {
				t.Fatalf("%s holds no manifest", file)
			}
			for _, doc := range docs {
				if doc.GetKind() == "ClusterPolicy" {
					t.Cleanup(func() { _ = c.Delete(context.Background(), doc) })
				} else {
					doc.SetNamespace(ns)
				}
				key := name + ":" + doc.GetKind() + "/" + doc.GetName()
				sent := doc.DeepCopy()
				if err := c.Create(ctx, doc, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
					t.Fatalf("%s was refused: %v", key, err)
				}
				if w := warnings.Get(); len(w) > 0 {
					t.Errorf("%s drew warnings from the API server: %v", key, w)
				}

				field, ok := userField(doc.GetKind())
				if !ok {
					continue // a Secret: stringData is folded into data, nothing to compare
				}
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(doc.GroupVersionKind())
				if err := c.Get(ctx, client.ObjectKeyFromObject(doc), got); err != nil {
					t.Fatalf("failed to get %s: %v", key, err)
				}
				if diff := cmp.Diff(sent.Object[field], got.Object[field]); diff != "" {
					t.Errorf("%s: %s changed in storage (-sent +stored):\n%s", key, field, diff)
				}
			}
		})
	}
}

// The samples cover every source kind, and each kind has a Stack that is fully described
// (no placeholder such as <YOUR_ORG>) where the source allows it.
func TestSamples_Stacks_CoverEverySourceKind(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "config", "samples", "pulumi_v1_stack_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[pulumiv1.SourceKind][]string{}
	for _, f := range files {
		for _, doc := range readDocs(t, f) {
			if doc.GetKind() != "Stack" {
				continue
			}
			var s pulumiv1.Stack
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(doc.Object, &s); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			got[s.Spec.SourceKind()] = append(got[s.Spec.SourceKind()], s.Name)
		}
	}
	for _, kind := range []pulumiv1.SourceKind{pulumiv1.SourceKindGit, pulumiv1.SourceKindFlux, pulumiv1.SourceKindProgram, pulumiv1.SourceKindImage} {
		if len(got[kind]) == 0 {
			t.Errorf("no sample Stack uses source kind %s; samples by kind: %v", kind, got)
		}
	}
	if names := got[""]; len(names) > 0 {
		t.Errorf("sample Stacks %v have no single source", names)
	}
}

// kustomization.yaml lists exactly the sample files, so `kubectl apply -k` applies them all.
func TestSamples_Kustomization_ListsEveryFile(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "config", "samples")
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" {
			want = append(want, base)
		}
	}
	got := slices.Clone(k.Resources)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kustomization.yaml resources (-files +listed):\n%s", diff)
	}
}

// userField is the top-level field holding what the user wrote for Stackwright's kinds.
func userField(kind string) (string, bool) {
	switch kind {
	case "Stack", "Update", "Policy", "ClusterPolicy", "StackRollout":
		return "spec", true
	case "Program":
		return "program", true
	}
	return "", false
}
