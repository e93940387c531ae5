package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stackwright/stackwright/internal/testing/repo"
)

// Warnings collects the warnings the API server returns to the requests made with a
// context from WithWarnings, or through a rest.Config whose WarningHandler it is.
type Warnings struct {
	mu    sync.Mutex
	texts []string
}

func (w *Warnings) add(text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *Warnings) HandleWarningHeader(_ int, _ string, text string) { w.add(text) }

// Get returns the warnings collected so far.
func (w *Warnings) Get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.texts)
}

type warningsKey struct{}

// WithWarnings returns a context whose requests, made with a client from WarningClient,
// record their warnings in w. The warnings follow the request rather than the client, so
// one client serves parallel subtests.
func WithWarnings(ctx context.Context, w *Warnings) context.Context {
	return context.WithValue(ctx, warningsKey{}, w)
}

// contextWarnings hands each warning to the Warnings of its request's context and drops
// those of requests without one (discovery, say).
type contextWarnings struct{}

func (contextWarnings) HandleWarningHeaderWithContext(ctx context.Context, _ int, _ string, text string) {
	if w, ok := ctx.Value(warningsKey{}).(*Warnings); ok {
		w.add(text)
	}
}

// WarningClient returns a client whose warnings go to the Warnings of each request's
// context (WithWarnings).
func (e *Env) WarningClient(t testing.TB) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(e.Config)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = contextWarnings{}
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		t.Fatalf("failed to create client: %v", err)
	}
	return c
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// ReadDocs splits a YAML file into its objects, skipping empty and comment-only documents.
func ReadDocs(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read manifest: %w", err)
	}
	var docs []*unstructured.Unstructured
	for i, doc := range docSeparator.Split(string(b), -1) {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("failed to convert document %d of %s: %w", i, path, err)
		}
		if string(j) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("failed to decode document %d of %s: %w", i, path, err)
		}
		docs = append(docs, u)
	}
	return docs, nil
}

// GuidanceProbePrefix names the Stacks InstallGuidance creates to see its policies in force;
// a test's own Stacks must not use it.
const GuidanceProbePrefix = "guidance-probe-"

// InstallGuidance installs copies of the ValidatingAdmissionPolicies and bindings that
// config/admission ships, bound to namespace ns only so that no other test sees their
// warnings, and returns once all of them are in force.
//
// Each policy copy gets one more validation that warns about probe Stacks alone: a policy
// is compiled as a whole, so once a probe draws that warning, all the policy's own
// validations are in force too. Probing with an ordinary Stack instead would depend on what
// the policy warns about, which is what the tests using it change.
func InstallGuidance(ctx context.Context, t testing.TB, c client.Client, ns string) {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	policies, bindings, err := ReadAdmission(filepath.Join(root, "config", "admission"))
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) == 0 {
		t.Fatal("config/admission ships no ValidatingAdmissionPolicy")
	}
	// Neutral names: the API server quotes them in every warning, and a policy name with
	// "stack" in it would match warning substrings such as "spec.stack".
	renamed := map[string]string{}
	var objs []client.Object
	var probes []string
	for i, p := range policies {
		name := fmt.Sprintf("guidance-%s-%d", ns, i)
		renamed[p.Name] = name
		p.Name = name
		probe := fmt.Sprintf("guidance probe of policy %d", i)
		p.Spec.Validations = append(p.Spec.Validations, admissionv1.Validation{
			Expression: fmt.Sprintf("!object.metadata.name.startsWith('%s')", GuidanceProbePrefix),
			Message:    probe,
		})
		probes = append(probes, probe)
		objs = append(objs, p)
	}
	for i, b := range bindings {
		policy, ok := renamed[b.Spec.PolicyName]
		if !ok {
			t.Fatalf("binding %s names policy %q, which config/admission does not ship", b.Name, b.Spec.PolicyName)
		}
		delete(renamed, b.Spec.PolicyName)
		b.Name = fmt.Sprintf("guidance-%s-binding-%d", ns, i)
		b.Spec.PolicyName = policy
		if b.Spec.MatchResources == nil {
			b.Spec.MatchResources = &admissionv1.MatchResources{}
		}
		b.Spec.MatchResources.NamespaceSelector = &metav1.LabelSelector{
			MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
		}
		objs = append(objs, b)
	}
	if len(renamed) > 0 {
		t.Fatalf("config/admission ships policies without a binding: %v", renamed)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("failed to create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	if err := awaitProbes(ctx, c, ns, probes); err != nil {
		t.Fatal(err)
	}
}

