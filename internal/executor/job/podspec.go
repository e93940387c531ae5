package job

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Labels on runner Jobs, their Pods and work Secrets.
const (
	LabelUpdate    = "stackwright.dev/update"
	LabelUpdateUID = "stackwright.dev/update-uid"
	containerName  = "runner"
	// bootstrapContainer copies the runner binary into bootstrapVolume for a Stack's own
	// image.
	bootstrapContainer = "bootstrap"
	bootstrapVolume    = "runner-bin"
	// runnerUID is the image's non-root user.
	runnerUID = int64(65532)
)

// PodOptions are the install-wide settings of runner Pods.
type PodOptions struct {
	// Image is the runner image (`stackwright runner` and the engine).
	Image string
	// PullPolicy is the runner image's pull policy.
	PullPolicy corev1.PullPolicy
	// Deadline bounds a run: the Job's activeDeadlineSeconds.
	Deadline int64
	// TTL is how long a finished Job is kept (ttlSecondsAfterFinished).
	TTL int32
	// Resources of the runner container, unless the Stack's workspaceTemplate sets them.
	Resources corev1.ResourceRequirements
	// TokenExpiry is the lifetime of the token the runner presents to the manager.
	TokenExpiry int64
	// Allowed is what a Stack's workspaceTemplate may choose about its runner Pods:
	// volume types, node selector and toleration keys, annotations, CSI drivers and
	// storage classes.
	Allowed Placement
	// PluginBundles are the plugin bundles Stacks may select.
	PluginBundles []PluginBundle
	// DefaultPlugins name the bundles of Stacks that select none; nil means every bundle.
	DefaultPlugins []string
	// PluginDownloads lets runners download the plugins they lack, through the manager's
	// plugin cache (the runner's --plugin-downloads).
	PluginDownloads bool
}

// JobName is the runner Job's name for the Update named update: a Job's name ends up in
// a label of its Pods, so it must stay within 63 characters, and distinct Updates need
// distinct names. Anyone who sees an Update can compute it, which is why the executor
// never takes an object of that name it did not create for the Update.
func JobName(update string) string {
	sum := sha256.Sum256([]byte(update))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	name := update
	if len(name)+len(suffix) > 63 {
		name = strings.TrimRight(name[:63-len(suffix)], "-.")
	}
	return name + suffix
}

// WorkSecretName is the name of the work Secret of the Update named update.
func WorkSecretName(update string) string { return JobName(update) + "-work" }

func jobName(u *v1alpha1.Update) string { return JobName(u.Name) }

func workSecretName(u *v1alpha1.Update) string { return WorkSecretName(u.Name) }

// runnerIdentity is the status.runner of an Update that a runner Job performs.
func runnerIdentity(u *v1alpha1.Update) string {
	return "job/" + u.Namespace + "/" + jobName(u)
}

// placement says where a runner Job and its work Secret go, and as whom its Pod runs.
type placement struct {
	namespace, name string
	// owner, when set, controls both objects, so they go when it is deleted.
	owner *metav1.OwnerReference
	// serviceAccount, when set, replaces the Stack's (and its template's), and no token
	// of it is mounted.
	serviceAccount string
	// labels and annotations are added to the Job's (labels: and its Pod's and Secret's).
	labels, annotations map[string]string
}

// inStackNamespace places u's runner in the Stack's namespace, owned by u.
func inStackNamespace(u *v1alpha1.Update) placement {
	return placement{namespace: u.Namespace, name: jobName(u), owner: metav1.NewControllerRef(u, v1alpha1.GroupVersion.WithKind("Update"))}
}

