package manager

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/artifact"
	"github.com/stackwright/stackwright/internal/budget"
	rolloutctrl "github.com/stackwright/stackwright/internal/controller/rollout"
	stacksetctrl "github.com/stackwright/stackwright/internal/controller/stackset"
	"github.com/stackwright/stackwright/internal/executor/job"
	"github.com/stackwright/stackwright/internal/gitwebhook"
	"github.com/stackwright/stackwright/internal/metrics"
	"github.com/stackwright/stackwright/internal/notify"
	"github.com/stackwright/stackwright/internal/plugincache"
	"github.com/stackwright/stackwright/internal/scheme"
	"github.com/stackwright/stackwright/internal/source/git"
	"github.com/stackwright/stackwright/internal/version"
)

// RunnerImageEnv, when set in the manager's environment, is the default of --runner-image:
// a release's manager image sets it to the runner image of the same release, by digest.
const RunnerImageEnv = "STACKWRIGHT_RUNNER_IMAGE"

func defaultRunnerImage() string {
	return cmp.Or(os.Getenv(RunnerImageEnv), "localhost/stackwright-runner:"+version.Version)
}

// PluginBundlesEnv, when set in the manager's environment, is the default of
// --plugin-bundle, comma-separated: a release's manager image sets it to the plugin
// bundles of the same release, by digest.
const PluginBundlesEnv = "STACKWRIGHT_PLUGIN_BUNDLES"

// pluginCache is the plugin cache runners download through, or nil when they may not.
func (o *Options) pluginCache() (*plugincache.Cache, error) {
	if o.PluginDownloadURL == "" {
		return nil, nil
	}
	c, err := plugincache.New(plugincache.Options{
		Dir: filepath.Join(o.DataDir, "plugins"), Source: o.PluginDownloadURL, Allow: o.PluginDownloadAllow,
		MaxBytes: o.PluginCacheBytes, MaxFileBytes: o.PluginMaxBytes, MinFree: o.MinFreeDataBytes, Observe: metrics.ObservePluginCache,
	})
	if err != nil {
		return nil, fmt.Errorf("--plugin-download-url: %w", err)
	}
	return c, nil
}

