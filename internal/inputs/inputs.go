package inputs

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
)

// Environment variables the engine reads that resolution sets or inspects.
const (
	EnvBackendURL     = "PULUMI_BACKEND_URL"
	EnvAccessToken    = "PULUMI_ACCESS_TOKEN"
	EnvPassphrase     = "PULUMI_CONFIG_PASSPHRASE"
	EnvPassphraseFile = "PULUMI_CONFIG_PASSPHRASE_FILE"
)

// accessTokenKey is the key PKO's deprecated accessTokenSecret reads.
const accessTokenKey = "accessToken"

// Options are the manager-wide settings resolution depends on.
type Options struct {
	// AllowEnvRefs lets references of type Env read the manager's own environment. It is
	// off by default because, unlike PKO's per-stack workspace pods, the local executor
	// shares the manager's environment and every Stack author could read it.
	AllowEnvRefs bool
	// FSRoot is the only directory references of type FS may read from; "" refuses them
	// for the same reason.
	FSRoot string
	// DefaultBackend is used when neither spec.backend, a PULUMI_BACKEND_URL variable nor
	// a Pulumi access token says where state lives: a self-managed backend URL under which
	// each namespace gets its own directory, so that Stacks of different namespaces never
	// share state however they name their stacks.
	DefaultBackend string
	// Passphrases, when set, encrypt stack secrets when a self-managed backend is used
	// with the passphrase provider and the Stack supplies no passphrase of its own: one
	// generated passphrase per namespace.
	Passphrases *Passphrases
	// InManager says the engine runs in the manager's process (the local executor): the
	// environment variables of ReservedEnv are refused, and so is a file:// backend
	// outside the namespace's directory of StateRoot.
	InManager bool
	// StateRoot is the directory of the manager's own file:// backend (InManager only).
	StateRoot string
	// FingerprintKey is the HMAC key the fingerprint hashes the referenced objects'
	// content under. Without it the fingerprint falls back to their resourceVersions,
	// which also move when only their metadata does (a label, a finalizer).
	FingerprintKey []byte
}

// ConfigValue is one stack config value: JSON, where a JSON string is a plain string.
type ConfigValue struct {
	Value  json.RawMessage
	Secret bool
}

// Inputs are a Stack's resolved engine inputs.
type Inputs struct {
	Config map[string]ConfigValue
	Env    map[string]string
	// Fingerprint changes whenever the content of a referenced ConfigMap or Secret
	// changes, or one is replaced by another of the same name. It is an HMAC under a key
	// only the manager holds, so it confirms no guess of what the Secrets hold.
	Fingerprint string
}

// Resolve reads every object stack references. Failures are *fault.Error values:
// ConfigUnavailable (retryable) for missing objects and keys, CrossNamespaceReference and
// SpecInvalid (stalled) for references that can never work.
func Resolve(ctx context.Context, c client.Reader, stack *pulumiv1.Stack, o Options) (*Inputs, error) {
	r := NewRefs(ctx, c, stack.Namespace, o, pulumiv1.ReasonConfigUnavailable)
	spec := &stack.Spec
	in := &Inputs{Config: map[string]ConfigValue{}, Env: map[string]string{}}

	for k, v := range spec.Config {
		in.Config[k] = ConfigValue{Value: json.RawMessage(v.Raw)}
	}
	for _, k := range slices.Sorted(maps.Keys(spec.ConfigRef)) {
		ref := spec.ConfigRef[k]
		s, err := r.configMapKey(ref.Name, ref.Key, "spec.configRef["+k+"]")
		if err != nil {
			return nil, err
		}
		v, err := configRefValue(ref, s)
		if err != nil {
			return nil, err
		}
		in.Config[k] = ConfigValue{Value: v}
	}
	for k, s := range spec.Secrets {
		in.Config[k] = ConfigValue{Value: jsonString(s), Secret: true}
	}
	for _, k := range slices.Sorted(maps.Keys(spec.SecretsRef)) {
		s, err := r.Ref(spec.SecretsRef[k], "spec.secretsRef["+k+"]")
		if err != nil {
			return nil, err
		}
		in.Config[k] = ConfigValue{Value: jsonString(s), Secret: true}
	}

	// Later sources win, as in PKO: deprecated bulk imports first, then explicit refs.
	for _, name := range spec.Envs {
		cm, err := r.configMap(name, "spec.envs")
		if err != nil {
			return nil, err
		}
		for k, v := range cm.Data {
			in.Env[k] = v
		}
	}
	for _, name := range spec.EnvSecrets {
		sec, err := r.Secret(name, "spec.envSecrets")
		if err != nil {
			return nil, err
		}
		for k, v := range sec.Data {
			in.Env[k] = string(v)
		}
	}
	if spec.AccessTokenSecret != "" {
		s, err := r.SecretKey(spec.AccessTokenSecret, accessTokenKey, "spec.accessTokenSecret")
		if err != nil {
			return nil, err
		}
		in.Env[EnvAccessToken] = s
	}
	for _, k := range slices.Sorted(maps.Keys(spec.EnvRefs)) {
		s, err := r.Ref(spec.EnvRefs[k], "spec.envRefs["+k+"]")
		if err != nil {
			return nil, err
		}
		in.Env[k] = s
	}
	if o.InManager {
		if err := checkReservedEnv(in.Env); err != nil {
			return nil, err
		}
	}
	if err := applyBackendDefaults(stack.Namespace, spec, in.Env, o); err != nil {
		return nil, err
	}
	if o.InManager {
		if err := checkFileBackend(stack.Namespace, in.Env[EnvBackendURL], o.StateRoot); err != nil {
			return nil, err
		}
	}
	in.Fingerprint = r.fingerprint()
	return in, nil
}

