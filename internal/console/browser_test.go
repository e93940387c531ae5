package console_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/console"
	"github.com/stackwright/stackwright/internal/kubectlplugin"
	"github.com/stackwright/stackwright/internal/manager"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// One real manager (controllers, local executor, real pulumi engine with the test provider)
// serves every test of the package; each test works in its own namespace and drives a
// headless Chromium against a console of its own.
var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env, kubetest.Manager(setupManager)) }

func setupManager(ctx context.Context, e *kubetest.Env, dir string) (ctrl.Manager, error) {
	bin, err := repo.Bin()
	if err != nil {
		return nil, err
	}
	if err := repo.RequireBinaries(bin, "pulumi", "pulumi-language-yaml", "pulumi-resource-stackwright-testing"); err != nil {
		return nil, err
	}
	mgr, err := e.NewManager(ctrl.Options{})
	if err != nil {
		return nil, err
	}
	opts := manager.DefaultOptions()
	opts.DataDir, opts.PulumiBin = dir, bin
	opts.RetryBase = time.Second
	// Every test has a namespace of its own, and the tests trust each other.
	opts.NoTenantIsolation = true
	opts.TemplateAPIGroups = []string{templateGroup}
	if err := manager.Setup(ctx, mgr, opts); err != nil {
		return nil, err
	}
	return mgr, nil
}

// templateGroup is the API group the templates of the tests define their kinds in.
const templateGroup = "console.test.stackwright.dev"

// chromium is Debian's chromium package, which CI installs (.ci/run).
const chromium = "/usr/bin/chromium"

// wait bounds what the tests wait for: engine runs take seconds each, a page's update
// after a change well under one.
const wait = 3 * time.Minute

// screenshots is where the screenshots the tests take go: docs/console when
// STACKWRIGHT_CONSOLE_SCREENSHOTS=1 (how the documentation's are made), else the test's
// temporary directory.
func screenshots(t *testing.T) string {
	t.Helper()
	if os.Getenv("STACKWRIGHT_CONSOLE_SCREENSHOTS") != "1" {
		return t.TempDir()
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts a headless Chromium of the test's own and returns its tab, closed when
// the test ends.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("the console's browser tests need Debian's chromium package (apt-get install chromium): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1440, 900),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	// Without a timeout: the first action's context is the browser's lifetime.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("failed to start %s: %v", chromium, err)
	}
	return ctx
}

// run runs actions in the tab, in order, within wait.
func run(t *testing.T, tab context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, wait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// value runs the action in the tab, within wait, and returns its value.
func value[T any](t *testing.T, tab context.Context, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, wait)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// serve runs `kubectl stackwright ui`'s server for the user cfg authenticates, with
// namespace as the kubeconfig's, until the test ends, and returns the address it printed.
func serve(t *testing.T, cfg *rest.Config, namespace string) string {
	t.Helper()
	e, err := kubectlplugin.Connect(cfg, env.Scheme, namespace, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- console.Serve(ctx, e, console.DefaultAddress, w, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console: %v", err)
		}
	})
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if u, ok := strings.CutPrefix(strings.TrimSpace(lines.Text()), "http://"); ok {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return "http://" + u
		}
	}
	t.Fatalf("the console printed no address: %v", lines.Err())
	return ""
}

// base is the console's address without the token.
func base(url string) string {
	u, _, _ := strings.Cut(url, "/?")
	return u
}

// open loads the console at url (which sets the cookie) and shows the page of hash.
func open(t *testing.T, tab context.Context, url, hash string) {
	t.Helper()
	run(t, tab, chromedp.Navigate(url), chromedp.WaitVisible(`nav[aria-label="Pages"]`))
	if loc := value(t, tab, chromedp.Location()); strings.Contains(loc, "token") {
		t.Errorf("the token stayed in the address bar: %s", loc)
	}
	show(t, tab, hash)
}