func defaultPluginBundles() []string {
	var out []string
	for b := range strings.SplitSeq(os.Getenv(PluginBundlesEnv), ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Options are the manager's command-line settings.
type Options struct {
	MetricsAddr string
	// MetricsSecure serves the metrics over HTTPS to scrapers whose token a TokenReview
	// accepts and a SubjectAccessReview allows to get /metrics; off, anyone who reaches the
	// port reads every tenant's Stack names in plain HTTP.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint; without them a
	// self-signed certificate is generated at start.
	MetricsCertDir string
	// MetricsStackLabels reports the series labelled with Stack names.
	MetricsStackLabels      bool
	ProbeAddr               string
	PprofAddr               string
	LeaderElection          bool
	LeaderElectionNamespace string
	// WatchNamespaces restricts every watch and cached read to these namespaces; empty
	// means all namespaces.
	WatchNamespaces []string
	// WatchLabelSelector restricts the Stacks reconciled to those it matches (Flux's
	// --watch-label-selector): several managers, each with its own selector and
	// LeaderElectionID, share a fleet.
	WatchLabelSelector string
	// LeaderElectionID names the Lease; shards need distinct ones.
	LeaderElectionID string
	// SeveralPerProcess lets more than one manager run in this process (controller
	// names are otherwise process-wide). Not a flag: tests run shards side by side.
	SeveralPerProcess bool

	// DataDir holds the artifact store, work directories, PULUMI_HOME, the default
	// file:// backend and the default secrets passphrase.
	DataDir string
	// PulumiBin is the directory holding pulumi and the plugins it runs; "" uses PATH.
	PulumiBin string

	MaxConcurrentReconciles int
	MaxConcurrentUpdates    int
	// MaxConcurrentUpdatesPerNamespace bounds one namespace's share of the engine runs, in
	// either executor; 0 means MaxConcurrentUpdates.
	MaxConcurrentUpdatesPerNamespace int

	// Executor is "local" (engine runs in the manager) or "job" (a runner Job per Update).
	Executor string
	// NoTenantIsolation lets the local executor serve more than one namespace: every
	// Stack author then runs the engine in the manager's process, with what the manager
	// can reach. Without it, the local executor watches exactly one namespace.
	NoTenantIsolation bool
	// DefaultBackend is the backend of Stacks that name none; empty means the manager's
	// file:// backend with the local executor, and Pulumi's default with the Job executor.
	DefaultBackend string
	// Runner* configure the Job executor's runner Pods and the API they call back.
	RunnerImage      string
	RunnerPullPolicy string
	RunnerDeadline   time.Duration
	// RunnerPendingTimeout is how long a runner Pod may stay Pending before its Job is
	// deleted and its slot freed.
	RunnerPendingTimeout time.Duration
	RunnerJobTTL         time.Duration
	RunnerAPIAddr        string
	RunnerAPIService     string
	RunnerAPIURL         string
	// Namespace is the manager's own ($POD_NAMESPACE). With the Job executor, the
	// destroys of Stacks in terminating namespaces run there, as
	// DetachedRunnerServiceAccount; either empty means they cannot run (the Stacks are
	// released with ResourcesKept).
	Namespace                    string
	DetachedRunnerServiceAccount string
	// RunnerAllowedVolumeTypes are the volume types a Stack's workspaceTemplate may add
	// to its runner Pods; nil means job.DefaultAllowedVolumeTypes.
	RunnerAllowedVolumeTypes []string
	// TenantLabel, when set, is the namespace label whose value names a tenant: the
	// namespaces of one tenant share one fair share of the runner slots.
	TenantLabel string
	// DetachedRunnerTenantImages lets the destroys of Stacks in terminating namespaces
	// run the Stacks' own workspace images in the manager's namespace.
	DetachedRunnerTenantImages bool
	// RunnerAllowed* are the rest of what a Stack's workspaceTemplate may choose about
	// its runner Pods (job.Placement).
	RunnerAllowedNodeSelectorKeys, RunnerAllowedTolerationKeys, RunnerAllowedAnnotationPrefixes []string
	RunnerAllowedCSIDrivers, RunnerAllowedStorageClasses                                        []string
	// PluginBundles are the plugin bundles runner Pods may mount, as name=image.
	PluginBundles []string
	// DefaultPlugins name the bundles of Stacks that select none; nil means all of them.
	DefaultPlugins []string
	// PluginDownloadURL, when set, lets runners download the plugins they lack through
	// the manager's plugin cache, which fetches them from this URL once; empty, runners
	// never download a plugin.
	PluginDownloadURL string
	// PluginDownloadAllow names the plugins runners may download; empty allows any.
	PluginDownloadAllow []string
	// PluginCacheBytes bounds the plugin cache on disk, and PluginMaxBytes one plugin.
	PluginCacheBytes, PluginMaxBytes int64
	// MetricGateURLs are the URL prefixes (scheme, host, port, optional path) of the
	// Prometheus servers StackRollouts' metric gates may query; empty, none may: the manager
	// would otherwise send requests wherever a rollout's author points it.
	MetricGateURLs []string
	// TemplateAPIGroups are the API groups StackTemplates may define kinds in; empty
	// leaves StackTemplates unserved (their controllers need cluster-wide rights on
	// CustomResourceDefinitions).
	TemplateAPIGroups []string
	// TemplateObjectKinds are the kinds (Kind or Kind.group) a StackTemplate's
	// spec.objects may make in its instances' namespaces.
	TemplateObjectKinds []string
	// EventsAddr is Flux's notification-controller event endpoint; every event the
	// controllers record is also posted there. Empty: events stay in the API server.
	EventsAddr string
	// GitWebhookAddr is where git hosts' push webhooks are taken ("" or "0": not served).
	GitWebhookAddr string
	// ConversionWebhookAddr is where the conversion webhook of template kinds whose
	// versions rename parameters listens ("" or "0": not served). The API server reaches
	// it through ConversionWebhookService (a Service in Namespace, port 443), else
	// ConversionWebhookURL, else the address it is bound to.
	ConversionWebhookAddr    string
	ConversionWebhookService string
	ConversionWebhookURL     string
	// TemplateApprovalPolicy names the ValidatingAdmissionPolicy, and its binding, that
	// checks who approves template instances; empty means approvals on instances are
	// ignored.
	TemplateApprovalPolicy string
	// Now is the Stack controller's clock; nil means time.Now. Not a flag: tests move it.
	Now func() time.Time
	// GitTransport, when set, is how git sources reach HTTP(S) git servers and GitHub's
	// API instead of http.DefaultTransport. Not a flag: tests trust their own servers'
	// certificates.
	GitTransport http.RoundTripper
	// WrapRecorder, when set, wraps the event recorder every controller records with. Not
	// a flag: tests check what is announced when.
	WrapRecorder func(events.EventRecorder) events.EventRecorder
	// RunnerLostGrace is how long a finished runner may take to report; zero means 30s.
	// Not a flag: tests shorten it.
	RunnerLostGrace time.Duration
	MaxBackoff      time.Duration
	// RetryBase is the first retry delay; zero means 10s. Not a flag: tests shorten it.
	RetryBase time.Duration
	// ReportRunningAfter is how long an Update runs under the local executor before its
	// status says Running; zero means 10s. Not a flag: tests shorten it to watch runs.
	ReportRunningAfter time.Duration
	StallAfter         int
	UpdateHistory      int
	UpdateMaxAge       time.Duration
	MaxArtifactBytes   int64
	// ArtifactRetention is how long an artifact no object names is kept after its last
	// use; zero keeps every artifact.
	ArtifactRetention time.Duration
	// GitCacheRetention is how long a git remote's repository is kept after its last
	// fetch or listing; zero keeps every one.
	GitCacheRetention time.Duration
	// MaxGit* bound what one tenant's git sources may take of the shared data volume: one
	// fetch, one ref listing, and the cached repositories a namespace's Stacks use.
	MaxGitFetchBytes             int64
	MaxGitListBytes              int64
	MaxGitCacheBytesPerNamespace int64
	// MaxGitCacheBytes bounds the git cache of every namespace together, and
	// MaxGitListingsBytes the ref listings kept in memory between polls.
	MaxGitCacheBytes    int64
	MaxGitListingsBytes int64
	// MaxTenantBytesInMemory is the budget every tenant stream the manager holds in memory
	// at once is charged to (ref listings, runner reports, webhook bodies); 0: none.
	MaxTenantBytesInMemory int64
	// MaxArtifactBytesPerNamespace bounds the artifacts one namespace's Stacks make the
	// store keep (within ArtifactRetention of their last use).
	MaxArtifactBytesPerNamespace int64
	// MaxStackSetElements bounds the elements (Stacks) of one StackSet.
	MaxStackSetElements int
	// MinFreeDataBytes is the space kept free on the data volume: a git fetch, an artifact
	// or a plugin download that could leave less is refused with a reason; 0 checks nothing.
	MinFreeDataBytes int64
	AllowEnvRefs     bool
	FSRefRoot        string

	Zap zap.Options
}

// gcInterval is how often unused artifacts and git repositories are looked for: a listing
// of the cached Stacks, Programs and Updates and of two directories.
const gcInterval = 10 * time.Minute

const (
	executorLocal = "local"
	executorJob   = "job"
)

// DefaultOptions returns the settings used when no flag is given.
func DefaultOptions() *Options {
	return &Options{
		MetricsAddr:             ":8080",
		MetricsSecure:           true,
		TemplateObjectKinds:     []string{"ConfigMap", "NetworkPolicy.networking.k8s.io"},
		ProbeAddr:               ":8081",
		DataDir:                 "/var/lib/stackwright",
		MaxConcurrentReconciles: 10,
		// Two engine runs saturate two cores; more only queue on the CPU.
		MaxConcurrentUpdates: 2,
		// One namespace never takes every slot.
		MaxConcurrentUpdatesPerNamespace: 1,
		MetricsStackLabels:               true,
		LeaderElectionID:                 "stackwright.dev",
		Executor:                         "local",
		RunnerImage:                      defaultRunnerImage(),
		RunnerPullPolicy:                 string(corev1.PullIfNotPresent),
		RunnerDeadline:                   time.Hour,
		RunnerPendingTimeout:             5 * time.Minute,
		RunnerJobTTL:                     10 * time.Minute,
		RunnerAPIAddr:                    ":9443",
		RunnerAPIService:                 "stackwright-runner-api",
		PluginBundles:                    defaultPluginBundles(),
		PluginCacheBytes:                 2 << 30,
		PluginMaxBytes:                   1 << 30,
		Namespace:                        os.Getenv("POD_NAMESPACE"),
		DetachedRunnerServiceAccount:     "stackwright-detached-runner",
		MaxBackoff:                       24 * time.Hour,
		StallAfter:                       3,
		UpdateHistory:                    10,
		UpdateMaxAge:                     7 * 24 * time.Hour,
		MaxArtifactBytes:                 100 << 20,
		MaxArtifactBytesPerNamespace:     2 << 30,
		ArtifactRetention:                time.Hour,
		GitCacheRetention:                24 * time.Hour,
		MaxGitFetchBytes:                 git.DefaultCacheLimits.MaxFetchBytes,
		MaxGitListBytes:                  git.DefaultCacheLimits.MaxListBytes,
		MaxGitCacheBytesPerNamespace:     git.DefaultCacheLimits.MaxNamespaceBytes,
		MaxGitCacheBytes:                 git.DefaultCacheLimits.MaxCacheBytes,
		MaxGitListingsBytes:              git.DefaultCacheLimits.MaxListingsBytes,
		MaxTenantBytesInMemory:           768 << 20,
		MinFreeDataBytes:                 512 << 20,
		MaxStackSetElements:              stacksetctrl.DefaultMaxElements,
	}
}

// BindFlags registers the options on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve the metrics over HTTPS, to scrapers with a Kubernetes token allowed to get the non-resource URL /metrics (a TokenReview and a SubjectAccessReview per scrape, cached); false serves them over plain HTTP to anyone who reaches the port.")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir, "Directory with tls.crt and tls.key for the HTTPS metrics endpoint (default: a self-signed certificate generated at start).")
	fs.BoolVar(&o.MetricsStackLabels, "metrics-stack-labels", o.MetricsStackLabels, "Report the metrics labelled with Stack names (drift detected, last success); off, metrics are labelled by namespace at most.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "Address the /healthz and /readyz endpoints bind to; \"0\" disables them.")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", o.PprofAddr, "Address Go's /debug/pprof endpoints bind to (empty: off). Never expose it beyond the pod.")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "Elect a leader so that only one replica reconciles at a time.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the leader election Lease (default: $POD_NAMESPACE, else the pod's service account namespace).")
	fs.StringVar(&o.WatchLabelSelector, "watch-label-selector", o.WatchLabelSelector, "Label selector of the Stacks this manager reconciles (default: all), to shard a fleet over several manager Deployments; give each shard its own --leader-election-id.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader election Lease; every shard of a fleet needs its own.")
	fs.StringSliceVar(&o.WatchNamespaces, "watch-namespaces", o.WatchNamespaces, "Comma-separated namespaces whose Stacks, Programs and Updates are reconciled (default: all). The manager then needs no cluster-wide list or watch permission.")
	fs.StringSliceVar(&o.MetricGateURLs, rolloutctrl.FlagMetricGateURLs, o.MetricGateURLs, "Comma-separated URL prefixes (http(s)://host[:port][/path]) of the Prometheus servers StackRollouts' metric gates may query, e.g. http://prometheus.monitoring:9090. The scheme, host and port (the scheme's when absent) must match and the path fall within the prefix's, compared after parsing; redirects elsewhere are refused. A rollout whose metric gate names another URL stalls (MetricGateURLNotAllowed) and no request is sent (default: none, and metric gates query nothing).")
	fs.StringSliceVar(&o.TemplateAPIGroups, "template-api-groups", o.TemplateAPIGroups, "Comma-separated API groups in which StackTemplates may define kinds; Stackwright installs a CustomResourceDefinition for each template of these groups, and Stalls templates of any other (default: none, and StackTemplates are not served).")
	fs.StringSliceVar(&o.TemplateObjectKinds, "template-object-kinds", o.TemplateObjectKinds, "Comma-separated kinds (Kind for the core group, else Kind.group) a StackTemplate's spec.objects may make in its instances' namespaces, as the manager, which needs the rights to write them; a template listing another kind is Stalled. Replaces the default.")
	fs.StringVar(&o.TemplateApprovalPolicy, "template-approval-policy", o.TemplateApprovalPolicy, "Name of the ValidatingAdmissionPolicy, and of its binding, that lets only a template's approvers set the approve and reject annotations on its instances (config/templates); the manager forwards those annotations to the instances' Stacks only while it is in force (default: none, and approvals on instances are ignored).")
	fs.StringVar(&o.EventsAddr, "events-addr", o.EventsAddr, "URL of Flux's notification-controller event endpoint (e.g. http://notification-controller.flux-system.svc.cluster.local./): every event recorded about a Stack, Program, StackSet or template instance is also posted there, in Flux's event format, for Flux Alerts to deliver (default: none).")
	fs.StringVar(&o.GitWebhookAddr, "git-webhook-bind-address", o.GitWebhookAddr, "Address of the endpoint (POST /hooks/git/<namespace>) that takes git hosts' push webhooks (GitHub, GitLab, or a generic HMAC-signed body) and makes the namespace's Stacks on the pushed repository and branch look at it at once; the namespace's Secret stackwright-git-webhook holds the shared secret under token. Served by the leader only (default: \"0\", not served).")
	fs.StringVar(&o.ConversionWebhookAddr, "conversion-webhook-bind-address", o.ConversionWebhookAddr, "Address of the HTTPS conversion webhook (POST /convert/<template>) through which the API server converts the instances of template kinds whose versions rename parameters; served by every replica, with a self-signed certificate kept in the data directory, which the kinds' definitions trust (default: \"0\", not served, and such templates Stall with ConversionUnavailable).")
	fs.StringVar(&o.ConversionWebhookService, "conversion-webhook-service", o.ConversionWebhookService, "Service in the manager's namespace ($POD_NAMESPACE), port 443, in front of the conversion webhook: how the API server reaches it.")
	fs.StringVar(&o.ConversionWebhookURL, "conversion-webhook-url", o.ConversionWebhookURL, "HTTPS URL (without a path) at which the API server reaches the conversion webhook, for a manager outside the cluster (overrides --conversion-webhook-service; default: https:// and the bound address).")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "Directory for artifacts, work directories, PULUMI_HOME and the default file:// backend.")
	fs.StringVar(&o.PulumiBin, "pulumi-bin", o.PulumiBin, "Directory holding the pulumi CLI, language hosts and providers (default: found on PATH).")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", o.MaxConcurrentReconciles, "Stacks reconciled in parallel (cheap: no engine runs happen in reconciles).")
	fs.IntVar(&o.MaxConcurrentUpdates, "max-concurrent-updates", o.MaxConcurrentUpdates, "Engine runs in parallel: in the manager (local executor) or runner Jobs at once (job executor).")
	fs.StringVar(&o.TenantLabel, "tenant-label", o.TenantLabel, "A namespace label (e.g. stackwright.dev/tenant) whose value names the tenant a namespace belongs to: the namespaces of one tenant share one fair share (--max-concurrent-updates-per-namespace counts per tenant). Namespaces without it are tenants of their own. Empty: every namespace is a tenant.")
	fs.IntVar(&o.MaxConcurrentUpdatesPerNamespace, "max-concurrent-updates-per-namespace", o.MaxConcurrentUpdatesPerNamespace, "Updates of one namespace running at once, in either executor (0: no limit beyond --max-concurrent-updates). Keep it below --max-concurrent-updates so that no one namespace can take every slot; namespaces with queued Updates take turns.")
	fs.StringVar(&o.Executor, "executor", o.Executor, "Where engine runs happen: local (in the manager) or job (one runner Job per Update, in the Stack's namespace, as its ServiceAccount).")
	fs.BoolVar(&o.NoTenantIsolation, "no-tenant-isolation", o.NoTenantIsolation, "Let the local executor run the Stacks of more than one namespace (or of all) in the manager's process. Their authors then reach what the manager reaches: its ServiceAccount, its data volume, each other. Only for a cluster whose Stack authors are all trusted; the job executor needs no such trust.")
	fs.StringVar(&o.DefaultBackend, "default-backend", o.DefaultBackend, "Backend of Stacks without spec.backend (default: the data directory's file:// backend with the local executor, Pulumi's default with the job executor).")
	fs.StringVar(&o.RunnerImage, "runner-image", o.RunnerImage, "Image of runner Pods (job executor).")
	fs.StringVar(&o.RunnerPullPolicy, "runner-image-pull-policy", o.RunnerPullPolicy, "Pull policy of the runner image (job executor).")
	fs.DurationVar(&o.RunnerDeadline, "runner-deadline", o.RunnerDeadline, "Longest run of one Update: a runner Job's activeDeadlineSeconds; with the local executor, the engine run is cancelled (0: unbounded, local executor only).")
	fs.DurationVar(&o.RunnerPendingTimeout, "runner-pending-timeout", o.RunnerPendingTimeout, "How long a runner Pod may stay Pending (unschedulable, image not pulled, or never created) before its Job is deleted and its Update fails (TransientFailure, retried under the Stack's backoff), freeing its slot (job executor).")
	fs.DurationVar(&o.RunnerJobTTL, "runner-job-ttl", o.RunnerJobTTL, "How long finished runner Jobs (and their Pods' logs) are kept.")
	fs.StringVar(&o.RunnerAPIAddr, "runner-api-bind-address", o.RunnerAPIAddr, "Address of the HTTPS API runners fetch artifacts from and report results to (job executor).")
	fs.StringVar(&o.DetachedRunnerServiceAccount, "detached-runner-service-account", o.DetachedRunnerServiceAccount, "ServiceAccount in the manager's namespace ($POD_NAMESPACE) that runs the destroy of a Stack whose namespace is being deleted, where no runner Pod can be created (job executor). Give it no rights: its API token is not mounted. Empty: such Stacks are released with their resources kept (ResourcesKept).")
	fs.BoolVar(&o.DetachedRunnerTenantImages, "detached-runner-tenant-images", false, "Let the destroy of a Stack in a terminating namespace run the Stack's own workspaceTemplate image in the manager's namespace (PKO's custom source, whose program is in that image, needs it). Off, such runs use the runner image, and a Stack whose program is baked into its image is released with its resources kept.")
	fs.StringVar(&o.RunnerAPIService, "runner-api-service", o.RunnerAPIService, "Service in the manager's namespace ($POD_NAMESPACE) in front of the runner API; runners reach it by its cluster IP.")
	fs.StringSliceVar(&o.RunnerAllowedVolumeTypes, "runner-allowed-volume-types", job.DefaultAllowedVolumeTypes(), "Volume types a Stack's spec.workspaceTemplate may add to its runner Pods (job executor), named as in a Pod's volumes (e.g. persistentVolumeClaim, nfs). Replaces the default list, the types the restricted Pod Security profile allows; types such as hostPath, nfs or iscsi reach storage with the node's identity.")
	fs.StringSliceVar(&o.RunnerAllowedNodeSelectorKeys, "runner-allowed-node-selector-keys", job.DefaultNodeSelectorKeys(), "Node label keys a Stack's workspaceTemplate nodeSelector may name (job executor); others are refused by name. Replaces the default, the well-known platform and topology labels.")
	fs.StringSliceVar(&o.RunnerAllowedTolerationKeys, "runner-allowed-toleration-keys", job.DefaultTolerationKeys(), "Taint keys a Stack's workspaceTemplate tolerations may name (job executor); a toleration of every taint is never allowed. Replaces the default, the not-ready and unreachable taints.")
	fs.StringSliceVar(&o.RunnerAllowedAnnotationPrefixes, "runner-allowed-annotation-prefixes", job.DefaultAnnotationPrefixes(), "Prefixes a Stack's workspaceTemplate Pod annotations may start with (job executor); \"*\" allows any but the AppArmor and seccomp ones, which loosen the Pod's confinement and must be listed themselves.")
	fs.StringSliceVar(&o.RunnerAllowedCSIDrivers, "runner-allowed-csi-drivers", nil, "CSI drivers a Stack's workspaceTemplate inline csi volumes may name (job executor); they mount with the driver's identity. Default: none.")
	fs.StringSliceVar(&o.RunnerAllowedStorageClasses, "runner-allowed-storage-classes", nil, "Storage classes a Stack's workspaceTemplate ephemeral volumes may request by name (job executor); they provision claims without the tenant's right to. Default: none.")
	fs.StringArrayVar(&o.PluginBundles, "plugin-bundle", o.PluginBundles, "A plugin bundle runner Pods may mount, as name=image (repeatable; job executor): an OCI image of Pulumi plugins (providers, language hosts) that the kubelet pulls once per node and mounts read-only, so that no Update downloads a plugin. Stacks select bundles by name in spec.stackwright.plugins. Default: $"+PluginBundlesEnv+" (a release's manager image names its own plugins image there).")
	fs.StringSliceVar(&o.DefaultPlugins, "default-plugins", o.DefaultPlugins, "Plugin bundles of Stacks whose spec.stackwright.plugins is empty, comma-separated (default: every --plugin-bundle; an empty value: none).")
	fs.StringVar(&o.PluginDownloadURL, "plugin-download-url", o.PluginDownloadURL, "Let runners download the plugins they lack (job executor; plugins named without a pluginDownloadURL), through the manager's plugin cache, which fetches each file once from this URL (<url>/pulumi-<kind>-<name>-v<version>-<os>-<arch>.tar.gz, e.g. https://get.pulumi.com/releases/plugins) and keeps it in --data-dir. Empty (the default): runners never download a plugin.")
	fs.StringSliceVar(&o.PluginDownloadAllow, "plugin-download-allow", o.PluginDownloadAllow, "Plugins runners may download through the plugin cache, by name (e.g. kubernetes,random); empty allows any.")
	fs.Int64Var(&o.PluginCacheBytes, "plugin-cache-bytes", o.PluginCacheBytes, "Largest size of the plugin cache on disk, in bytes: the least recently used plugins go first.")
	fs.Int64Var(&o.PluginMaxBytes, "plugin-max-bytes", o.PluginMaxBytes, "Largest plugin tarball the plugin cache downloads, in bytes.")
	fs.StringVar(&o.RunnerAPIURL, "runner-api-url", o.RunnerAPIURL, "URL runners use for the runner API (overrides --runner-api-service).")
	fs.DurationVar(&o.MaxBackoff, "retry-max-backoff", o.MaxBackoff, "Longest wait between retries of a failed update, unless a Stack sets retryMaxBackoffDurationSeconds.")
	fs.IntVar(&o.StallAfter, "stall-after-failures", o.StallAfter, "Consecutive permanent failures after which a Stack stalls until its spec, references or source change.")
	fs.IntVar(&o.UpdateHistory, "update-history", o.UpdateHistory, "Finished Updates kept per Stack (the latest is always kept).")
	fs.DurationVar(&o.UpdateMaxAge, "update-max-age", o.UpdateMaxAge, "How long a finished Update is kept (0: no limit); the latest update, the running one and the last drift check are kept whatever their age.")
	fs.Int64Var(&o.MaxArtifactBytes, "max-artifact-bytes", o.MaxArtifactBytes, "Largest source artifact accepted, in bytes (compressed and extracted).")
	fs.Int64Var(&o.MaxArtifactBytesPerNamespace, artifact.FlagMaxNamespaceBytes, o.MaxArtifactBytesPerNamespace, "Artifact store bytes the artifacts one namespace's Stacks used within --artifact-retention may take before new artifacts for that namespace are refused (the Stack retries; what it has is still served); an artifact several namespaces use counts in full against each (0: no limit).")
	fs.DurationVar(&o.ArtifactRetention, "artifact-retention", o.ArtifactRetention, "How long an artifact that no Stack, Program or unfinished Update names is kept after its last use before it is removed from the data directory (0: never removed).")
	fs.DurationVar(&o.GitCacheRetention, "git-cache-retention", o.GitCacheRetention, "How long the git cache keeps a repository no Stack has listed or fetched from (0: forever).")
	fs.Int64Var(&o.MaxGitFetchBytes, git.FlagMaxFetchBytes, o.MaxGitFetchBytes, "Most bytes one git fetch may download into the git cache; a Stack whose fetch is larger stalls until its source or this limit changes (0: no limit).")
	fs.Int64Var(&o.MaxGitListBytes, git.FlagMaxListBytes, o.MaxGitListBytes, "Most bytes of one git ref listing, counted on the wire for HTTP(S), SSH and git:// alike (0: no limit).")
	fs.Int64Var(&o.MaxGitCacheBytes, git.FlagMaxCacheBytes, o.MaxGitCacheBytes, "Git cache disk of every namespace together: a fetch that could pass it first removes the repositories no Stack is resolving, least recently used first, and is refused (its Stack retrying) if that does not make room (0: no limit).")
	fs.Int64Var(&o.MaxGitListingsBytes, git.FlagMaxListingsBytes, o.MaxGitListingsBytes, "Memory the git ref listings kept between polls may take, across every repository (estimated from their refs): past it the least recently used are dropped and listed again when needed (0: no limit).")
	fs.Int64Var(&o.MaxTenantBytesInMemory, budget.Flag, o.MaxTenantBytesInMemory, "Bytes of tenant input the manager may hold in memory at once, across every reconcile and request: git ref listings, runner reports and git webhook bodies. A read that finds it spent fails at once and is tried again (a listing on the Stack's next retry, a report or a webhook delivery answered 503) (0: no limit).")
	fs.IntVar(&o.MaxStackSetElements, "max-stackset-elements", o.MaxStackSetElements, "Most elements (and so Stacks) one StackSet may have; a set whose generator yields more stalls with TooManyElements, creating and removing nothing.")
	fs.Int64Var(&o.MinFreeDataBytes, artifact.FlagMinFree, o.MinFreeDataBytes, "Space kept free on the data volume (--data-dir): a git fetch, a source artifact or a plugin download that could leave less is refused, its Stack retrying with a reason that says so (0: no check).")
	fs.Int64Var(&o.MaxGitCacheBytesPerNamespace, git.FlagMaxNamespaceBytes, o.MaxGitCacheBytesPerNamespace, "Git cache disk the repositories used by one namespace's Stacks may take before fetches for that namespace are refused; a repository shared by several namespaces counts in full against each, until --git-cache-retention after the namespace last used it (0: no limit).")
	fs.BoolVar(&o.AllowEnvRefs, "allow-env-refs", o.AllowEnvRefs, "Let references of type Env read the manager's environment (off: every Stack author could read it).")
	fs.StringVar(&o.FSRefRoot, "fs-ref-root", o.FSRefRoot, "The only directory references of type FS may read from (empty: FS references are refused).")
	zapFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.Zap.BindFlags(zapFlags)
	fs.AddGoFlagSet(zapFlags)
}

