package engine

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/internal/testing/pulumicloud"
)

// cloudRequest is f's request for op on stack acme/enginetest/dev of a fake Pulumi Cloud.
func cloudRequest(f *fixture, cloud *pulumicloud.Service, op Operation, envs ...string) Request {
	r := f.request(op)
	r.Stack = "acme/enginetest/dev"
	r.Env["PULUMI_BACKEND_URL"] = cloud.URL
	r.Env["PULUMI_ACCESS_TOKEN"] = cloud.Token
	r.Environments = envs
	return r
}

// On Pulumi Cloud (a fake of the endpoints the CLI calls, internal/testing/pulumicloud)
// the CLI opens the environments a request imports as one import list, in the request's
// order with the names as given, and their pulumiConfig values reach the program: a later
// import wins over an earlier one, and the request's own config wins over both.
func TestEngine_Run_ESCEnvironmentsReachProgramOnPulumiCloud(t *testing.T) {
	t.Parallel()
	cloud := pulumicloud.New(t, "acme", "pul-fake-token")
	cloud.SetEnvironment("platform/base", map[string]any{"greeting": "from base"})
	cloud.SetEnvironment("default/overrides", map[string]any{"greeting": "from overrides"})
	f := newFixture(t, filesProgram)
	ctx := testContext(t)
	envs := []string{"platform/base", "overrides"}

	res := f.mustRun(ctx, cloudRequest(f, cloud, OpUp, envs...))
	f.requireContent("a.txt", "from overrides")
	f.requireContent("b.txt", "from overrides world")
	if diff := cmp.Diff(map[string]int{"create": 4}, res.Changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if tok, ok := res.Outputs["token"]; !ok || !tok.Secret || len(tok.Value.(string)) != 24 {
		t.Errorf("token output = %+v; want a secret of 24 characters, read back through the service's secrets provider", tok)
	}

	// A fresh work dir, as every run has, and a stack the caller knows exists.
	f.work = f.workDir(filesProgram)
	r := cloudRequest(f, cloud, OpPreview, envs...)
	r.StackExists = true
	r.Config = map[string]ConfigValue{"greeting": {Value: json.RawMessage(`"from the Stack"`)}}
	res = f.mustRun(ctx, r)
	i := slices.IndexFunc(res.Steps, func(s Step) bool { return s.URN == "urn:pulumi:dev::enginetest::stackwright-testing:index:File::a" })
	if i < 0 || res.Steps[i].Op != "update" || res.Steps[i].Inputs["content"] != "from the Stack" {
		t.Errorf("preview steps = %+v; want a's content updated to the Stack's own greeting", res.Steps)
	}

	// Each operation opened the environment once, with the import list as requested.
	if diff := cmp.Diff([][]string{envs, envs}, cloud.Opened()); diff != "" {
		t.Errorf("imports opened (-want +got):\n%s", diff)
	}
	if u := cloud.Unanswered(); len(u) > 0 {
		t.Errorf("the fake did not answer %q", u)
	}
}

// An environment ESC does not open (here: one that does not exist) fails the operation
// with ESC's diagnostics in the message, before anything changes. It is Permanent, not
// BackendUnsupported: the environment may be created, or access to it granted.
func TestEngine_Run_UnknownESCEnvironmentIsPermanentAndSaysWhich(t *testing.T) {
	t.Parallel()
	cloud := pulumicloud.New(t, "acme", "pul-fake-token")
	cloud.SetEnvironment("platform/base", map[string]any{"greeting": "from base"})
	f := newFixture(t, filesProgram)
	_, err := f.eng.Run(testContext(t), cloudRequest(f, cloud, OpUp, "platform/base", "platform/missing"))
	if got := Classify(err); got != ClassPermanent {
		t.Fatalf("Classify(%v) = %q; want Permanent", err, got)
	}
	const want = `failed to update stack acme/enginetest/dev: getting stack configuration: opening environment: too many errors: ` +
		`the fake has no environment "platform/missing"`
	if msg := Message(err); msg != want {
		t.Errorf("Message = %q; want %q", msg, want)
	}
	f.requireGone("a.txt")
	if u := cloud.Unanswered(); len(u) > 0 {
		t.Errorf("the fake did not answer %q", u)
	}
}