// buildJob returns the runner Job of u and its work Secret, placed as at says. The Pod
// meets the restricted Pod Security profile and runs as the Stack's ServiceAccount (or
// at's); everything Stackwright gives it comes through volumes the kubelet mounts, so that
// ServiceAccount needs no rights.
func buildJob(u *v1alpha1.Update, stack *pulumiv1.Stack, work *Work, managerCert []byte, o PodOptions, tmpl *workspaceOverlay, at placement) (*batchv1.Job, *corev1.Secret, error) {
	var owners []metav1.OwnerReference
	if at.owner != nil {
		owners = []metav1.OwnerReference{*at.owner}
	}
	labels := map[string]string{
		LabelUpdate:              truncateLabel(u.Name),
		LabelUpdateUID:           string(u.UID),
		v1alpha1.StackLabel:      truncateLabel(u.Spec.StackName),
		v1alpha1.LabelManagedBy:  v1alpha1.ManagedBy,
		"app.kubernetes.io/name": "stackwright-runner",
	}
	maps.Copy(labels, at.labels)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: at.name + "-work", Namespace: at.namespace, Labels: labels, OwnerReferences: owners,
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{ManagerCertFile: managerCert},
	}

	sa := stack.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	resources := o.Resources
	image := o.Image
	pullPolicy := o.PullPolicy
	var env []corev1.EnvVar
	var nodeSelector map[string]string
	var tolerations []corev1.Toleration
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	if tmpl != nil {
		if tmpl.ServiceAccountName != "" {
			sa = tmpl.ServiceAccountName
		}
		if tmpl.Image != "" {
			image = tmpl.Image
		}
		if tmpl.Resources != nil {
			resources = *tmpl.Resources
		}
		if tmpl.ImagePullPolicy != "" {
			pullPolicy = tmpl.ImagePullPolicy
		}
		env, nodeSelector, tolerations = tmpl.Env, tmpl.NodeSelector, tmpl.Tolerations
		volumes, mounts = tmpl.Volumes, tmpl.VolumeMounts
	}
	var automountToken *bool
	if at.serviceAccount != "" {
		sa, automountToken = at.serviceAccount, ptr(false)
	}
	bundles, err := selectPlugins(stack, o)
	if err != nil {
		return nil, nil, err
	}
	pluginVols, pluginMounts, pluginArgs := pluginVolumes(bundles, o.PullPolicy)
	args := append([]string{"runner", "--work=" + path.Join(WorkDir, WorkFile)}, pluginArgs...)
	if o.PluginDownloads {
		args = append(args, "--"+PluginDownloadsFlag)
	}
	if len(env) > 0 {
		names := make([]string, 0, len(env))
		for _, e := range env {
			names = append(names, e.Name)
		}
		args = append(args, "--inherit-env="+strings.Join(names, ","))
	}
	mode := int32(0o440)
	builtinVolumes := []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "work", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secret.Name, DefaultMode: &mode,
		}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: &mode,
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: TokenAudience, ExpirationSeconds: ptr(o.TokenExpiry), Path: TokenFile,
			}}},
		}}},
	}
	builtinMounts := []corev1.VolumeMount{
		{Name: "scratch", MountPath: ScratchDir},
		{Name: "work", MountPath: WorkDir, ReadOnly: true},
		{Name: "token", MountPath: TokenDir, ReadOnly: true},
	}
	builtinVolumes, builtinMounts = append(builtinVolumes, pluginVols...), append(builtinMounts, pluginMounts...)
	id, err := newIdentity(stack.Spec.IdentityTokens(), programEnv(work.Request.Env, env), &mode)
	if err != nil {
		return nil, nil, err
	}
	if id != nil {
		builtinVolumes, builtinMounts = append(builtinVolumes, id.volume), append(builtinMounts, id.mount)
		// The program's environment travels in the work, like the rest of the Stack's: the
		// runner passes on nothing else of its own.
		announced := *work
		announced.Request.Env = maps.Clone(work.Request.Env)
		if announced.Request.Env == nil {
			announced.Request.Env = map[string]string{}
		}
		maps.Copy(announced.Request.Env, id.env)
		work = &announced
		if id.google != nil {
			secret.Data[GoogleCredentialsFile] = id.google
		}
	}
	w, err := json.Marshal(work)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to encode work of Update %s: %w", u.Name, err)
	}
	secret.Data[WorkFile] = w
	runner := corev1.Container{
		Name:            containerName,
		Image:           image,
		ImagePullPolicy: pullPolicy,
		Args:            args,
		Env: append([]corev1.EnvVar{
			{Name: "HOME", Value: ScratchDir},
			{Name: "TMPDIR", Value: ScratchDir},
		}, env...),
		WorkingDir:               ScratchDir,
		Resources:                resources,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          restrictedContainer(),
		VolumeMounts:             append(builtinMounts, mounts...),
	}
	var initContainers []corev1.Container
	if image != o.Image {
		// The Stack's own image (PKO's workspace image) has pulumi and the plugins but not
		// Stackwright: an init container from the runner image copies the static runner
		// binary in, and the image's container runs it with its own tools on its PATH.
		builtinVolumes = append(builtinVolumes, corev1.Volume{Name: bootstrapVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		initContainers = []corev1.Container{{
			Name:            bootstrapContainer,
			Image:           o.Image,
			ImagePullPolicy: o.PullPolicy,
			Args:            []string{"install-runner", BootstrapBinary},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			SecurityContext:          restrictedContainer(),
			// The binary's dependencies may write below TMPDIR when it starts.
			Env:          []corev1.EnvVar{{Name: "TMPDIR", Value: ScratchDir}},
			VolumeMounts: []corev1.VolumeMount{{Name: bootstrapVolume, MountPath: BootstrapDir}, {Name: "scratch", MountPath: ScratchDir}},
		}}
		runner.Command = []string{BootstrapBinary}
		runner.VolumeMounts = append(runner.VolumeMounts, corev1.VolumeMount{Name: bootstrapVolume, MountPath: BootstrapDir, ReadOnly: true})
	}
	pod := corev1.PodSpec{
		// The host name is the one a stack's lock records as its holder. The Pod's own name
		// would be the Job's plus a random suffix, but only up to 58 characters of it: a
		// long Job name is cut, and the next runner could not tell the lock of this Job's
		// Pod (gone) from another's (see goneRunners). The Job's name is a DNS label, as a
		// host name must be.
		Hostname:                     at.name,
		RestartPolicy:                corev1.RestartPolicyNever,
		ServiceAccountName:           sa,
		AutomountServiceAccountToken: automountToken,
		// SIGTERM reaches the runner, which interrupts the engine so it can release the
		// stack's lock; a minute is the engine's own grace.
		TerminationGracePeriodSeconds: ptr(int64(70)),
		NodeSelector:                  nodeSelector,
		Tolerations:                   tolerations,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr(true),
			RunAsUser:      ptr(runnerUID),
			RunAsGroup:     ptr(runnerUID),
			FSGroup:        ptr(runnerUID),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		InitContainers: initContainers,
		Containers:     []corev1.Container{runner},
		Volumes:        append(builtinVolumes, volumes...),
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: at.name, Namespace: at.namespace, Labels: labels, Annotations: at.annotations, OwnerReferences: owners,
		},
		Spec: batchv1.JobSpec{
			// One attempt: a retry is a new Update, decided by the Stack controller with
			// what it knows (backoff, stalls), never a silent second run of the same one.
			BackoffLimit:            ptr(int32(0)),
			ActiveDeadlineSeconds:   ptr(o.Deadline),
			TTLSecondsAfterFinished: ptr(o.TTL),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: podMeta(tmpl, labels),
				Spec:       pod,
			},
		},
	}
	return job, secret, nil
}

