package flux

import (
	"fmt"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

var (
	env *kubetest.Env
	// Discovery snapshots taken while installFluxCRDs runs: before any Flux CRD, and with
	// only GitRepository. Static mappers, so that they keep describing those moments.
	mapperWithoutFlux, mapperWithGitRepositoryOnly meta.RESTMapper
)

func TestMain(m *testing.M) { kubetest.Main(m, &env, installFluxCRDs) }

// installFluxCRDs installs the stand-ins for source-controller's CRDs from testdata/crds,
// waiting until the API server serves them.
func installFluxCRDs(e *kubetest.Env) (func(), error) {
	var err error
	if mapperWithoutFlux, err = discoveryMapper(e.Config); err != nil {
		return nil, err
	}
	if err := installCRDs(e.Config, "gitrepositories.yaml"); err != nil {
		return nil, err
	}
	if mapperWithGitRepositoryOnly, err = discoveryMapper(e.Config); err != nil {
		return nil, err
	}
	if err := installCRDs(e.Config, "ocirepositories.yaml", "buckets.yaml"); err != nil {
		return nil, err
	}
	// The CRDs go away with the control plane.
	return func() {}, nil
}

func installCRDs(cfg *rest.Config, files ...string) error {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join("testdata", "crds", f)
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("failed to install Flux CRDs %v: %w", files, err)
	}
	return nil
}

func discoveryMapper(cfg *rest.Config) (meta.RESTMapper, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create discovery client: %w", err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, fmt.Errorf("failed to discover API groups: %w", err)
	}
	return restmapper.NewDiscoveryRESTMapper(groups), nil
}
