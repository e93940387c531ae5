package metrics

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Drift check results, the values of the result label.
const (
	DriftFound  = "drift"
	DriftNone   = "no_drift"
	DriftFailed = "failed"
)

const (
	labelNS        = "namespace"
	labelStack     = "stack"
	labelResult    = "result"
	labelOperation = "operation"
	labelKind      = "kind"
	labelReason    = "reason"
	labelState     = "state"
	labelExecutor  = "executor"
	labelStackSet  = "stackset"
	labelCount     = "count"
	labelRollout   = "rollout"
	labelPhase     = "phase"
	metricPrefix   = "stackwright_"
)

// perStack says whether series with a stack label are reported (SetPerStackLabels).
var perStack atomic.Bool

func init() { perStack.Store(true) }

var (
	driftChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "drift_checks_total",
		Help: "Scheduled drift checks finished, by namespace and result (drift, no_drift, failed).",
	}, []string{labelNS, labelResult})

	driftDetected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricPrefix + "stack_drift_detected",
		Help: "1 when the Stack's last drift check found drift, 0 when it found none; absent before the first check and when it could not run.",
	}, []string{labelNS, labelStack})

	updateDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    metricPrefix + "update_duration_seconds",
		Help:    "Duration of finished engine runs (Updates), from start to end, by namespace, operation and result.",
		Buckets: []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
	}, []string{labelNS, labelOperation, labelResult})

	updates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "updates_total",
		Help: "Finished engine runs (Updates), by namespace, operation and result (succeeded, failed, cancelled).",
	}, []string{labelNS, labelOperation, labelResult})

	updateFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "update_failures_total",
		Help: "Finished engine runs (Updates) that did not succeed, by namespace, operation and the reason their Complete condition gives (TransientFailure, PermanentFailure, UpdateConflict, Cancelled, PlanInvalid, MissingPlugin, BackendUnsupported, RunnerLost, Evicted, OOMKilled; Other for anything else).",
	}, []string{labelNS, labelOperation, labelReason})

	engineCPU = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    metricPrefix + "engine_cpu_seconds",
		Help:    "CPU of the pulumi processes of one engine run (CLI, language host, providers), by operation; runs in this manager's process only.",
		Buckets: []float64{0.25, 0.5, 1, 2, 5, 10, 30, 60, 300},
	}, []string{labelOperation})

	managerRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "manager_engine_runs_total",
		Help: "Engine operations started inside the manager's own process (the local executor), by operation. Under the job executor every run happens in a runner Pod and this stays 0.",
	}, []string{labelOperation})

	keptOnDelete = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "stack_resources_kept_total",
		Help: "Deleted Stacks with destroyOnFinalize whose finalizer was released without a destroy, because it could not run (their namespace was being deleted), by namespace. Their resources are left in place.",
	}, []string{labelNS})

	retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "update_retries_total",
		Help: "Engine runs started again for a desired state whose last run failed, by namespace.",
	}, []string{labelNS})

	runnersLost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "runners_lost_total",
		Help: "Updates whose runner ended without reporting a result, by namespace and reason: Evicted (its node evicted the runner Pod; the Update's message names the limit), OOMKilled (the kernel killed the runner's container at its memory limit, which the Update's message names) or RunnerLost (anything else: killed, deleted).",
	}, []string{labelNS, labelReason})

	pluginCacheRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "plugin_cache_requests_total",
		Help: "Runners' plugin downloads through the manager's plugin cache, by result: hit (served from disk), download (fetched from the plugin source first), not_found (the source does not have it), refused (not a plugin name, not allowed, too large) or error.",
	}, []string{labelResult})

	pluginCacheDownloaded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricPrefix + "plugin_cache_downloaded_bytes_total",
		Help: "Bytes the manager's plugin cache fetched from the plugin source.",
	})

	// tenantMemory reports the manager's memory budget for tenant input (SetTenantMemory).
	tenantMemory        atomic.Pointer[func() (inUse, refused int64)]
	tenantMemoryInUse   = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metricPrefix + "tenant_memory_in_use_bytes", Help: "Bytes of tenant input the manager holds in memory now (ref listings, runner reports, webhook bodies), within --max-tenant-bytes-in-memory."}, func() float64 { return float64(readTenantMemory(false)) })
	tenantMemoryRefused = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metricPrefix + "tenant_memory_refused_total", Help: "Reads of tenant input refused because the manager's memory budget was spent (the listing, report or delivery is tried again)."}, func() float64 { return float64(readTenantMemory(true)) })

	locksHealed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricPrefix + "stale_locks_healed_total",
		Help: "Runs that found their stack locked only by runners proven gone, removed those locks and tried again.",
	})

	sourceDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    metricPrefix + "source_resolve_duration_seconds",
		Help:    "Time to resolve a Stack's source to an artifact (fetching it when it is not cached), by kind of source.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300},
	}, []string{labelKind})

	sourceErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "source_resolve_errors_total",
		Help: "Failed source resolutions, by kind of source and the reason the Stack reports.",
	}, []string{labelKind, labelReason})
)