// Leader election's Lease and the events it records live in the manager's own namespace:
// config/rbac/leader_election_role.yaml grants them there, not cluster-wide.

// Run starts the manager and blocks until ctx is done.
func Run(ctx context.Context, cfg *rest.Config, o *Options) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.Zap)))
	mgr, err := New(cfg, o)
	if err != nil {
		return err
	}
	if err := Setup(ctx, mgr, o); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("failed to run manager: %w", err)
	}
	return nil
}

// New creates the controller-runtime manager the options describe, with its health and
// readiness checks but no controllers: Setup adds those.
func New(cfg *rest.Config, o *Options) (ctrl.Manager, error) {
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	cacheOpts, err := o.cacheOptions()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  s,
		Cache:                   cacheOpts,
		Metrics:                 o.metricsOptions(),
		HealthProbeBindAddress:  o.ProbeAddr,
		PprofBindAddress:        o.PprofAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        o.LeaderElectionID,
		LeaderElectionNamespace: cmp.Or(o.LeaderElectionNamespace, os.Getenv("POD_NAMESPACE")),
		// Engine runs record their result after cancellation; give them the time.
		GracefulShutdownTimeout: ptr(time.Minute),
		// Secrets are not cached: a tenant's namespace holds many, most of no concern to
		// any Stack, and each would sit in the manager's memory. Their metadata is watched
		// and their values read on use (internal/secretcache).
		Client:     client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr(o.SeveralPerProcess)},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("failed to add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("failed to add ready check: %w", err)
	}
	// Stacks elsewhere are silently ignored: say so once, where an operator looks first.
	if ns := watchNamespaces(o.WatchNamespaces); len(ns) > 0 {
		ctrl.Log.WithName("setup").Info("Reconciling only the watched namespaces", "namespaces", ns)
	}
	return mgr, nil
}

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions serves the metrics as kubebuilder's scaffold does: HTTPS, each scrape
// authenticated and authorised by the API server, since the series name every tenant's
// Stacks.
func (o *Options) metricsOptions() metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsAddr}
	if o.MetricsSecure {
		m.SecureServing, m.CertDir = true, o.MetricsCertDir
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return m
}