// applyBackendDefaults picks the backend PKO would (spec.backend, else an explicit
// variable, else Pulumi Cloud when a token is given) and falls back to the manager's
// self-managed backend only when nothing says otherwise.
func applyBackendDefaults(namespace string, spec *pulumiv1.StackSpec, env map[string]string, o Options) error {
	if spec.Backend != "" {
		env[EnvBackendURL] = spec.Backend
	}
	if env[EnvBackendURL] == "" && env[EnvAccessToken] == "" && o.DefaultBackend != "" {
		// The namespace goes into the path, before any query (s3://bucket?region=x).
		base, query, hasQuery := strings.Cut(o.DefaultBackend, "?")
		env[EnvBackendURL] = strings.TrimSuffix(base, "/") + "/" + namespace
		if hasQuery {
			env[EnvBackendURL] += "?" + query
		}
	}
	selfManaged := env[EnvBackendURL] != "" && !strings.HasPrefix(env[EnvBackendURL], "https://") && !strings.HasPrefix(env[EnvBackendURL], "http://")
	passphraseProvider := spec.SecretsProvider == "" || spec.SecretsProvider == "passphrase"
	if selfManaged && passphraseProvider && env[EnvPassphrase] == "" && env[EnvPassphraseFile] == "" && o.Passphrases != nil {
		path, err := o.Passphrases.File(namespace)
		if err != nil {
			return err
		}
		env[EnvPassphraseFile] = path
	}
	return nil
}

func configRefValue(ref pulumiv1.ConfigMapRef, s string) (json.RawMessage, error) {
	if !ref.JSON {
		return jsonString(s), nil
	}
	if !json.Valid([]byte(s)) {
		return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "key %q of ConfigMap %q is not valid JSON, but the configRef sets json: true", ref.Key, ref.Name)
	}
	return json.RawMessage(s), nil
}

// Refs reads the objects a Stack's references name, in the Stack's namespace only and each
// at most once per resolution. Resolve reads a Stack's inputs through it, and
// internal/source/git its git credentials.
type Refs struct {
	ctx  context.Context
	c    client.Reader
	ns   string
	opts Options
	// missing is the reason of the retryable fault a missing object or key gives.
	missing string
	objects map[string]client.Object // by kind/name
	secrets []string                 // names of the Secrets read, in order
}

// NewRefs returns a reader of namespace ns's objects, which reports a missing object or
// key as a retryable fault with reason missing.
func NewRefs(ctx context.Context, c client.Reader, ns string, o Options, missing string) *Refs {
	return &Refs{ctx: ctx, c: c, ns: ns, opts: o, missing: missing, objects: map[string]client.Object{}}
}

// SecretNames names the Secrets read so far, in the order they were first read.
func (r *Refs) SecretNames() []string { return slices.Clone(r.secrets) }

// Ref reads the value a reference names; field is where it sits in the spec, for
// messages. Env and FS references are refused unless Options allow them.
func (r *Refs) Ref(ref pulumiv1.ResourceRef, field string) (string, error) {
	switch ref.Type {
	case pulumiv1.ResourceSelectorLiteral:
		if ref.Literal == nil {
			return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "%s: type Literal needs literal.value", field)
		}
		return ref.Literal.Value, nil
	case pulumiv1.ResourceSelectorSecret:
		if ref.Secret == nil {
			return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "%s: type Secret needs secret.name and secret.key", field)
		}
		if ref.Secret.Namespace != "" && ref.Secret.Namespace != r.ns {
			return "", fault.Stall(pulumiv1.ReasonCrossNamespaceReference, "%s refers to Secret %s/%s: references must stay in the Stack's namespace %q", field, ref.Secret.Namespace, ref.Secret.Name, r.ns)
		}
		return r.SecretKey(ref.Secret.Name, ref.Secret.Key, field)
	case pulumiv1.ResourceSelectorEnv:
		if ref.Env == nil {
			return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "%s: type Env needs env.name", field)
		}
		if !r.opts.AllowEnvRefs {
			return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "%s: references of type Env would read the manager's environment and are disabled (start the manager with --allow-env-refs to permit them)", field)
		}
		v, ok := os.LookupEnv(ref.Env.Name)
		if !ok {
			return "", fault.Stall(pulumiv1.ReasonConfigUnavailable, "%s: environment variable %s is not set in the manager", field, ref.Env.Name)
		}
		return v, nil
	case pulumiv1.ResourceSelectorFS:
		if ref.FileSystem == nil {
			return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "%s: type FS needs filesystem.path", field)
		}
		return r.file(ref.FileSystem.Path, field)
	default:
		return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "%s: unknown reference type %q", field, ref.Type)
	}
}