var (
	rolloutWave = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricPrefix + "rollout_wave",
		Help: "Index (from 0) of the current wave of each StackRollout.",
	}, []string{labelNS, labelRollout})

	rolloutHalted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricPrefix + "rollout_halted",
		Help: "1 while the StackRollout is halted by a failed wave, else 0.",
	}, []string{labelNS, labelRollout})

	rolloutPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricPrefix + "rollout_phase",
		Help: "1 for the StackRollout's current phase (Idle, Progressing, Halted, Aborted), 0 for the others.",
	}, []string{labelNS, labelRollout, labelPhase})
)

// rolloutPhases are the values of the phase label.
var rolloutPhases = []string{"Idle", "Progressing", "Halted", "Aborted"}

// ObserveRollout records where a StackRollout stands.
func ObserveRollout(namespace, name, phase string, wave int, halted bool) {
	rolloutWave.WithLabelValues(namespace, name).Set(float64(wave))
	h := 0.0
	if halted {
		h = 1
	}
	rolloutHalted.WithLabelValues(namespace, name).Set(h)
	for _, p := range rolloutPhases {
		v := 0.0
		if p == phase {
			v = 1
		}
		rolloutPhase.WithLabelValues(namespace, name, p).Set(v)
	}
}

// ForgetRollout drops the series of a StackRollout that no longer exists.
func ForgetRollout(namespace, name string) {
	rolloutWave.DeleteLabelValues(namespace, name)
	rolloutHalted.DeleteLabelValues(namespace, name)
	for _, p := range rolloutPhases {
		rolloutPhase.DeleteLabelValues(namespace, name, p)
	}
}

func init() {
	crmetrics.Registry.MustRegister(rolloutWave, rolloutHalted, rolloutPhase)
	crmetrics.Registry.MustRegister(driftChecks, driftDetected, updateDuration, updates, updateFailures, engineCPU, managerRuns, keptOnDelete, retries,
		runnersLost, locksHealed, sourceDuration, sourceErrors, pluginCacheRequests, pluginCacheDownloaded,
		tenantMemoryInUse, tenantMemoryRefused)
	// Every series at 0 from the start: a scrape then shows "no engine ran in the manager"
	// rather than nothing, which a misspelt query would show as well. The values are the
	// engine's operations (engine.Op*).
	for _, op := range []string{"up", "preview", "refresh", "destroy", "drift"} {
		managerRuns.WithLabelValues(op)
	}
}

// SetTenantMemory makes the tenant memory metrics read f (the manager's budget).
func SetTenantMemory(f func() (inUse, refused int64)) { tenantMemory.Store(&f) }

func readTenantMemory(refused bool) int64 {
	f := tenantMemory.Load()
	if f == nil {
		return 0
	}
	inUse, n := (*f)()
	if refused {
		return n
	}
	return inUse
}

// SetPerStackLabels turns the series labelled with a Stack's name on or off
// (stackwright_stack_drift_detected, stackwright_stack_last_success_timestamp_seconds).
// Off, a fleet's metrics have a cardinality bounded by its namespaces.
func SetPerStackLabels(on bool) {
	perStack.Store(on)
	if !on {
		driftDetected.Reset()
	}
}

