package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/budget"
	autoupdatectrl "github.com/stackwright/stackwright/internal/controller/autoupdate"
	instancectrl "github.com/stackwright/stackwright/internal/controller/instance"
	policyctrl "github.com/stackwright/stackwright/internal/controller/policy"
	programctrl "github.com/stackwright/stackwright/internal/controller/program"
	rolloutctrl "github.com/stackwright/stackwright/internal/controller/rollout"
	stackctrl "github.com/stackwright/stackwright/internal/controller/stack"
	stacksetctrl "github.com/stackwright/stackwright/internal/controller/stackset"
	templatectrl "github.com/stackwright/stackwright/internal/controller/stacktemplate"
	updatectrl "github.com/stackwright/stackwright/internal/controller/update"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/executor"
	"github.com/stackwright/stackwright/internal/executor/job"
	"github.com/stackwright/stackwright/internal/executor/local"
	"github.com/stackwright/stackwright/internal/gc"
	"github.com/stackwright/stackwright/internal/inputs"
	"github.com/stackwright/stackwright/internal/keyfile"
	"github.com/stackwright/stackwright/internal/metrics"
	"github.com/stackwright/stackwright/internal/policy"
	"github.com/stackwright/stackwright/internal/runner"
	"github.com/stackwright/stackwright/internal/secretcache"
	"github.com/stackwright/stackwright/internal/source"
	"github.com/stackwright/stackwright/internal/source/flux"
	"github.com/stackwright/stackwright/internal/source/git"
	"github.com/stackwright/stackwright/internal/source/program"
	"github.com/stackwright/stackwright/internal/source/workspace"
	"github.com/stackwright/stackwright/internal/urlallow"
)