// cacheOptions confines the cache, and so every watch and cached read, to the watched
// namespaces. Every object the manager caches is namespaced; the one cluster-scoped read
// (the Namespace of a Stack being deleted) goes through the API reader, so a
// namespace-scoped install needs nothing cluster-wide but `get namespaces`.
//
// Jobs are cached only when Stackwright made them (runner Jobs): a cluster's other Jobs
// are none of its business and would cost memory.
//
// CustomResourceDefinitions are cached only when a StackTemplate made them: a cluster's
// others can be many and large.
//
// A label selector confines the cached Stacks: everything else a manager does starts from a
// Stack it sees (the Update and Job handlers check the Stack is in the cache).
//
// Cached objects carry no managedFields, and cached Updates no log tail or steps (see
// trimCachedUpdate): the manager never reads them, and a fleet's cache would otherwise hold
// them for every object it sees.
func (o *Options) cacheOptions() (cache.Options, error) {
	opts := cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
		&batchv1.Job{}:     {Label: labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy})},
		&v1alpha1.Update{}: {Transform: trimCachedUpdate},
		&apiextensionsv1.CustomResourceDefinition{}: {Label: hasLabel(v1alpha1.TemplateLabel)},
	}}
	if o.WatchLabelSelector != "" {
		sel, err := labels.Parse(o.WatchLabelSelector)
		if err != nil {
			return cache.Options{}, fmt.Errorf("failed to parse --watch-label-selector %q: %w", o.WatchLabelSelector, err)
		}
		opts.ByObject[&pulumiv1.Stack{}] = cache.ByObject{Label: sel}
	}
	namespaces := watchNamespaces(o.WatchNamespaces)
	if len(namespaces) == 0 {
		return opts, nil
	}
	opts.DefaultNamespaces = map[string]cache.Config{}
	for _, ns := range namespaces {
		opts.DefaultNamespaces[ns] = cache.Config{}
	}
	return opts, nil
}

