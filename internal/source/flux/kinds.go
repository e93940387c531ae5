package flux

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
)

// Group is the API group of Flux's source-controller.
const Group = "source.toolkit.fluxcd.io"

// versions are the API versions a Stack may reference, most preferred first. v1beta2 is
// still what many manifests (and PKO's examples) say; v1 is what current Flux stores. Both
// carry the same status.artifact, so either works for every kind.
var versions = []string{"v1", "v1beta2"}

// kinds are the Flux sources whose artifact is a tarball of files a Pulumi project can live
// in. HelmRepository and HelmChart publish Helm indexes and charts, not programs.
var kinds = []string{"GitRepository", "OCIRepository", "Bucket"}

// Kinds returns every GroupVersionKind a Stack's spec.fluxSource.sourceRef may name.
func Kinds() []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, 0, len(kinds)*len(versions))
	for _, k := range kinds {
		for _, v := range versions {
			out = append(out, schema.GroupVersionKind{Group: Group, Version: v, Kind: k})
		}
	}
	return out
}

// Watchable returns, for each supported kind whose CRD the cluster serves, the one version
// to watch it through: v1 when served, else v1beta2. One version per kind is enough because
// the API server converts between them (a Stack naming v1beta2 still hears about changes
// seen through v1), and watching both would deliver every change twice. Kinds the cluster
// does not serve are left out, so that a manager starts where Flux is not installed; an error
// means discovery itself failed, and the caller should not guess.
func Watchable(mapper meta.RESTMapper) ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	for _, k := range kinds {
		for _, v := range versions {
			gvk := schema.GroupVersionKind{Group: Group, Version: v, Kind: k}
			_, err := mapper.RESTMapping(gvk.GroupKind(), v)
			if meta.IsNoMatchError(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("failed to discover %s: %w", gvk, err)
			}
			out = append(out, gvk)
			break
		}
	}
	return out, nil
}

// IndexKey returns the key ("<kind>/<name>") under which a field index should list stack,
// matching ObjectIndexKey of the Flux object it references, or "" when stack references no
// supported Flux source. The key has no version, so one watch per kind serves Stacks that
// reference either version, and no namespace: index lookups are made within the object's
// namespace, which is the only one a Stack can reference.
func IndexKey(stack *pulumiv1.Stack) string {
	fs := stack.Spec.FluxSource
	if fs == nil {
		return ""
	}
	gvk, err := sourceGVK(fs.SourceRef)
	if err != nil {
		return ""
	}
	return gvk.Kind + "/" + fs.SourceRef.Name
}

// ObjectIndexKey returns the key IndexKey gives the Stacks that reference obj, or "" when
// obj is not a supported Flux source. obj must carry its kind, as unstructured objects from
// a watch do.
func ObjectIndexKey(obj client.Object) string {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Group != Group || !slices.Contains(kinds, gvk.Kind) {
		return ""
	}
	return gvk.Kind + "/" + obj.GetName()
}

// sourceGVK validates a sourceRef. Exact matches only: kinds are case-sensitive in the API,
// and guessing what "gitrepository" or "source.toolkit.fluxcd.io" (no version) meant would
// make the Stack depend on whatever the guess resolves to later.
func sourceGVK(ref pulumiv1.FluxSourceReference) (schema.GroupVersionKind, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != Group || !slices.Contains(versions, gv.Version) {
		return schema.GroupVersionKind{}, fault.Stall(pulumiv1.ReasonSpecInvalid,
			"spec.fluxSource.sourceRef.apiVersion %q is not supported; want %s", ref.APIVersion, alternatives(Group+"/", versions))
	}
	if !slices.Contains(kinds, ref.Kind) {
		return schema.GroupVersionKind{}, fault.Stall(pulumiv1.ReasonSpecInvalid,
			"spec.fluxSource.sourceRef.kind %q is not supported; want %s", ref.Kind, alternatives("", kinds))
	}
	return gv.WithKind(ref.Kind), nil
}

func alternatives(prefix string, names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = fmt.Sprintf("%q", prefix+n)
	}
	if len(quoted) == 1 {
		return quoted[0]
	}
	return strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}