// show switches the page to hash, as following a link does.
func show(t *testing.T, tab context.Context, hash string) {
	t.Helper()
	run(t, tab, chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = %q", hash)))
}

// screenshot saves the whole page as name.png.
func screenshot(t *testing.T, tab context.Context, dir, name string) {
	t.Helper()
	png := value(t, tab, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// textOf is the text of the first element sel matches, waiting for it.
func textOf(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	return value(t, tab, chromedp.Text(sel, chromedp.NodeVisible))
}

// jsonValue is v as a JSON value.
func jsonValue(v string) apiextensionsv1.JSON {
	return apiextensionsv1.JSON{Raw: fmt.Appendf(nil, "%q", v)}
}

func literal(v string) pulumiv1.ResourceRef {
	return pulumiv1.ResourceRef{Type: pulumiv1.ResourceSelectorLiteral, ResourceSelector: pulumiv1.ResourceSelector{Literal: &pulumiv1.LiteralRef{Value: v}}}
}

// fileStack creates a Program whose one resource is a test-provider file, and a Stack of
// it; the provider writes under a directory of the test's.
func fileStack(t *testing.T, ns, name, content string, approval pulumiv1.ApprovalMode) *pulumiv1.Stack {
	t.Helper()
	g := NewWithT(t)
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	prog.Program.Resources = map[string]pulumiv1.Resource{"greeting": {
		Type:       "stackwright-testing:index:File",
		Properties: map[string]apiextensionsv1.JSON{"path": jsonValue(name + ".txt"), "content": jsonValue(content)},
	}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"digest": jsonValue("${greeting.sha256}")}
	st := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: pulumiv1.StackSpec{
			Stack: name, ProgramRef: &pulumiv1.ProgramReference{Name: name},
			EnvRefs:     map[string]pulumiv1.ResourceRef{"STACKWRIGHT_TESTING_ROOT": literal(t.TempDir())},
			Stackwright: &pulumiv1.StackwrightSpec{Approval: approval},
		},
	}
	g.Expect(env.Client.Create(t.Context(), prog)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), st)).To(Succeed())
	return st
}

func getStack(g Gomega, st *pulumiv1.Stack) *pulumiv1.Stack {
	got := &pulumiv1.Stack{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(st), got)).To(Succeed())
	return got
}

// waitAwaiting waits until st awaits approval, and returns the preview awaiting it.
func waitAwaiting(t *testing.T, st *pulumiv1.Stack) string {
	t.Helper()
	var preview string
	NewWithT(t).Eventually(func(g Gomega) {
		got := getStack(g, st)
		g.Expect(got.Status.Stackwright).NotTo(BeNil())
		a := got.Status.Stackwright.Approval
		g.Expect(a).NotTo(BeNil())
		g.Expect(a.State).To(Equal(pulumiv1.ApprovalAwaiting))
		preview = a.Preview
	}).WithTimeout(wait).WithPolling(250*time.Millisecond).Should(Succeed(), "Stack %s never awaited approval", st.Name)
	return preview
}

// waitReady waits until st is Ready, and returns it.
func waitReady(t *testing.T, st *pulumiv1.Stack) *pulumiv1.Stack {
	t.Helper()
	var got *pulumiv1.Stack
	NewWithT(t).Eventually(func(g Gomega) {
		got = getStack(g, st)
		g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "conditions: %v", got.Status.Conditions)
	}).WithTimeout(wait).WithPolling(250*time.Millisecond).Should(Succeed(), "Stack %s never got Ready", st.Name)
	return got
}