// restrictedContainer is the container security context of the restricted Pod Security
// profile.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsNonRoot:             ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// truncateLabel keeps a name within a label value's 63 characters; the UID label is
// what identifies an Update exactly.
func truncateLabel(s string) string {
	if len(s) <= 63 {
		return s
	}
	return strings.TrimRight(s[:63], "-._")
}

func ptr[T any](v T) *T { return &v }

// DefaultResources bound a runner that its Stack does not size: the engine and its
// plugins need a few hundred megabytes of memory. Its disk is the scratch emptyDir (the
// root file system is read-only) and its log: a run of the seeds' Deployment and Service
// through the Kubernetes provider left 85,560 bytes there (plugins come from image
// volumes, which do not count). What can grow is bounded elsewhere: the artifact, kept
// packed and extracted (--max-artifact-bytes, 100 MiB, each), the CLI's logs (8 MB). The
// limit leaves room for those and for a provider or two that a Stack which turns plugin
// downloads back on fetches into its scratch; past it the kubelet evicts the Pod, and the
// Update says so (reason Evicted).
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("64Mi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse("2Gi"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
		},
	}
}

// podMeta is the runner Pod's metadata: the template's labels and annotations (PKO's
// podTemplate.metadata, e.g. for sidecar injection), under Stackwright's own labels.
func podMeta(tmpl *workspaceOverlay, labels map[string]string) metav1.ObjectMeta {
	if tmpl == nil || (len(tmpl.PodLabels) == 0 && len(tmpl.PodAnnotations) == 0) {
		return metav1.ObjectMeta{Labels: labels}
	}
	l := maps.Clone(tmpl.PodLabels)
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, labels)
	return metav1.ObjectMeta{Labels: l, Annotations: maps.Clone(tmpl.PodAnnotations)}
}
