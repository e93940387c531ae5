package compat_test

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// warningLog collects the warnings the API server returns to the requests made with a
// context from withWarnings.
type warningLog struct {
	mu    sync.Mutex
	texts []string
}

func (l *warningLog) add(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.texts = append(l.texts, text)
}

func (l *warningLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.texts)
}

type warningLogKey struct{}

// withWarnings returns a context whose requests record their warnings in l. One client
// serves every parallel subtest, so the warnings must follow the request, not the client.
func withWarnings(ctx context.Context, l *warningLog) context.Context {
	return context.WithValue(ctx, warningLogKey{}, l)
}

// contextWarnings hands each warning to the warningLog of its request's context, and drops
// warnings of requests without one (discovery, say).
type contextWarnings struct{}

func (contextWarnings) HandleWarningHeaderWithContext(ctx context.Context, _ int, _ string, text string) {
	if l, ok := ctx.Value(warningLogKey{}).(*warningLog); ok {
		l.add(text)
	}
}

// warningClient returns a client whose warnings go to the warningLog of each request's
// context.
func warningClient(t *testing.T) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = contextWarnings{}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatalf("failed to create client: %v", err)
	}
	return c
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// readDocs splits a YAML file into its documents, skipping empty and comment-only ones.
func readDocs(path string) ([]*unstructured.Unstructured, error) {
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

// probePrefix names the Stacks that check whether the guidance policies are in effect.
const probePrefix = "compat-probe-"

// installGuidance installs copies of the admission policies and bindings that
// config/admission ships, bound to namespace ns only so that no other test sees their
// warnings, and returns once all of them are in effect.
//
// Each policy copy gets one more validation that warns about probe Stacks alone: a policy
// is compiled as a whole, so once a probe draws its warning, all the policy's own
// validations are in effect too. Probing with an ordinary Stack instead would depend on
// what the policy warns about, which is exactly what changes.
func installGuidance(ctx context.Context, t *testing.T, c client.Client, ns, root string) {
	t.Helper()
	policies, bindings, err := readGuidance(filepath.Join(root, "config", "admission"))
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) == 0 {
		t.Fatal("config/admission ships no ValidatingAdmissionPolicy; the suite expects the guidance policy")
	}
	// Neutral names: the API server quotes them in every warning, and a policy name with
	// "stack" in it would match warning substrings such as "spec.stack".
	renamed := map[string]string{}
	var objs []client.Object
	var probes []string
	for i, p := range policies {
		name := fmt.Sprintf("compat-%s-%d", ns, i)
		renamed[p.Name] = name
		p.Name = name
		probe := fmt.Sprintf("compat probe of policy %d", i)
		p.Spec.Validations = append(p.Spec.Validations, admissionv1.Validation{
			Expression: fmt.Sprintf("!object.metadata.name.startsWith('%s')", probePrefix),
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
		b.Name = fmt.Sprintf("compat-%s-binding-%d", ns, i)
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

// readGuidance reads the policies and bindings listed in dir's kustomization.
func readGuidance(dir string) ([]*admissionv1.ValidatingAdmissionPolicy, []*admissionv1.ValidatingAdmissionPolicyBinding, error) {
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
		docs, err := readDocs(filepath.Join(dir, r))
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
		log := &warningLog{}
		probe := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "pulumi.com/v1",
			"kind":       "Stack",
			"metadata":   map[string]any{"name": fmt.Sprintf("%s%d", probePrefix, n), "namespace": ns},
			"spec":       map[string]any{"stack": "dev", "programRef": map[string]any{"name": "probe"}},
		}}
		if err := c.Create(withWarnings(ctx, log), probe); err != nil {
			return fmt.Errorf("failed to create probe Stack: %w", err)
		}
		got := log.get()
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