// Setup adds Stackwright's controllers, executor and background runners to mgr, in named
// steps over what the earlier ones built.
func Setup(ctx context.Context, mgr ctrl.Manager, o *Options) error {
	if err := o.check(); err != nil {
		return err
	}
	s := &setup{mgr: mgr, o: o}
	for _, step := range []func(context.Context) error{s.data, s.engine, s.executor, s.background, s.controllers} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// setup is what Setup's steps build, each step from the ones before it.
type setup struct {
	mgr ctrl.Manager
	o   *Options

	// data
	c              client.Client
	dirs           dataDirs
	store          *artifact.Store
	fingerprintKey []byte
	memory         *budget.Budget
	gitCache       *git.Cache
	// engine
	in     inputs.Options
	limits artifact.Limits
	run    *runner.Runner
	// executor
	exec     executor.Executor
	detached executor.Detacher
	pending  func() (int, int)
	// runner is the runner the Stack controller binds its Updates to ("" for none).
	runner string
}

// check refuses options that cannot work together, before anything is built.
func (o *Options) check() error {
	if err := o.checkTenancy(); err != nil {
		return err
	}
	if o.MaxConcurrentUpdatesPerNamespace < 0 {
		return fmt.Errorf("--max-concurrent-updates-per-namespace %d: want 0 (no limit of its own) or more", o.MaxConcurrentUpdatesPerNamespace)
	}
	switch o.Executor {
	case executorLocal:
		if o.PluginDownloadURL != "" {
			return errors.New("--plugin-download-url: only runner Pods download plugins (--executor=job); the local executor's engine uses the plugins on the manager's PATH")
		}
		if o.NoTenantIsolation {
			ctrl.Log.WithName("setup").Info("Tenant isolation is off (--no-tenant-isolation): every Stack's engine runs in this process with the manager's rights")
		}
	case executorJob:
		if o.RunnerDeadline < time.Second {
			return fmt.Errorf("--runner-deadline %s: the job executor needs at least 1s (a Job's activeDeadlineSeconds)", o.RunnerDeadline)
		}
		if o.RunnerPendingTimeout <= 0 {
			return fmt.Errorf("--runner-pending-timeout %s: want a positive duration", o.RunnerPendingTimeout)
		}
		if err := job.ValidateAllowedVolumeTypes(o.RunnerAllowedVolumeTypes); err != nil {
			return fmt.Errorf("--runner-allowed-volume-types: %w", err)
		}
	default:
		return fmt.Errorf("unknown executor %q: want %q or %q", o.Executor, executorLocal, executorJob)
	}
	if _, err := urlallow.Parse(o.MetricGateURLs); err != nil {
		return fmt.Errorf("--%s: %w", rolloutctrl.FlagMetricGateURLs, err)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// data opens what lives on the data volume (artifacts, git cache, keys) and the memory
// budget tenant input is charged to.
func (s *setup) data(context.Context) error {
	o := s.o
	// Every controller reads Secrets through this client: values of the Secrets Stacks
	// reference, kept while their watched metadata shows them unchanged (see New).
	s.c = secretcache.New(s.mgr.GetClient(), s.mgr.GetCache(), s.mgr.GetAPIReader())
	var err error
	if s.dirs, err = prepareDataDir(o.DataDir); err != nil {
		return err
	}
	if s.store, err = artifact.NewStore(s.dirs.artifacts); err != nil {
		return fmt.Errorf("failed to open artifact store: %w", err)
	}
	s.store.SetMinFree(o.MinFreeDataBytes)
	s.store.SetNamespaceLimit(o.MaxArtifactBytesPerNamespace, o.ArtifactRetention)
	// Kept with the data: a new key changes every Stack's desired-state key once, and each
	// runs an up that changes nothing.
	if s.fingerprintKey, err = keyfile.Load(filepath.Join(o.DataDir, "inputs.key")); err != nil {
		return err
	}
	s.memory = budget.New(o.MaxTenantBytesInMemory)
	metrics.SetTenantMemory(func() (int64, int64) { return s.memory.InUse(), s.memory.Refused() })
	s.gitCache = git.NewCacheWithLimits(s.dirs.git, git.CacheLimits{
		MaxFetchBytes: o.MaxGitFetchBytes, MaxListBytes: o.MaxGitListBytes, MaxNamespaceBytes: o.MaxGitCacheBytesPerNamespace,
		MaxCacheBytes: o.MaxGitCacheBytes, MaxListingsBytes: o.MaxGitListingsBytes, MinFreeBytes: o.MinFreeDataBytes, Memory: s.memory,
	})
	if o.GitTransport != nil {
		s.gitCache.UseTransport(o.GitTransport, nil)
	}
	return nil
}

// engine builds the Pulumi engine and the runner that resolves and records runs.
func (s *setup) engine(context.Context) error {
	o := s.o
	eng, err := engine.New(engine.Options{
		Bin:        o.PulumiBin,
		PulumiHome: s.dirs.pulumiHome,
		Env:        engine.BaseEnv(),
		OnRun: func(op engine.Operation, _ bool, cpu time.Duration) {
			metrics.ObserveEngineCPU(string(op), cpu)
		},
		OnStart:           func(op engine.Operation) { metrics.ObserveManagerEngineRun(string(op)) },
		OnStaleLockHealed: metrics.ObserveStaleLockHealed,
	})
	if err != nil {
		return fmt.Errorf("failed to set up the pulumi engine: %w", err)
	}
	s.in = inputs.Options{
		AllowEnvRefs:   o.AllowEnvRefs,
		FSRoot:         o.FSRefRoot,
		DefaultBackend: cmp.Or(o.DefaultBackend, "file://"+s.dirs.state),
		Passphrases:    &inputs.Passphrases{Dir: s.dirs.passphrases, Shared: s.dirs.sharedPassphrase},
		InManager:      true,
		StateRoot:      s.dirs.state,
		FingerprintKey: s.fingerprintKey,
	}
	if o.Executor == executorJob {
		// Runner Pods reach neither the manager's disk nor its passphrases, and what a
		// tenant sets in its own Pod steers only that Pod.
		s.in = inputs.Options{AllowEnvRefs: o.AllowEnvRefs, FSRoot: o.FSRefRoot, DefaultBackend: o.DefaultBackend, FingerprintKey: s.fingerprintKey}
	}
	s.limits = artifact.Limits{MaxBytes: o.MaxArtifactBytes}
	s.run = &runner.Runner{
		Client: s.c, Engine: eng, Store: s.store, WorkRoot: s.dirs.work, Inputs: s.in,
		Limits: s.limits, Policies: policy.NewEvaluator(),
	}
	return nil
}

// executor adds the executor the options name, with the fair share of its slots.
func (s *setup) executor(context.Context) error {
	o := s.o
	var tenants []executor.TenantOf
	if len(o.TemplateAPIGroups) > 0 {
		// Instances' Stacks live in platform namespaces; their runs are their tenants'.
		tenants = append(tenants, instancectrl.TenantOf(s.c))
	}
	if o.TenantLabel != "" {
		tenants = append(tenants, executor.NamespaceLabelTenant(s.mgr.GetAPIReader(), o.TenantLabel))
	}
	tenantOf := executor.FirstTenant(tenants...)
	var err error
	if o.Executor == executorLocal {
		err = s.localExecutor(tenantOf)
	} else {
		err = s.jobExecutor(tenantOf)
	}
	if err != nil {
		return err
	}
	if err := metrics.RegisterExecutor(o.Executor, s.pending); err != nil {
		return err
	}
	if err := s.mgr.Add(newMemoryReleaser(s.pending)); err != nil {
		return fmt.Errorf("failed to add memory releaser: %w", err)
	}
	return nil
}

func (s *setup) localExecutor(tenantOf executor.TenantOf) error {
	localExec := local.New(s.c, s.run, s.o.MaxConcurrentUpdates)
	localExec.Deadline = s.o.RunnerDeadline
	localExec.MaxPerNamespace = s.o.MaxConcurrentUpdatesPerNamespace
	localExec.Tenant = tenantOf
	localExec.ReportRunningAfter = s.o.ReportRunningAfter
	if err := s.mgr.Add(localExec); err != nil {
		return fmt.Errorf("failed to add local executor: %w", err)
	}
	// It also performs detached Updates: destroys in terminating namespaces, where no
	// Update can be created.
	s.exec, s.detached, s.pending = localExec, localExec, localExec.Pending
	// The Stack controller's Updates run in this process: they are bound to it as they are
	// created, and need no claim before they start.
	s.runner = localExec.Identity()
	return nil
}

func (s *setup) jobExecutor(tenantOf executor.TenantOf) error {
	o := s.o
	bundles, err := job.ParsePluginBundles(o.PluginBundles)
	if err != nil {
		return fmt.Errorf("--plugin-bundle: %w", err)
	}
	if err := job.ValidateDefaultPlugins(bundles, o.DefaultPlugins); err != nil {
		return fmt.Errorf("--default-plugins: %w", err)
	}
	plugins, err := o.pluginCache()
	if err != nil {
		return err
	}
	jobs, err := job.New(s.c, s.mgr.GetAPIReader(), s.run, s.store, job.Options{
		Pod: job.PodOptions{
			Image: o.RunnerImage, PullPolicy: corev1.PullPolicy(o.RunnerPullPolicy),
			Deadline: int64(o.RunnerDeadline.Seconds()), TTL: int32(o.RunnerJobTTL.Seconds()),
			Resources: job.DefaultResources(), TokenExpiry: int64(max(o.RunnerDeadline, time.Hour).Seconds()) + 600,
			Allowed: job.Placement{
				VolumeTypes: o.RunnerAllowedVolumeTypes, NodeSelectorKeys: o.RunnerAllowedNodeSelectorKeys, TolerationKeys: o.RunnerAllowedTolerationKeys,
				AnnotationPrefixes: o.RunnerAllowedAnnotationPrefixes, CSIDrivers: o.RunnerAllowedCSIDrivers, StorageClasses: o.RunnerAllowedStorageClasses,
			},
			PluginBundles: bundles, DefaultPlugins: o.DefaultPlugins, PluginDownloads: plugins != nil,
		},
		Plugins: plugins, Memory: s.memory,
		MaxRunning: o.MaxConcurrentUpdates, MaxRunningPerNamespace: o.MaxConcurrentUpdatesPerNamespace, Tenant: tenantOf,
		BindAddress: o.RunnerAPIAddr, URL: o.RunnerAPIURL,
		Service: o.RunnerAPIService, Namespace: o.Namespace, DetachedServiceAccount: o.DetachedRunnerServiceAccount, DetachedTenantImages: o.DetachedRunnerTenantImages,
		CertDir: filepath.Join(o.DataDir, "tls"), LostGrace: o.RunnerLostGrace, PendingTimeout: o.RunnerPendingTimeout,
	})
	if err != nil {
		return fmt.Errorf("failed to set up job executor: %w", err)
	}
	if err := jobs.SetupWithManager(s.mgr); err != nil {
		return fmt.Errorf("failed to set up job executor: %w", err)
	}
	// No engine ever runs in the manager's process, which holds the manager's rights: a
	// destroy in a terminating namespace runs in a runner Pod in the manager's own
	// namespace, or, where none may run there, releases its Stack with ResourcesKept.
	s.exec, s.pending = jobs, jobs.Pending
	if jobs.Detaches() {
		s.detached = jobs
	}
	return nil
}

// background adds the collectors of the data volume and the fleet's metrics.
func (s *setup) background(context.Context) error {
	o := s.o
	if o.ArtifactRetention > 0 {
		collector := &gc.Artifacts{Client: s.c, Store: s.store, Interval: gcInterval, Retention: o.ArtifactRetention}
		if err := s.mgr.Add(collector); err != nil {
			return fmt.Errorf("failed to add artifact collector: %w", err)
		}
	}
	if o.GitCacheRetention > 0 {
		if err := s.mgr.Add(&gc.GitCache{Cache: s.gitCache, Interval: gcInterval, Retention: o.GitCacheRetention}); err != nil {
			return fmt.Errorf("failed to add git cache collector: %w", err)
		}
	}
	metrics.SetPerStackLabels(o.MetricsStackLabels)
	return metrics.RegisterStackCollector(s.mgr.GetCache())
}

// namedController is a controller and its name in errors.
type namedController struct {
	name string
	r    interface {
		SetupWithManager(context.Context, ctrl.Manager, controller.Options) error
	}
}

// controllers adds every controller, each with --max-concurrent-reconciles.
func (s *setup) controllers(ctx context.Context) error {
	o, mgr, c := s.o, s.mgr, s.c
	ctrlOpts := controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}
	recorder, err := o.eventRecorder(mgr)
	if err != nil {
		return err
	}
	gitSource := &git.Resolver{Client: c, Store: s.store, Cache: s.gitCache, Limits: s.limits, Now: time.Now}
	sources := source.Registry{
		pulumiv1.SourceKindProgram: &program.Resolver{Client: c, Store: s.store},
		pulumiv1.SourceKindFlux:    &flux.Resolver{Client: c, Store: s.store, MaxBytes: o.MaxArtifactBytes},
		pulumiv1.SourceKindGit:     gitSource,
	}
	if o.Executor == executorJob {
		// The program is in the Stack's image: only a runner Pod can run it.
		sources[pulumiv1.SourceKindImage] = workspace.Resolver{}
	}
	sets := &stacksetctrl.Reconciler{Client: c, Reader: mgr.GetAPIReader(), Git: gitSource, Recorder: recorder, MaxElements: o.MaxStackSetElements}
	requests, err := o.addGitWebhook(mgr, s.gitCache, s.memory, sets)
	if err != nil {
		return err
	}
	oneOffs, err := servesOneOffs(mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	gateURLs, err := urlallow.Parse(o.MetricGateURLs)
	if err != nil {
		return fmt.Errorf("--%s: %w", rolloutctrl.FlagMetricGateURLs, err)
	}
	if gateURLs.Len() == 0 {
		ctrl.Log.WithName("setup").Info("StackRollouts' metric gates may query no server (--metric-gate-urls is empty): a rollout with one stalls (MetricGateURLNotAllowed)")
	} else {
		ctrl.Log.WithName("setup").Info("StackRollouts' metric gates may query these URL prefixes", "metricGateURLs", gateURLs.String())
	}
	list := []namedController{
		{"Stack", &stackctrl.Reconciler{
			Client: c, APIReader: mgr.GetAPIReader(), Sources: sources, Detached: s.detached,
			Recorder: recorder, Now: o.Now, Requests: requests, Store: s.store,
			Options: stackctrl.Options{
				MaxBackoff: o.MaxBackoff, RetryBase: o.RetryBase, StallAfter: int32(o.StallAfter), UpdateHistory: o.UpdateHistory, UpdateMaxAge: o.UpdateMaxAge, Inputs: s.in,
				RunnerPods: o.Executor == executorJob, DetachedTenantImages: o.DetachedRunnerTenantImages, OneOffs: oneOffs,
				Runner: s.runner,
			},
		}},
		{"Program", &programctrl.Reconciler{Client: c, Store: s.store, Recorder: recorder}},
		{"Update", &updatectrl.Reconciler{Client: c, Executor: s.exec, RunnerJobs: o.Executor == executorJob}},
		{"Policy", &policyctrl.Controllers{Client: c}},
		{"StackRollout", &rolloutctrl.Reconciler{Client: c, APIReader: s.mgr.GetAPIReader(), Recorder: recorder, Now: o.Now, Templates: len(o.TemplateAPIGroups) > 0, MetricGateURLs: gateURLs}},
		{"StackSet", sets},
	}
	if oneOffs {
		list = append(list, namedController{"auto.pulumi.com Update", &autoupdatectrl.Reconciler{Client: c, APIReader: mgr.GetAPIReader(), Recorder: recorder, Now: o.Now}})
	} else {
		ctrl.Log.WithName("setup").Info("The auto.pulumi.com Update kind is not installed: one-off operations (PKO's hand-made Updates) are not served; apply its CRD and restart the manager to serve them")
	}
	if len(o.TemplateAPIGroups) > 0 {
		conv, err := s.conversionWebhook()
		if err != nil {
			return err
		}
		kinds := objectKinds(o.TemplateObjectKinds)
		instances := &instancectrl.Controller{
			Client: c, APIReader: mgr.GetAPIReader(), Cache: mgr.GetCache(),
			Recorder: recorder, ApprovalPolicy: o.TemplateApprovalPolicy, ObjectKinds: kinds,
		}
		list = append(list,
			namedController{"template instance", instances},
			namedController{"StackTemplate", &templatectrl.Reconciler{
				Client: c, APIReader: mgr.GetAPIReader(), AllowedGroups: o.TemplateAPIGroups, ObjectKinds: kinds, Instances: instances, Conversion: conv,
			}},
		)
	}
	for _, ctl := range list {
		if err := ctl.r.SetupWithManager(ctx, mgr, ctrlOpts); err != nil {
			return fmt.Errorf("failed to set up %s controller: %w", ctl.name, err)
		}
	}
	return nil
}

// servesOneOffs reports whether the API server serves PKO's auto.pulumi.com Update kind,
// which a chart upgrade does not install (Helm leaves CRDs alone on upgrade): the manager
// must start without it.
func servesOneOffs(mapper meta.RESTMapper) (bool, error) {
	gv := autov1alpha1.GroupVersion
	_, err := mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: "Update"}, gv.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("failed to discover %s Update: %w", gv, err)
	}
	return true, nil
}

// objectKinds parses --template-object-kinds: Kind, or Kind.group.
func objectKinds(names []string) []schema.GroupKind {
	kinds := make([]schema.GroupKind, 0, len(names))
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" {
			kinds = append(kinds, schema.ParseGroupKind(n))
		}
	}
	return kinds
}
