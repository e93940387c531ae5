package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/clip"
	"github.com/stackwright/stackwright/internal/engine"
)

// Source is one policy as evaluation needs it.
type Source struct {
	// Name is how results name the policy: "Policy <namespace>/<name>" or
	// "ClusterPolicy <name>".
	Name        string
	Enforcement v1alpha1.PolicyEnforcement
	Rego        string
	// Version identifies the module's text (UID and generation): compiled modules are
	// kept per version.
	Version string
}

// Input is what a policy judges.
type Input struct {
	Stack   Stack            `json:"stack"`
	Steps   []engine.Step    `json:"steps"`
	Changes map[string]int64 `json:"changes"`
}

// Stack is the Stack's metadata as policies see it.
type Stack struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Revision    string            `json:"revision"`
}

// Limits of one evaluation.
const (
	// evalTimeout bounds a policy's evaluation: a module is code, and may be slow.
	evalTimeout = 5 * time.Second
	// maxMessage bounds a violation's message; maxPerPolicy the messages kept per policy.
	maxMessage   = 512
	maxPerPolicy = 10
)

// deniedBuiltins reach outside the evaluation: the network, or the manager's environment
// and configuration. A policy is written by whoever may create Policies in a namespace,
// and runs in the manager.
var deniedBuiltins = map[string]bool{
	"http.send":          true,
	"net.lookup_ip_addr": true,
	"opa.runtime":        true,
	"trace":              true,
}

// capabilities are OPA's own, less deniedBuiltins, with no network host allowed.
var capabilities = sync.OnceValue(func() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(slices.Clone(c.Builtins), func(b *ast.Builtin) bool { return deniedBuiltins[b.Name] })
	c.AllowNet = []string{}
	return c
})

// Evaluator evaluates policies, keeping the compiled module of each policy's current
// version (one per policy name: a new generation replaces the old one). It is safe for
// concurrent use.
type Evaluator struct {
	mu       sync.Mutex
	compiled map[string]compiled
}

type compiled struct {
	version string
	query   rego.PreparedEvalQuery
	err     error
}

// NewEvaluator returns an Evaluator with nothing compiled yet.
func NewEvaluator() *Evaluator { return &Evaluator{compiled: map[string]compiled{}} }

// Compile compiles a policy's module: it must parse as Rego v1, define the rule deny, and
// use no denied builtin.
func Compile(ctx context.Context, name, module string) (rego.PreparedEvalQuery, error) {
	mod, err := ast.ParseModuleWithOpts(name, module, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return rego.PreparedEvalQuery{}, err
	}
	if !slices.ContainsFunc(mod.Rules, func(r *ast.Rule) bool {
		return r.Head.Name.String() == v1alpha1.PolicyRule || r.Head.Ref().String() == v1alpha1.PolicyRule
	}) {
		return rego.PreparedEvalQuery{}, fmt.Errorf("the module defines no %q rule (a set of messages, e.g. `%s contains msg if { ... }`)", v1alpha1.PolicyRule, v1alpha1.PolicyRule)
	}
	q, err := rego.New(
		rego.Query(mod.Package.Path.String()+"."+v1alpha1.PolicyRule),
		rego.ParsedModule(mod),
		rego.Capabilities(capabilities()),
		rego.SetRegoVersion(ast.RegoV1),
		rego.StrictBuiltinErrors(true),
	).PrepareForEval(ctx)
	if err != nil {
		return rego.PreparedEvalQuery{}, err
	}
	return q, nil
}

func (e *Evaluator) prepare(ctx context.Context, src Source) (rego.PreparedEvalQuery, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.compiled[src.Name]
	if !ok || c.version != src.Version {
		c = compiled{version: src.Version}
		c.query, c.err = Compile(ctx, src.Name, src.Rego)
		e.compiled[src.Name] = c
	}
	return c.query, c.err
}

// Evaluate judges in with every policy of sources, in order. A policy that does not
// compile or whose evaluation fails is an error of the results, never silently passed.
func (e *Evaluator) Evaluate(ctx context.Context, sources []Source, in Input) *v1alpha1.PolicyResults {
	res := &v1alpha1.PolicyResults{}
	if len(sources) == 0 {
		return res
	}
	doc, docErr := document(in)
	for _, src := range sources {
		res.Evaluated = append(res.Evaluated, src.Name)
		msgs, err := e.evaluate(ctx, src, doc, docErr)
		if err != nil {
			res.Errors = appendCapped(res.Errors, v1alpha1.PolicyViolation{Policy: src.Name, Enforcement: v1alpha1.EnforcementMandatory, Message: clip.Line(err.Error(), maxMessage)})
			continue
		}
		for _, m := range msgs {
			res.Violations = appendCapped(res.Violations, v1alpha1.PolicyViolation{Policy: src.Name, Enforcement: src.Enforcement, Message: m})
		}
	}
	return res
}

// evaluate runs one policy on doc, the input document (or docErr, why there is none).
func (e *Evaluator) evaluate(ctx context.Context, src Source, doc any, docErr error) ([]string, error) {
	if docErr != nil {
		return nil, docErr
	}
	q, err := e.prepare(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("failed to compile policy: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, evalTimeout)
	defer cancel()
	rs, err := q.Eval(ctx, rego.EvalInput(doc))
	if err != nil {
		return nil, fmt.Errorf("failed to evaluate policy: %w", err)
	}
	var msgs []string
	for _, r := range rs {
		for _, x := range r.Expressions {
			vals, ok := x.Value.([]any)
			if !ok {
				return nil, fmt.Errorf("failed to evaluate policy: %s is %T, not a set of messages", v1alpha1.PolicyRule, x.Value)
			}
			for _, v := range vals {
				msgs = append(msgs, message(v))
			}
		}
	}
	slices.Sort(msgs)
	if len(msgs) > maxPerPolicy {
		msgs = append(msgs[:maxPerPolicy], fmt.Sprintf("… and %d more", len(msgs)-maxPerPolicy))
	}
	return msgs, nil
}

// document turns in into plain JSON values, as Rego sees input.
func document(in Input) (any, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("failed to encode policy input: %w", err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("failed to decode policy input: %w", err)
	}
	return doc, nil
}

func message(v any) string {
	if s, ok := v.(string); ok {
		return clip.Line(s, maxMessage)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return clip.Text(fmt.Sprint(v), maxMessage)
	}
	return clip.Text(string(b), maxMessage)
}

func appendCapped(list []v1alpha1.PolicyViolation, v v1alpha1.PolicyViolation) []v1alpha1.PolicyViolation {
	if len(list) >= v1alpha1.MaxViolations {
		return list
	}
	return append(list, v)
}

// Key identifies a set of policies (their versions), "" for none: a change judged under
// one key must be judged again under another.
func Key(sources []Source) string {
	if len(sources) == 0 {
		return ""
	}
	vs := make([]string, 0, len(sources))
	for _, s := range sources {
		vs = append(vs, s.Version)
	}
	slices.Sort(vs)
	sum := sha256.Sum256([]byte(strings.Join(vs, "\n")))
	return hex.EncodeToString(sum[:8])
}
