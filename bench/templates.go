package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The templates scenario's StackTemplate: the kind it defines and where its Stacks live.
const (
	// templateGroup is the API group the manager is told to serve templates in
	// (--template-api-groups) when the scenario runs.
	templateGroup  = "bench.stackwright.dev"
	templateKind   = "BenchApp"
	templatePlural = "benchapps"
	templateName   = "bench-apps"
	// templateStack is the template's stack prefix; an instance's stack is
	// <prefix>.<namespace>.<name>, and the plain arm's Stacks are given the same names.
	templateStack = "bench"
	// templateProgram names the one Program of the platform namespace, and the Program of
	// each tenant namespace in the plain arm.
	templateProgram = "bench"
	// templateTenants is how many namespaces the instances (and the plain Stacks) spread over.
	templateTenants = 10
)

var templateGVR = schema.GroupVersionResource{Group: templateGroup, Version: "v1alpha1", Resource: templatePlural}

// tenantNamespaces are the namespaces the templates scenario's instances and plain Stacks
// spread over.
func tenantNamespaces() []string {
	out := make([]string, templateTenants)
	for i := range out {
		out[i] = fmt.Sprintf("bench-tenant-%02d", i)
	}
	return out
}

// templateApps are the namespace/name keys of the N apps of either arm: app-<i> in tenant
// i mod 10, so N/10 each.
func templateApps(n int) []string {
	tenants := tenantNamespaces()
	out := make([]string, n)
	for i := range out {
		out[i] = key(tenants[i%len(tenants)], fmt.Sprintf("app-%05d", i))
	}
	return out
}

// sharedProgram is the bench program for a Program that several Stacks share: its files go
// below ${pulumi.stack}/ of the root, because a template's envRefs are the same for every
// instance and so is STACKWRIGHT_TESTING_ROOT. Both arms run it.
func sharedProgram(ns, name string) *pulumiv1.Program {
	p := benchProgram(ns, name)
	for _, r := range []string{"greeting", "tokenFile"} {
		res := p.Program.Resources[r]
		var path string
		if err := json.Unmarshal(res.Properties["path"].Raw, &path); err != nil {
			panic(err) // benchProgram's own literal
		}
		res.Properties["path"] = *jsonOf("${pulumi.stack}/" + path)
		p.Program.Resources[r] = res
	}
	return p
}

// plainStack is what an instance of the bench template renders, written by hand in the
// tenant's namespace: the same program, stack name, config and root.
func plainStack(ns, name, files string) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: pulumiv1.StackSpec{
			Stack:      fmt.Sprintf("%s.%s.%s", templateStack, ns, name),
			ProgramRef: &pulumiv1.ProgramReference{Name: templateProgram},
			Config:     map[string]apiextensionsv1.JSON{"message": *jsonOf(greetingMessage)},
			EnvRefs:    map[string]pulumiv1.ResourceRef{"STACKWRIGHT_TESTING_ROOT": literal(files)},
		},
	}
}

// benchTemplate is the StackTemplate whose instances are plainStack rendered in the
// platform namespace: parameter message becomes config message.
func benchTemplate(files string) *v1alpha1.StackTemplate {
	stack, err := json.Marshal(map[string]any{
		"stack":      templateStack,
		"programRef": map[string]string{"name": templateProgram},
		"envRefs":    map[string]pulumiv1.ResourceRef{"STACKWRIGHT_TESTING_ROOT": literal(files)},
	})
	if err != nil {
		panic(err) // only literals
	}
	return &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: templateName},
		Spec: v1alpha1.StackTemplateSpec{
			API:        v1alpha1.TemplateAPI{Group: templateGroup, Kind: templateKind, Plural: templatePlural},
			Parameters: jsonOf(map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}}}),
			Namespace:  nsPlatform,
			Stack:      apiextensionsv1.JSON{Raw: stack},
			Config:     []v1alpha1.TemplateConfig{{Key: "message", Parameter: "message"}},
		},
	}
}