// userConfig is a connection as user, who holds rules in namespace (none when rules is
// empty), for the test.
func userConfig(t *testing.T, user, namespace string, rules ...rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	if len(rules) > 0 {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user}, Rules: rules}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}
		for _, o := range []client.Object{role, binding} {
			if err := env.Client.Create(t.Context(), o); err != nil {
				t.Fatalf("failed to create %T %s: %v", o, o.GetName(), err)
			}
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

// fetch GETs path of the console with the token, and returns the body.
func fetch(t *testing.T, url, path string) string {
	t.Helper()
	_, token, _ := strings.Cut(url, "/?")
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	res, err := http.Get(base(url) + path + sep + token)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The fleet lists the Stacks, and a Stack that becomes Ready shows as Ready on the page
// without it being loaded again.
func TestConsole_Fleet_StackTurningReadyShowsWithoutReload(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	url := serve(t, env.Config, ns)
	tab := browser(t)
	open(t, tab, url, "#/")
	run(t, tab, chromedp.WaitVisible(`#filter`), chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`))

	// Created once the page is up: the page learns of it from the event stream alone.
	st := fileStack(t, ns, "hello", "hello", pulumiv1.ApprovalAuto)
	run(t, tab, chromedp.SendKeys(`#filter`, ns+"/"))
	row := fmt.Sprintf(`tr[data-stack="%s/hello"]`, ns)
	run(t, tab, chromedp.WaitVisible(row))
	waitReady(t, st)
	run(t, tab, chromedp.WaitVisible(row+` .badge.s-Ready`))

	if !value(t, tab, chromedp.Evaluate[bool](`window.sameDocument === true`)) {
		t.Error("the page was loaded again")
	}
	g := NewWithT(t)
	g.Expect(textOf(t, tab, row)).To(ContainSubstring("up succeeded"))
	g.Expect(textOf(t, tab, ".counts")).To(MatchRegexp(`\d+ Ready`))
}

// The plan page of a Manual-approval Stack shows the previewed change; Approve applies
// exactly that plan: the Stack's next up is held to the preview shown, and performs its
// steps. The Stack page then shows the Update timeline, and the up's page its log. The next
// change (a resource updated, one added) shows on the plan page grouped by operation, with
// the changed property, and Reject applies nothing of it.
func TestConsole_Plan_ApproveAppliesTheReviewedPlanRejectNothing(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := env.Namespace(t)
	st := fileStack(t, ns, "gated", "v1", pulumiv1.ApprovalManual)
	preview := waitAwaiting(t, st)
	url := serve(t, env.Config, ns)
	tab := browser(t)
	shots := screenshots(t)

	plan := fmt.Sprintf("#/stacks/%s/gated/plan", ns)
	open(t, tab, url, plan)
	run(t, tab, chromedp.WaitVisible(`.group.op-create`))
	g.Expect(textOf(t, tab, `.group.op-create`)).To(ContainSubstring("greeting"))
	g.Expect(textOf(t, tab, `#preview`)).To(ContainSubstring(preview))

	run(t, tab, chromedp.Click(`#approve`, chromedp.NodeVisible), chromedp.WaitVisible(`#flash .done`))
	g.Expect(textOf(t, tab, `#flash`)).To(ContainSubstring("approved the change previewed by Update " + preview))
	got := waitReady(t, st)
	g.Expect(got.Annotations).To(HaveKeyWithValue(pulumiv1.ApproveAnnotation, preview))
	up := &v1alpha1.Update{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: got.Status.LastUpdate.Name}, up)).To(Succeed())
	g.Expect(up.Spec.Type).To(Equal(v1alpha1.UpdateTypeUp))
	g.Expect(up.Spec.Options).NotTo(BeNil())
	g.Expect(up.Spec.Options.Plan).To(Equal(preview), "the up is not held to the plan approved")
	p := &v1alpha1.Update{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: preview}, p)).To(Succeed())
	g.Expect(up.Status.Steps).To(Equal(p.Status.Steps), "the up's steps differ from the plan's")

	// The plan page, still shown, follows: the change is Approved, nothing left to decide.
	run(t, tab, chromedp.WaitVisible(`h1 .badge.s-Approved`))
	g.Expect(value(t, tab, chromedp.Evaluate[int](`document.querySelectorAll('#approve, #reject').length`))).To(BeZero())

	show(t, tab, fmt.Sprintf("#/stacks/%s/gated", ns))
	run(t, tab, chromedp.WaitVisible(`h1 .badge.s-Ready`), chromedp.WaitVisible(`.timeline`))
	timeline := textOf(t, tab, `.timeline`)
	g.Expect(timeline).To(ContainSubstring(preview))
	g.Expect(timeline).To(ContainSubstring("held to the plan of " + preview))
	screenshot(t, tab, shots, "stack")

	run(t, tab, chromedp.Click(fmt.Sprintf(`.timeline a[href$="/%s"]`, up.Name), chromedp.NodeVisible), chromedp.WaitVisible(`pre.log`))
	g.Expect(textOf(t, tab, `.meta`)).To(ContainSubstring("the Update's log tail"))
	g.Expect(up.Status.LogTail).NotTo(BeEmpty())
	g.Expect(textOf(t, tab, `pre.log`)).To(ContainSubstring(lastLine(up.Status.LogTail)))
	screenshot(t, tab, shots, "update")

	prog := &pulumiv1.Program{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "gated"}, prog)).To(Succeed())
	prog.Program.Resources["greeting"].Properties["content"] = jsonValue("v2")
	prog.Program.Resources["farewell"] = pulumiv1.Resource{
		Type:       "stackwright-testing:index:File",
		Properties: map[string]apiextensionsv1.JSON{"path": jsonValue("farewell.txt"), "content": jsonValue("bye")},
	}
	g.Expect(env.Client.Update(t.Context(), prog)).To(Succeed())
	second := waitAwaiting(t, st)
	g.Expect(second).NotTo(Equal(preview))
	show(t, tab, plan)
	run(t, tab, chromedp.WaitVisible(`.group.op-update`), chromedp.WaitVisible(`#reject`))
	g.Expect(textOf(t, tab, `.group.op-update`)).To(And(ContainSubstring("greeting"), ContainSubstring("content")))
	g.Expect(textOf(t, tab, `.group.op-create`)).To(ContainSubstring("farewell"))
	screenshot(t, tab, shots, "plan")

	run(t, tab, chromedp.Click(`#reject`, chromedp.NodeVisible), chromedp.WaitVisible(`#flash .done`))
	g.Expect(textOf(t, tab, `#flash`)).To(ContainSubstring("rejected the change previewed by Update " + second))
	NewWithT(t).Eventually(func(g Gomega) {
		c := apimeta.FindStatusCondition(getStack(g, st).Status.Conditions, pulumiv1.ConditionStalled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(pulumiv1.ReasonApprovalRejected))
	}).WithTimeout(wait).WithPolling(250 * time.Millisecond).Should(Succeed())
	run(t, tab, chromedp.WaitVisible(`h1 .badge.s-Rejected`))
	var updates v1alpha1.UpdateList
	g.Expect(env.Client.List(t.Context(), &updates, client.InNamespace(ns))).To(Succeed())
	for _, u := range updates.Items {
		if u.Spec.Type == v1alpha1.UpdateTypeUp {
			g.Expect(u.Name).To(Equal(up.Name), "Update %s applied a change nobody approved", u.Name)
		}
	}
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Someone without rights sees the API server's Forbidden, verbatim, and the page goes on:
// a user with no rights at all on the fleet, and a user who may read a Stack but not
// change it on the plan's Approve.
func TestConsole_Forbidden_ShowsTheAPIsMessage(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := env.Namespace(t)
	st := fileStack(t, ns, "guarded", "v1", pulumiv1.ApprovalManual)

	nobody := serve(t, userConfig(t, "nobody", ns), ns)
	tab := browser(t)
	open(t, tab, nobody, "#/")
	run(t, tab, chromedp.WaitVisible(`.error`))
	g.Expect(textOf(t, tab, `.error`)).To(ContainSubstring(fmt.Sprintf(`stacks.pulumi.com is forbidden: User "nobody" cannot list resource "stacks" in API group "pulumi.com" in the namespace "%s"`, ns)))
	// The page still works: another page shows its own refusal.
	show(t, tab, "#/rollouts")
	run(t, tab, chromedp.WaitVisible(`h1`), chromedp.WaitVisible(`.error`))
	g.Expect(textOf(t, tab, `h1`)).To(Equal("Rollouts"))
	g.Expect(textOf(t, tab, `.error`)).To(ContainSubstring(`cannot list resource "stackrollouts"`))

	preview := waitAwaiting(t, st)
	read := rbacv1.PolicyRule{APIGroups: []string{pulumiv1.GroupVersion.Group, v1alpha1.GroupVersion.Group},
		Resources: []string{"stacks", "updates"}, Verbs: []string{"get", "list", "watch"}}
	viewer := serve(t, userConfig(t, "viewer", ns, read), ns)
	tab2 := browser(t)
	open(t, tab2, viewer, "#/")
	run(t, tab2, chromedp.WaitVisible(fmt.Sprintf(`tr[data-stack="%s/guarded"]`, ns)))
	g.Expect(textOf(t, tab2, `.notice`)).To(ContainSubstring("Showing namespace " + ns + " only"))
	show(t, tab2, fmt.Sprintf("#/stacks/%s/guarded/plan", ns))
	run(t, tab2, chromedp.Click(`#approve`, chromedp.NodeVisible), chromedp.WaitVisible(`#flash .error`))
	g.Expect(textOf(t, tab2, `#flash .error`)).To(ContainSubstring(fmt.Sprintf(`stacks.pulumi.com "guarded" is forbidden: User "viewer" cannot patch resource "stacks" in API group "pulumi.com" in the namespace "%s"`, ns)))
	screenshot(t, tab2, screenshots(t), "forbidden")
	g.Expect(getStack(g, st).Annotations).NotTo(HaveKey(pulumiv1.ApproveAnnotation))
	g.Expect(waitAwaiting(t, st)).To(Equal(preview))
}