// hasLabel selects the objects that carry the label key.
func hasLabel(key string) labels.Selector {
	r, err := labels.NewRequirement(key, selection.Exists, nil)
	if err != nil {
		panic(fmt.Sprintf("invalid label key %q: %v", key, err))
	}
	return labels.NewSelector().Add(*r)
}

// trimCachedUpdate drops from a cached Update what the manager never reads there: its
// managedFields, log tail (up to 8 KiB) and steps. The runner writes them with merge patches,
// which leave alone what they do not change, and `kubectl stackwright` reads them from the
// API server. Kept, they would grow the manager's memory with every retained Update of the
// fleet (--update-history per Stack).
func trimCachedUpdate(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if u, ok := obj.(*v1alpha1.Update); ok {
		u.Status.LogTail, u.Status.Steps = "", nil
	}
	return obj, err
}

// watchNamespaces cleans the flag's values: "a, b,,a" and "a" "b" mean the same.
func watchNamespaces(values []string) []string {
	var out []string
	for _, v := range values {
		for ns := range strings.SplitSeq(v, ",") {
			if ns = strings.TrimSpace(ns); ns != "" && !slices.Contains(out, ns) {
				out = append(out, ns)
			}
		}
	}
	return out
}

// checkTenancy refuses a local executor that would run several tenants' engines in one
// process, unless the operator said they trust each other.
func (o *Options) checkTenancy() error {
	if o.Executor != executorLocal || o.NoTenantIsolation {
		return nil
	}
	switch ns := watchNamespaces(o.WatchNamespaces); len(ns) {
	case 1:
		return nil
	case 0:
		return errors.New("the local executor runs every Stack's engine in the manager's process, so it watches one namespace only: set --watch-namespaces to one namespace, use --executor=job for several tenants, or pass --no-tenant-isolation if every Stack author in the cluster is trusted with the manager's rights")
	default:
		return fmt.Errorf("the local executor runs every Stack's engine in the manager's process, so it watches one namespace only, not %d (%s): use --executor=job for several tenants, or pass --no-tenant-isolation if all their Stack authors are trusted with the manager's rights", len(ns), strings.Join(ns, ", "))
	}
}