func benchInstance(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"parameters": map[string]any{"message": greetingMessage}},
	}}
	u.SetAPIVersion(templateGVR.GroupVersion().String())
	u.SetKind(templateKind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// armResult is what one arm of the templates scenario measured.
type armResult struct {
	creation  time.Duration
	ready     readiness
	runs      int
	runPhases map[string]int
	m         *measurement
}

// templateSetup are the times of the work before each arm's start.
type templateSetup struct {
	plainPrograms, deleted, program, established, ready, accepted time.Duration
	// templateCreated is when the StackTemplate was created, which its times are since.
	templateCreated time.Time
}

// runTemplates measures the same N apps twice, on the same program and over the same ten
// tenant namespaces: first as plain Stacks, then, once those are deleted, as instances of
// one StackTemplate, and compares the times to all Ready.
func (b *bench) runTemplates(ctx context.Context) error {
	n := b.cfg.N
	apps := templateApps(n)
	timeout := b.fleetTimeout(n, b.floorMedian())
	var setup templateSetup
	plain, err := b.plainArm(ctx, apps, timeout, &setup)
	if err != nil {
		return err
	}
	if setup.deleted, err = b.deletePlainArm(ctx, apps); err != nil {
		return err
	}
	dc, err := b.setUpTemplate(ctx, &setup)
	if err != nil {
		return err
	}
	stopWatch, err := b.track.watchInstances(ctx, templateGVR.GroupVersion().WithKind(templateKind))
	if err != nil {
		return err
	}
	defer stopWatch()
	if err := b.acceptInstances(ctx, dc, &setup); err != nil {
		return err
	}
	tmpl, err := b.templateArm(ctx, dc, apps, timeout)
	if err != nil {
		return err
	}
	lag, err := b.instanceLag(ctx)
	if err != nil {
		return err
	}
	b.rep.add(fmt.Sprintf("Templates (N=%d instances vs N plain Stacks, %d namespaces)", n, templateTenants),
		b.templatesReport(plain, tmpl, setup, lag))
	return nil
}

// arm creates the N apps of one arm at once with create and waits until wait says all
// are Ready, measuring the manager meanwhile; its engine runs are the Updates seen in
// runsIn since the start.
func (b *bench) arm(ctx context.Context, what string, apps []string, create func(ns, name string) error,
	wait func(start time.Time) readiness, runsIn ...string,
) (*armResult, error) {
	a := &armResult{m: b.measure(ctx), runPhases: map[string]int{}}
	defer a.m.release()
	var start time.Time
	var err error
	if start, a.creation, err = b.createFleet(ctx, apps, create); err != nil {
		return nil, err
	}
	a.ready = wait(start)
	a.m.end(ctx)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for _, ns := range runsIn {
		for _, u := range b.track.updatesIn(ns, start, time.Now()) {
			a.runs++
			a.runPhases[phaseName(u.phase)]++
		}
	}
	b.say("templates: %s: %d/%d Ready after %s", what, a.ready.ready, len(apps), secs(a.ready.wall))
	return a, nil
}

// plainArm creates a Program in each tenant namespace, then the N Stacks at once, and waits
// until all are Ready.
func (b *bench) plainArm(ctx context.Context, apps []string, timeout time.Duration, setup *templateSetup) (*armResult, error) {
	files := filepath.Join(b.work, "files", "templates-plain")
	t0 := time.Now()
	var keys []client.ObjectKey
	for _, ns := range tenantNamespaces() {
		p := sharedProgram(ns, templateProgram)
		if err := b.cluster.client.Create(ctx, p); err != nil {
			return nil, fmt.Errorf("failed to create Program %s/%s: %w", ns, p.Name, err)
		}
		keys = append(keys, client.ObjectKeyFromObject(p))
	}
	if err := b.waitPrograms(ctx, keys); err != nil {
		return nil, err
	}
	setup.plainPrograms = time.Since(t0)
	b.say("templates: plain arm: creating %d Stacks over %d namespaces (timeout %s)", len(apps), templateTenants, timeout.Round(time.Second))
	return b.arm(ctx, "plain arm", apps, func(ns, name string) error {
		return b.cluster.client.Create(ctx, plainStack(ns, name, files))
	}, func(start time.Time) readiness {
		return b.waitReady(ctx, apps, "", start, timeout, func(ready int) {
			b.say("templates: plain arm: %d/%d Ready after %s; manager %s", ready, len(apps), secs(time.Since(start)), procLine(b.mgr.pid()))
		})
	}, tenantNamespaces()...)
}

// deletePlainArm deletes the plain arm's Stacks (they have no destroyOnFinalize, so no
// engine runs) and Programs, waits until the Stacks are gone, and deletes their Updates,
// which the control plane, having no garbage collector, would otherwise keep for the
// manager to watch during the template arm.
func (b *bench) deletePlainArm(ctx context.Context, apps []string) (time.Duration, error) {
	t0 := time.Now()
	b.say("templates: deleting the plain arm")
	if err := b.forAll(ctx, "delete", apps, func(k string) error {
		ns, name, _ := strings.Cut(k, "/")
		return client.IgnoreNotFound(b.cluster.client.Delete(ctx, &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
	}); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		left := 0
		for _, ns := range tenantNamespaces() {
			var list pulumiv1.StackList
			if err := b.cluster.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return 0, fmt.Errorf("failed to list Stacks: %w", err)
			}
			left += len(list.Items)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d Stacks of the plain arm still there 5 minutes after their deletion", left)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	took := time.Since(t0)
	for _, ns := range tenantNamespaces() {
		if err := b.cluster.client.DeleteAllOf(ctx, &v1alpha1.Update{}, client.InNamespace(ns)); err != nil {
			return 0, fmt.Errorf("failed to delete Updates in %s: %w", ns, err)
		}
		if err := b.cluster.client.Delete(ctx, &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: templateProgram}}); err != nil {
			return 0, fmt.Errorf("failed to delete Program %s/%s: %w", ns, templateProgram, err)
		}
	}
	// What the deletions set off in the manager (Program and Update reconciles, cache
	// events) should be over before the next arm's clock starts.
	if err := pause(ctx, 10*time.Second); err != nil {
		return 0, err
	}
	return took, nil
}

// setUpTemplate creates the platform namespace's Program and the StackTemplate, and waits
// until its kind is served and the template Ready: none of it is in the instances' time.
func (b *bench) setUpTemplate(ctx context.Context, setup *templateSetup) (dynamic.Interface, error) {
	t0 := time.Now()
	prog := sharedProgram(nsPlatform, templateProgram)
	if err := b.cluster.client.Create(ctx, prog); err != nil {
		return nil, fmt.Errorf("failed to create Program %s/%s: %w", nsPlatform, prog.Name, err)
	}
	if err := b.waitPrograms(ctx, []client.ObjectKey{client.ObjectKeyFromObject(prog)}); err != nil {
		return nil, err
	}
	setup.program = time.Since(t0)

	tmpl := benchTemplate(filepath.Join(b.work, "files", "templates-instances"))
	t0 = time.Now()
	setup.templateCreated = t0
	if err := b.cluster.client.Create(ctx, tmpl); err != nil {
		return nil, fmt.Errorf("failed to create StackTemplate %s: %w", tmpl.Name, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crdKey := client.ObjectKey{Name: templatePlural + "." + templateGroup}
	err := pollUntil(ctx, time.Minute, func() (bool, error) {
		if err := b.cluster.client.Get(ctx, crdKey, crd); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to wait for CustomResourceDefinition %s: %w", crdKey.Name, err)
	}
	setup.established = time.Since(t0)
	err = pollUntil(ctx, time.Minute, func() (bool, error) {
		if err := b.cluster.client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl); err != nil {
			return false, err
		}
		return apimeta.IsStatusConditionTrue(tmpl.Status.Conditions, pulumiv1.ConditionReady), nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to wait for StackTemplate %s to be Ready (conditions %v): %w", tmpl.Name, tmpl.Status.Conditions, err)
	}
	setup.ready = time.Since(t0)
	b.say("templates: StackTemplate %s Ready after %s (CustomResourceDefinition Established after %s)", tmpl.Name, secs(setup.ready), secs(setup.established))
	dc, err := dynamic.NewForConfig(b.cluster.cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create dynamic client: %w", err)
	}
	return dc, nil
}

// acceptInstances waits until the API server accepts an instance (a server-side dry run):
// its first write of a new kind waits about 2 s (seen on every run), which a tenant
// creating an instance any time later never sees.
func (b *bench) acceptInstances(ctx context.Context, dc dynamic.Interface, setup *templateSetup) error {
	tenant := tenantNamespaces()[0]
	var refused error
	err := pollUntil(ctx, time.Minute, func() (bool, error) {
		probe := benchInstance(tenant, "probe")
		_, refused = dc.Resource(templateGVR).Namespace(tenant).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return refused == nil, nil
	})
	if err != nil {
		return fmt.Errorf("failed to have a dry-run instance accepted: %w", errors.Join(err, refused))
	}
	setup.accepted = time.Since(setup.templateCreated)
	return nil
}

// templateArm creates the N instances at once and waits until every instance is Ready.
func (b *bench) templateArm(ctx context.Context, dc dynamic.Interface, apps []string, timeout time.Duration) (*armResult, error) {
	b.say("templates: template arm: creating %d instances over %d namespaces (timeout %s)", len(apps), templateTenants, timeout.Round(time.Second))
	return b.arm(ctx, "template arm", apps, func(ns, name string) error {
		_, err := dc.Resource(templateGVR).Namespace(ns).Create(ctx, benchInstance(ns, name), metav1.CreateOptions{})
		return err
	}, func(start time.Time) readiness {
		return b.waitInstancesReady(ctx, apps, start, timeout, func(ready int) {
			b.say("templates: template arm: %d/%d instances Ready after %s; Updates: %s; manager %s", ready, len(apps),
				secs(time.Since(start)), mapString(b.track.phases(nsPlatform)), procLine(b.mgr.pid()))
		})
	}, nsPlatform)
}

// templatesReport renders the scenario's section: the arms side by side, the setup apart.
func (b *bench) templatesReport(plain, tmpl *armResult, setup templateSetup, lag string) string {
	n, floor := b.cfg.N, b.floorMedian()
	ideal := time.Duration(n) * floor / time.Duration(b.cfg.Parallelism)
	requests := func(a *armResult) float64 {
		if a.m.before.metricsErr != nil || a.m.after.metricsErr != nil {
			return 0
		}
		return a.m.after.metrics.Sum("rest_client_requests_total", nil) - a.m.before.metrics.Sum("rest_client_requests_total", nil)
	}
	deltas := func(a *armResult, metric, label string) string {
		if a.m.before.metricsErr != nil || a.m.after.metricsErr != nil {
			return "metrics unavailable"
		}
		return deltaString(DeltaBy(a.m.before.metrics, a.m.after.metrics, metric, label))
	}
	cpu := func(a *armResult) time.Duration { return a.m.after.mgr.CPU - a.m.before.mgr.CPU }
	engineCPU := func(a *armResult) time.Duration { return a.m.after.mgr.ChildrenCPU - a.m.before.mgr.ChildrenCPU }
	both := func(name string, f func(a *armResult) string, cmp string) []string {
		return []string{name, f(plain), f(tmpl), cmp}
	}
	rows := [][]string{
		{"objects created at the start", fmt.Sprintf("%d Stacks", n), fmt.Sprintf("%d instances", n), ""},
		both("creation of the N objects", func(a *armResult) string { return secs(a.creation) }, ""),
		both("start → all Ready", func(a *armResult) string { return a.ready.allReady() }, ratio(Ratio(tmpl.ready.wall, plain.ready.wall))),
		both("Ready since start: p50 / p90 / max", func(a *armResult) string { return percentiles(a.ready.sinceStart, 50, 90, 100) },
			ratio(Ratio(Percentile(tmpl.ready.sinceStart, 50), Percentile(plain.ready.sinceStart, 50)))+" (p50)"),
		{"ideal: N × floor median (CLI first update) / parallelism",
			fmt.Sprintf("%s (%d × %s / %d)", secs(ideal), n, secs(floor), b.cfg.Parallelism), secs(ideal), ""},
		both("wall / ideal", func(a *armResult) string { return ratio(Ratio(a.ready.wall, ideal)) }, ""),
		both("engine runs started (Updates)", func(a *armResult) string { return fmt.Sprintf("%d (%s)", a.runs, mapString(a.runPhases)) }, ""),
		both("manager API requests (rest_client_requests_total)", func(a *armResult) string { return fmt.Sprintf("%.0f", requests(a)) },
			ratio(requests(tmpl)/requests(plain))),
		both("… by method", func(a *armResult) string { return deltas(a, "rest_client_requests_total", "method") }, ""),
		both("reconciles by controller", func(a *armResult) string { return deltas(a, "controller_runtime_reconcile_total", "controller") }, ""),
		both("manager CPU (utime+stime)", func(a *armResult) string { return secs(cpu(a)) }, ratio(Ratio(cpu(tmpl), cpu(plain)))),
		both("engine CPU (manager's reaped children)", func(a *armResult) string { return secs(engineCPU(a)) },
			ratio(Ratio(engineCPU(tmpl), engineCPU(plain)))),
		both("manager peak RSS (sampled 1/s)", func(a *armResult) string { return MiB(a.m.peakRSS()) }, ""),
		{"instance Ready after its Stack Ready: p50 / max", "-", lag, ""},
	}
	setupRows := [][]string{
		{"plain arm: its " + fmt.Sprint(templateTenants) + " Programs created → Ready (before its start)", secs(setup.plainPrograms)},
		{"plain arm deleted (Stacks gone, no destroy) after all Ready", secs(setup.deleted)},
		{"template arm: its Program created → Ready", secs(setup.program)},
		{"StackTemplate created → CustomResourceDefinition " + templatePlural + "." + templateGroup + " Established", secs(setup.established)},
		{"StackTemplate created → StackTemplate Ready", secs(setup.ready)},
		{"StackTemplate created → a first instance accepted (server-side dry run; the API server's first write of a new kind)", secs(setup.accepted)},
	}
	return b.templatesIntro() + table([]string{"", "plain Stacks", "template instances", "templates / plain"}, rows) +
		"\nNot in the instances' time:\n\n" + table([]string{"setup", ""}, setupRows)
}

func (b *bench) templatesIntro() string {
	return fmt.Sprintf("The same N apps, twice, one arm after the other, over the same %d tenant namespaces (N/%d each), on "+
		"the same program (the bench program with its two files below `${pulumi.stack}/`, since every instance of a template "+
		"has the same `STACKWRIGHT_TESTING_ROOT`), with the same stack names (`%s.<namespace>.<name>`) and config. "+
		"*plain*: a Program in each tenant namespace, created and Ready beforehand, then N Stacks on them created at once. "+
		"Once all are Ready, they are deleted (no destroy) with their Updates, as a garbage collector would. "+
		"*templates*: one Program in `%s` and one StackTemplate (`%s`, kind `%s`) whose `spec.stack` references it, "+
		"set up beforehand (timed apart, below, with a server-side dry-run create that pays the API server's first write of "+
		"the new kind); then N instances created at once, timed until each instance's own `Ready` "+
		"condition is True for its generation. Both arms are created by %d concurrent clients and timed from the first create; "+
		"no namespace has a share limit (`--max-concurrent-updates-per-namespace 0`). "+
		"`--max-concurrent-updates %d`; the manager runs with `--template-api-groups=%s`. "+
		"The last column is templates / plain.\n\n",
		templateTenants, templateTenants, templateStack, nsPlatform, templateName, templateKind, b.cfg.CreateWorkers, b.cfg.Parallelism, templateGroup)
}

// instanceLag is how long after its Stack an instance was seen Ready (the status mirroring
// the template arm adds), p50 / max, over the instances whose Stack and self were both seen
// Ready.
func (b *bench) instanceLag(ctx context.Context) (string, error) {
	var list pulumiv1.StackList
	if err := b.cluster.client.List(ctx, &list, client.InNamespace(nsPlatform), client.MatchingLabels{v1alpha1.TemplateLabel: templateName}); err != nil {
		return "", fmt.Errorf("failed to list the instances' Stacks: %w", err)
	}
	var lags []time.Duration
	for _, st := range list.Items {
		stackAt, ok := b.track.readyAt(st.Namespace, st.Name, "")
		if !ok {
			continue
		}
		if at, ok := b.track.instanceReadyAt(st.Annotations[v1alpha1.InstanceAnnotation]); ok {
			lags = append(lags, at.Sub(stackAt))
		}
	}
	if len(lags) == 0 {
		return "-", nil
	}
	s := Summarize(lags)
	return fmt.Sprintf("%s / %s (%d instances)", secs(s.P50), secs(s.Max), len(lags)), nil
}