func (r *Refs) file(path, field string) (string, error) {
	if r.opts.FSRoot == "" {
		return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "%s: references of type FS would read the manager's file system and are disabled (start the manager with --fs-ref-root to permit a directory)", field)
	}
	root := filepath.Clean(r.opts.FSRoot)
	p := filepath.Clean(path)
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	if !within(root, p) {
		return "", fault.Stall(pulumiv1.ReasonSpecInvalid, "%s: path %q is outside the permitted directory %s", field, path, root)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fault.Retry(pulumiv1.ReasonConfigUnavailable, "%s: failed to read %s: %v", field, p, err)
	}
	return string(b), nil
}

// SecretKey reads one key of a Secret.
func (r *Refs) SecretKey(name, key, field string) (string, error) {
	sec, err := r.Secret(name, field)
	if err != nil {
		return "", err
	}
	v, ok := sec.Data[key]
	if !ok {
		return "", fault.Retry(r.missing, "Secret %q has no key %q (%s)", name, key, field)
	}
	return string(v), nil
}

func (r *Refs) configMapKey(name, key, field string) (string, error) {
	cm, err := r.configMap(name, field)
	if err != nil {
		return "", err
	}
	if v, ok := cm.Data[key]; ok {
		return v, nil
	}
	if v, ok := cm.BinaryData[key]; ok {
		return string(v), nil
	}
	return "", fault.Retry(r.missing, "ConfigMap %q has no key %q (%s)", name, key, field)
}

// Secret reads a Secret.
func (r *Refs) Secret(name, field string) (*corev1.Secret, error) {
	o, err := r.get(&corev1.Secret{}, "Secret", name, field)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(r.secrets, name) {
		r.secrets = append(r.secrets, name)
	}
	return o.(*corev1.Secret), nil
}

func (r *Refs) configMap(name, field string) (*corev1.ConfigMap, error) {
	o, err := r.get(&corev1.ConfigMap{}, "ConfigMap", name, field)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.ConfigMap), nil
}

func (r *Refs) get(obj client.Object, kind, name, field string) (client.Object, error) {
	id := kind + "/" + name
	if o, ok := r.objects[id]; ok {
		return o, nil
	}
	if err := r.c.Get(r.ctx, client.ObjectKey{Namespace: r.ns, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fault.Retry(r.missing, "%s %q not found in namespace %q (%s)", kind, name, r.ns, field)
		}
		return nil, fmt.Errorf("failed to get %s %s/%s: %w", kind, r.ns, name, err)
	}
	r.objects[id] = obj
	return obj, nil
}

func (r *Refs) fingerprint() string {
	ids := slices.Sorted(maps.Keys(r.objects))
	var h hash.Hash
	if key := r.opts.FingerprintKey; len(key) > 0 {
		h = hmac.New(sha256.New, key)
	} else {
		h = sha256.New()
	}
	for _, id := range ids {
		o := r.objects[id]
		writeField(h, []byte(id))
		writeField(h, []byte(o.GetUID()))
		if len(r.opts.FingerprintKey) == 0 {
			writeField(h, []byte(o.GetResourceVersion()))
			continue
		}
		switch o := o.(type) {
		case *corev1.Secret:
			writeField(h, []byte(o.Type))
			writeMap(h, o.Data)
		case *corev1.ConfigMap:
			data := make(map[string][]byte, len(o.Data))
			for k, v := range o.Data {
				data[k] = []byte(v)
			}
			writeMap(h, data)
			writeMap(h, o.BinaryData)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeField writes b length-prefixed, so that no two different sequences of fields
// encode alike.
func writeField(h hash.Hash, b []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
	h.Write(b)
}

func writeMap(h hash.Hash, m map[string][]byte) {
	writeField(h, []byte(strconv.Itoa(len(m))))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		writeField(h, []byte(k))
		writeField(h, m[k])
	}
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// References names the Secrets and ConfigMaps of the Stack's own namespace that Resolve
// reads: what a destroy still needs once the Stack is deleted.
func References(stack *pulumiv1.Stack) (secrets, configMaps []string) {
	spec := &stack.Spec
	add := func(ref pulumiv1.ResourceRef) {
		if ref.Type == pulumiv1.ResourceSelectorSecret && ref.Secret != nil && (ref.Secret.Namespace == "" || ref.Secret.Namespace == stack.Namespace) {
			secrets = append(secrets, ref.Secret.Name)
		}
	}
	for _, ref := range spec.EnvRefs {
		add(ref)
	}
	for _, ref := range spec.SecretsRef {
		add(ref)
	}
	secrets = append(secrets, spec.EnvSecrets...)
	if spec.AccessTokenSecret != "" {
		secrets = append(secrets, spec.AccessTokenSecret)
	}
	configMaps = append(configMaps, spec.Envs...)
	for _, ref := range spec.ConfigRef {
		configMaps = append(configMaps, ref.Name)
	}
	slices.Sort(secrets)
	slices.Sort(configMaps)
	return slices.Compact(secrets), slices.Compact(configMaps)
}