// A secret reaches the Stack twice (a clear-text spec.secrets value, and the secret output
// it becomes); neither the pages nor the JSON nor the event stream ever carry it.
func TestConsole_Secrets_CanaryNeverServed(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := env.Namespace(t)
	const canary = "canary-5f1d0c3e9b7a"
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vault"}}
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"password": {Type: "String"}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"password": jsonValue("${password}"), "plain": jsonValue("visible")}
	st := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vault"},
		Spec: pulumiv1.StackSpec{Stack: "vault", ProgramRef: &pulumiv1.ProgramReference{Name: "vault"},
			Secrets: map[string]string{"password": canary}},
	}
	g.Expect(env.Client.Create(t.Context(), prog)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), st)).To(Succeed())
	got := waitReady(t, st)
	// The canary is in the stack: its output is secret, and masked in the status.
	g.Expect(string(got.Status.Outputs["password"].Raw)).To(Equal(`"[secret]"`))
	g.Expect(string(got.Status.Outputs["plain"].Raw)).To(Equal(`"visible"`))

	url := serve(t, env.Config, ns)
	tab := browser(t)
	open(t, tab, url, fmt.Sprintf("#/stacks/%s/vault", ns))
	run(t, tab, chromedp.WaitVisible(`h1 .badge.s-Ready`))
	g.Expect(textOf(t, tab, `section[aria-labelledby="h-outputs"]`)).To(And(ContainSubstring("secret"), ContainSubstring("visible")))
	g.Expect(value(t, tab, chromedp.OuterHTML(`html`))).NotTo(ContainSubstring(canary), "the Stack page")
	// The same page as someone whose system prefers dark colours sees it.
	run(t, tab, chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		_, err := cdp.Call(ctx, target, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}))
	g.Expect(value(t, tab, chromedp.Evaluate[bool](`matchMedia('(prefers-color-scheme: dark)').matches`))).To(BeTrue())
	screenshot(t, tab, screenshots(t), "stack-dark")

	stream := events(t, url)
	// A change, so the stream carries an event about the Stack.
	g.Expect(env.Client.Patch(t.Context(), got, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"example.com/touched":"yes"}}}`)))).To(Succeed())
	var seen strings.Builder
	deadline := time.After(wait)
	for !strings.Contains(seen.String(), `"name":"vault"`) {
		select {
		case line := <-stream:
			seen.WriteString(line + "\n")
		case <-deadline:
			t.Fatalf("no event about the Stack; the stream said:\n%s", seen.String())
		}
	}
	g.Expect(seen.String()).NotTo(ContainSubstring(canary), "the event stream")

	served := map[string]string{}
	for _, p := range []string{"/", "/assets/app.js", "/api/fleet", "/api/stacks/" + ns + "/vault", "/api/stacks/" + ns + "/vault/plan", "/api/rollouts", "/api/templates"} {
		served[p] = fetch(t, url, p)
	}
	var updates v1alpha1.UpdateList
	g.Expect(env.Client.List(t.Context(), &updates, client.InNamespace(ns))).To(Succeed())
	g.Expect(updates.Items).NotTo(BeEmpty())
	for _, u := range updates.Items {
		p := "/api/updates/" + ns + "/" + u.Name
		served[p] = fetch(t, url, p)
	}
	g.Expect(served["/api/stacks/"+ns+"/vault"]).To(ContainSubstring(`{"name":"password","secret":true}`))
	for p, body := range served {
		g.Expect(body).NotTo(ContainSubstring(canary), "GET %s", p)
	}
}

// events reads the console's event stream until the test ends, a line at a time.
func events(t *testing.T, url string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, token, _ := strings.Cut(url, "/?")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base(url)+"/api/events?"+token, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		t.Fatalf("event stream: %s", res.Status)
	}
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(res.Body)
		for s.Scan() {
			select {
			case lines <- s.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return lines
}

// setOutput sets the Program's output version to v: a new revision for its Stacks.
func setOutput(t *testing.T, prog *pulumiv1.Program, v string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(prog), prog); err != nil {
			return err
		}
		prog.Program.Outputs = map[string]apiextensionsv1.JSON{"version": jsonValue(v)}
		return env.Client.Update(t.Context(), prog)
	}).WithTimeout(wait).Should(Succeed())
}

// The Rollout page shows a rollout's waves as columns with their Stacks as cards, the gate
// it waits at and why; Promote, pressed there, opens the next wave, and the page follows
// the rollout to its end.
func TestConsole_Rollout_PromoteOpensTheNextWave(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := env.Namespace(t)
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"version": jsonValue("v1")}
	g.Expect(env.Client.Create(t.Context(), prog)).To(Succeed())
	var stacks []*pulumiv1.Stack
	for _, n := range []struct{ name, ring string }{{"eu-canary", "0"}, {"eu-main", "1"}, {"us-main", "1"}} {
		st := &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n.name, Labels: map[string]string{"app": "shop", "ring": n.ring}},
			Spec:       pulumiv1.StackSpec{Stack: n.name, ProgramRef: &pulumiv1.ProgramReference{Name: "shared"}},
		}
		g.Expect(env.Client.Create(t.Context(), st)).To(Succeed())
		stacks = append(stacks, st)
	}
	for _, st := range stacks {
		waitReady(t, st)
	}
	ro := &v1alpha1.StackRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: v1alpha1.StackRolloutSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}},
			Waves:    v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1"}}},
			Gates:    v1alpha1.RolloutGates{Approval: v1alpha1.RolloutApprovalManual},
		},
	}
	g.Expect(env.Client.Create(t.Context(), ro)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutIdle))
	}).WithTimeout(wait).WithPolling(250*time.Millisecond).Should(Succeed(), "the rollout takes the deployed revision as stable")

	url := serve(t, env.Config, ns)
	tab := browser(t)
	open(t, tab, url, "#/rollouts")
	run(t, tab, chromedp.Click(fmt.Sprintf(`a[href="#/rollouts/%s/shop"]`, ns), chromedp.NodeVisible), chromedp.WaitVisible(`h1 .badge.s-Idle`))

	setOutput(t, prog, "v2")
	run(t, tab, chromedp.WaitVisible(`#promote`))
	g.Expect(textOf(t, tab, `.callout`)).To(ContainSubstring("AwaitingPromotion"))
	g.Expect(textOf(t, tab, `section[aria-label="wave 0"]`)).To(And(ContainSubstring("eu-canary"), ContainSubstring("at target")))
	g.Expect(textOf(t, tab, `section[aria-label="wave 1"]`)).To(And(ContainSubstring("eu-main"), ContainSubstring("us-main"), ContainSubstring("waiting")))
	g.Expect(textOf(t, tab, `.actions`)).To(ContainSubstring("Pause is not available yet"))
	screenshot(t, tab, screenshots(t), "rollout")

	run(t, tab, chromedp.Click(`#promote`, chromedp.NodeVisible), chromedp.WaitVisible(`#flash .done`))
	g.Expect(textOf(t, tab, `#flash`)).To(ContainSubstring(`requested promotion of wave "0"`))
	run(t, tab, chromedp.WaitVisible(`h1 .badge.s-Idle`))
	for _, st := range stacks {
		g.Expect(getStack(g, st).Status.LastUpdate.LastSuccessfulCommit).To(Equal("generation/2"), "Stack %s", st.Name)
	}

	// The fleet's screenshot is taken last, by the slowest test: the other tests' Stacks
	// are on it too, in their various states.
	show(t, tab, "#/")
	run(t, tab, chromedp.WaitVisible(fmt.Sprintf(`tr[data-stack="%s/eu-canary"] a[href="#/rollouts/%s/shop"]`, ns, ns)))
	screenshot(t, tab, screenshots(t), "fleet")
}