// InstallProtection installs config/protection's deletion protection policy and binding,
// renamed for namespace ns and bound to it alone, and returns once it refuses to delete a
// protected probe Stack there.
func InstallProtection(ctx context.Context, t testing.TB, c client.Client, ns string) {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	policies, bindings, err := ReadAdmission(filepath.Join(root, "config", "protection"))
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) != 1 || len(bindings) != 1 {
		t.Fatalf("config/protection ships %d policies and %d bindings; want one of each", len(policies), len(bindings))
	}
	p, b := policies[0], bindings[0]
	p.Name = "protection-" + ns
	b.Name, b.Spec.PolicyName = p.Name, p.Name
	b.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
	}}
	for _, o := range []client.Object{p, b} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("failed to create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	// The binding takes a moment to be in force: probe Stacks are deleted until one is not.
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		probe := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "pulumi.com/v1", "kind": "Stack",
			"metadata": map[string]any{"namespace": ns, "name": fmt.Sprintf("protection-probe-%d", i), "annotations": map[string]any{"stackwright.dev/protected": "true"}},
			"spec":     map[string]any{"stack": "probe", "programRef": map[string]any{"name": "probe"}},
		}}
		if err := c.Create(ctx, probe); err != nil {
			t.Fatalf("failed to create probe Stack: %v", err)
		}
		err := c.Delete(ctx, probe)
		if apierrors.IsForbidden(err) {
			return
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("deletion protection not in force in namespace %s: %v", ns, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// ReadAdmission reads the ValidatingAdmissionPolicies and bindings listed in dir's
// kustomization.
func ReadAdmission(dir string) ([]*admissionv1.ValidatingAdmissionPolicy, []*admissionv1.ValidatingAdmissionPolicyBinding, error) {
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read kustomization: %w", err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, nil, fmt.Errorf("failed to decode kustomization: %w", err)
	}
	var policies []*admissionv1.ValidatingAdmissionPolicy
	var bindings []*admissionv1.ValidatingAdmissionPolicyBinding
	for _, r := range k.Resources {
		docs, err := ReadDocs(filepath.Join(dir, r))
		if err != nil {
			return nil, nil, err
		}
		for _, d := range docs {
			var into any
			switch d.GetKind() {
			case "ValidatingAdmissionPolicy":
				p := &admissionv1.ValidatingAdmissionPolicy{}
				policies, into = append(policies, p), p
			case "ValidatingAdmissionPolicyBinding":
				b := &admissionv1.ValidatingAdmissionPolicyBinding{}
				bindings, into = append(bindings, b), b
			default:
				return nil, nil, fmt.Errorf("failed to read %s: unexpected kind %s", r, d.GetKind())
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, into); err != nil {
				return nil, nil, fmt.Errorf("failed to decode %s %s: %w", d.GetKind(), d.GetName(), err)
			}
		}
	}
	return policies, bindings, nil
}

// awaitProbes creates probe Stacks until one draws the probe warning of every policy.
func awaitProbes(ctx context.Context, c client.Client, ns string, probes []string) error {
	deadline := time.Now().Add(time.Minute)
	for n := 0; ; n++ {
		w := &Warnings{}
		probe := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "pulumi.com/v1",
			"kind":       "Stack",
			"metadata":   map[string]any{"name": fmt.Sprintf("%s%d", GuidanceProbePrefix, n), "namespace": ns},
			"spec":       map[string]any{"stack": "dev", "programRef": map[string]any{"name": "probe"}},
		}}
		if err := c.Create(WithWarnings(ctx, w), probe); err != nil {
			return fmt.Errorf("failed to create probe Stack: %w", err)
		}
		got := w.Get()
		missing := slices.DeleteFunc(slices.Clone(probes), func(p string) bool {
			return slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, p) })
		})
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("failed to see the guidance policies take effect: probes " + strings.Join(missing, ", ") + " drew no warning within a minute")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("failed to see the guidance policies take effect: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