// ObserveDriftCheck records a finished drift check of a Stack with its result.
func ObserveDriftCheck(namespace, stack, result string) {
	driftChecks.WithLabelValues(namespace, result).Inc()
	if !perStack.Load() {
		return
	}
	switch result {
	case DriftFound:
		driftDetected.WithLabelValues(namespace, stack).Set(1)
	case DriftNone:
		driftDetected.WithLabelValues(namespace, stack).Set(0)
	default:
		driftDetected.DeleteLabelValues(namespace, stack)
	}
}

// ForgetStack drops the per-Stack series of a Stack that no longer exists.
func ForgetStack(namespace, stack string) {
	driftDetected.DeleteLabelValues(namespace, stack)
}

// ObserveUpdate records a finished Update: its operation (up, preview, refresh, destroy,
// drift), result (succeeded, failed, cancelled), its Complete condition's reason, and
// duration (0 when unknown: counted, not timed). An Update that did not succeed is
// counted by its reason too.
func ObserveUpdate(namespace, operation, result, reason string, d time.Duration) {
	updates.WithLabelValues(namespace, operation, result).Inc()
	if d > 0 {
		updateDuration.WithLabelValues(namespace, operation, result).Observe(d.Seconds())
	}
	if result != string(v1alpha1.UpdateResultSucceeded) {
		updateFailures.WithLabelValues(namespace, operation, failureReason(reason)).Inc()
	}
}

// failureReasons are the values of update_failures_total's reason label: the Complete
// condition's reasons of a failed Update. A runner Pod's report is held to them by the
// Job executor; the label is held to them here too, so that no reason anyone wrote into
// an Update's status (a status writer, a future reason) can grow the series without bound.
var failureReasons = append(v1alpha1.RunnerFailureReasons(), v1alpha1.ReasonRunnerLost, v1alpha1.ReasonEvicted)

// otherReason is the reason label of a failure whose reason is none of failureReasons.
const otherReason = "Other"

func failureReason(reason string) string {
	if slices.Contains(failureReasons, reason) {
		return reason
	}
	return otherReason
}

// ObserveRunnerLost records an Update whose runner ended without its result, by the
// reason its Update records (RunnerLost, Evicted, OOMKilled; any other counts as
// RunnerLost).
func ObserveRunnerLost(namespace, reason string) {
	if !v1alpha1.RunnerLostReason(reason) {
		reason = v1alpha1.ReasonRunnerLost
	}
	runnersLost.WithLabelValues(namespace, reason).Inc()
}

// ObservePluginCache records one request to the plugin cache and the bytes it fetched
// from the plugin source.
func ObservePluginCache(result string, downloaded int64) {
	pluginCacheRequests.WithLabelValues(result).Inc()
	pluginCacheDownloaded.Add(float64(downloaded))
}

// ObserveEngineCPU records the CPU of one engine run's pulumi processes.
func ObserveEngineCPU(operation string, cpu time.Duration) {
	engineCPU.WithLabelValues(operation).Observe(cpu.Seconds())
}

// ObserveManagerEngineRun records an engine operation starting in the manager's process.
func ObserveManagerEngineRun(operation string) { managerRuns.WithLabelValues(operation).Inc() }

// ObserveResourcesKept records a destroyOnFinalize Stack released without its destroy.
func ObserveResourcesKept(namespace string) { keptOnDelete.WithLabelValues(namespace).Inc() }

// ObserveRetry records an engine run started again after a failure.
func ObserveRetry(namespace string) { retries.WithLabelValues(namespace).Inc() }

// ObserveStaleLockHealed records a run that removed its stack's stale locks.
func ObserveStaleLockHealed() { locksHealed.Inc() }

// ObserveSourceResolve records one resolution of a Stack's source; reason is "" when it
// succeeded.
func ObserveSourceResolve(kind string, d time.Duration, reason string) {
	sourceDuration.WithLabelValues(kind).Observe(d.Seconds())
	if reason != "" {
		sourceErrors.WithLabelValues(kind, reason).Inc()
	}
}