// The Templates page shows each template's kind, versions and revisions, and its
// instances by namespace with how many are behind the latest revision.
func TestConsole_Templates_InstancesBehindByNamespace(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	platform, team1, team2 := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "queue"}}
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"size": {Type: "Number"}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"size": jsonValue("${size}")}
	g.Expect(env.Client.Create(t.Context(), prog)).To(Succeed())
	tmpl := &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "queues-" + platform},
		Spec: v1alpha1.StackTemplateSpec{
			API:            v1alpha1.TemplateAPI{Group: templateGroup, Kind: "Queue", Plural: "queues"},
			Parameters:     &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"size":{"type":"integer","default":1}}}`)},
			Namespace:      platform,
			Stack:          apiextensionsv1.JSON{Raw: []byte(`{"stack":"queues","programRef":{"name":"queue"}}`)},
			Config:         []v1alpha1.TemplateConfig{{Key: "size", Parameter: "size"}},
			UpdateStrategy: v1alpha1.TemplateUpdateStrategy{Type: v1alpha1.UpdateStrategyHold},
		},
	}
	g.Expect(env.Client.Create(t.Context(), tmpl)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tmpl) })
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(tmpl.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "conditions: %v", tmpl.Status.Conditions)
	}).WithTimeout(wait).WithPolling(250*time.Millisecond).Should(Succeed(), "the template is served")
	var instances []*unstructured.Unstructured
	for _, in := range []struct{ ns, name string }{{team1, "orders"}, {team1, "billing"}, {team2, "events"}} {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": templateGroup + "/" + v1alpha1.DefaultTemplateVersion, "kind": "Queue",
			"metadata": map[string]any{"namespace": in.ns, "name": in.name},
			"spec":     map[string]any{"parameters": map[string]any{"size": int64(2)}},
		}}
		g.Expect(env.Client.Create(t.Context(), u)).To(Succeed())
		instances = append(instances, u)
	}
	g.Eventually(func(g Gomega) {
		for _, u := range instances {
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(u), u)).To(Succeed())
			conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			g.Expect(conditions).To(ContainElement(And(HaveKeyWithValue("type", pulumiv1.ConditionReady), HaveKeyWithValue("status", "True"))), "%s: %v", u.GetName(), u.Object["status"])
		}
	}).WithTimeout(wait).WithPolling(250*time.Millisecond).Should(Succeed(), "the instances become Ready")

	url := serve(t, env.Config, platform)
	tab := browser(t)
	open(t, tab, url, "#/templates")
	section := fmt.Sprintf(`section[aria-label="Queue %s"]`, tmpl.Name)
	run(t, tab, chromedp.WaitVisible(section))
	g.Expect(textOf(t, tab, section)).To(And(ContainSubstring(team1+"\t2\t0"), ContainSubstring(team2+"\t1\t0"), ContainSubstring("none behind")))

	// A new revision: held, the instances stay at the first, and the page follows.
	g.Eventually(func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(tmpl), tmpl); err != nil {
			return err
		}
		tmpl.Spec.Stack = apiextensionsv1.JSON{Raw: []byte(`{"stack":"queues","programRef":{"name":"queue"},"refresh":true}`)}
		return env.Client.Update(t.Context(), tmpl)
	}).WithTimeout(wait).Should(Succeed())
	run(t, tab, chromedp.WaitVisible(section+` .behind`))
	g.Expect(textOf(t, tab, section)).To(And(ContainSubstring("3 behind"), ContainSubstring(team1+"\t2\t2"), ContainSubstring(team2+"\t1\t1")))
	screenshot(t, tab, screenshots(t), "templates")
}