// eventRecorder is the recorder of every controller: the API server's events, also posted
// to Flux's notification-controller when --events-addr is set.
func (o *Options) eventRecorder(mgr ctrl.Manager) (events.EventRecorder, error) {
	var rec events.EventRecorder = mgr.GetEventRecorder("stackwright")
	if o.WrapRecorder != nil {
		rec = o.WrapRecorder(rec)
	}
	if o.EventsAddr == "" {
		return rec, nil
	}
	fwd, err := notify.NewForwarder(o.EventsAddr, "stackwright", cmp.Or(os.Getenv("POD_NAME"), hostname()))
	if err != nil {
		return nil, fmt.Errorf("--events-addr: %w", err)
	}
	if err := mgr.Add(fwd); err != nil {
		return nil, fmt.Errorf("failed to add event forwarder: %w", err)
	}
	return fwd.Recorder(rec), nil
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// webhookRequests bounds the reconcile requests of pushes waiting for the Stack
// controller; beyond it a push is dropped, and the Stack's polling picks the commit up.
const webhookRequests = 1024

// addGitWebhook serves git hosts' push and pull request webhooks when
// --git-webhook-bind-address is set, and returns the channel through which they ask the
// Stack controller to look at Stacks now (nil when not served); sets gets its own.
func (o *Options) addGitWebhook(mgr ctrl.Manager, cache *git.Cache, memory *budget.Budget, sets *stacksetctrl.Reconciler) (chan event.GenericEvent, error) {
	if o.GitWebhookAddr == "" || o.GitWebhookAddr == "0" {
		return nil, nil
	}
	requests := make(chan event.GenericEvent, webhookRequests)
	setRequests := make(chan event.GenericEvent, webhookRequests)
	sets.Requests = setRequests
	log := ctrl.Log.WithName("git-webhook")
	srv := &gitwebhook.Server{
		Addr: o.GitWebhookAddr, Stacks: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Poke: cache.Poke, Memory: memory,
		Enqueue: func(key types.NamespacedName) {
			select {
			case requests <- event.GenericEvent{Object: &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
			default:
				log.Info("Dropped a push's reconcile request: the Stack controller is behind; polling picks the commit up", "stack", key)
			}
		},
		PokeSet: sets.Poke,
		EnqueueSet: func(key types.NamespacedName) {
			select {
			case setRequests <- event.GenericEvent{Object: &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
			default:
				log.Info("Dropped a pull request's reconcile request: the StackSet controller is behind; its interval picks the change up", "stackset", key)
			}
		},
	}
	if err := mgr.Add(srv); err != nil {
		return nil, fmt.Errorf("failed to add git webhook: %w", err)
	}
	return requests, nil
}

type dataDirs struct {
	artifacts, git, work, pulumiHome, state, passphrases string
	// sharedPassphrase is the one passphrase of versions before passphrases were per
	// namespace; such an installation keeps it (inputs.Passphrases).
	sharedPassphrase string
}

// prepareDataDir lays out the data directory.
func prepareDataDir(root string) (dataDirs, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return dataDirs{}, fmt.Errorf("failed to resolve data directory: %w", err)
	}
	d := dataDirs{
		artifacts:   filepath.Join(root, "artifacts"),
		git:         filepath.Join(root, "git"),
		work:        filepath.Join(root, "work"),
		pulumiHome:  filepath.Join(root, "pulumi-home"),
		state:       filepath.Join(root, "state"),
		passphrases: filepath.Join(root, "passphrases"),
	}
	for _, dir := range []string{d.artifacts, d.git, d.work, d.pulumiHome, d.state, d.passphrases} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return dataDirs{}, fmt.Errorf("failed to create %s: %w", dir, err)
		}
	}
	shared := filepath.Join(root, "passphrase")
	if _, err := os.Stat(shared); err == nil {
		d.sharedPassphrase = shared
	} else if !errors.Is(err, fs.ErrNotExist) {
		return dataDirs{}, fmt.Errorf("failed to read shared passphrase: %w", err)
	}
	return d, nil
}

func ptr[T any](v T) *T { return &v }
