package compat_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stackwright/stackwright/internal/testing/repo"
)

// pkoCRDDir names a directory holding PKO's own CRDs (pulumi.com_stacks.yaml and
// pulumi.com_programs.yaml from PKO's operator/config/crd/bases). PKO's files are not
// part of this repository, so the check that uses them runs only when it is set.
const pkoCRDDir = "PKO_CRD_DIR"

// The "# pko:" line of each manifest is a claim about PKO's CRD schema, and the acceptance
// rule rests on it. Given PKO's CRDs, this test checks the claims on a second API server
// that has PKO's CRDs installed instead of Stackwright's. Only admitted or rejected is
// compared: PKO's messages are not Stackwright's business.
func TestCompat_Create_PKOLinesMatchPKOsCRDs(t *testing.T) {
	dir := os.Getenv(pkoCRDDir)
	if dir == "" {
		t.Skipf("%s is unset; see test/compat/README.md", pkoCRDDir)
	}
	manifests := readManifests(t)
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		bin, err := repo.Bin()
		if err != nil {
			t.Fatal(err)
		}
		assets = bin
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{dir},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("failed to start a control plane with PKO's CRDs from %s: %v", filepath.Clean(dir), err)
	}
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("failed to stop PKO's control plane: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("failed to create client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)

	for _, m := range manifests {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			obj := m.obj.DeepCopy()
			obj.SetNamespace("default")
			err := c.Create(ctx, obj, client.FieldValidation("Strict"))
			got := admitted
			if err != nil {
				got = rejected
			}
			if diff := cmp.Diff(m.header.pko, got); diff != "" {
				t.Errorf("PKO's CRDs and the pko line disagree (-pko line +PKO's CRDs):\n%s\nerror: %v", diff, err)
			}
		})
	}
}
