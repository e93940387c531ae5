package cluster

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// volumeLabel marks the PersistentVolumes the pool owns.
const volumeLabel = "stackwright.dev/cluster-volume"

// volumePool keeps a few host-path PersistentVolumes Available for claims that name no
// storage class, the way a cloud's default class would. The node has no provisioner: the
// in-tree host-path one creates root-owned 0750 directories that a non-root Pod cannot
// write, and its recycler needs a busybox image. A Released volume is wiped and made
// Available again, so installing, uninstalling and installing again works.
type volumePool struct {
	client kubernetes.Interface
	dir    string
	size   int
	logger *log.Logger
}

func (p volumePool) ensure(ctx context.Context) error {
	for i := range p.size {
		name := fmt.Sprintf("node-volume-%d", i)
		path := filepath.Join(p.dir, name)
		// A restarted node keeps the volumes it has, with their data.
		if _, err := p.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			continue
		}
		if err := resetDir(path); err != nil {
			return err
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{volumeLabel: "true"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr(corev1.HostPathDirectory)},
				},
			},
		}
		if _, err := p.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create volume %s: %w", name, err)
		}
	}
	return nil
}

// recycle returns Released volumes to the pool until ctx ends.
func (p volumePool) recycle(ctx context.Context) {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		list, err := p.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: volumeLabel})
		if err != nil {
			continue
		}
		for _, pv := range list.Items {
			if pv.Status.Phase != corev1.VolumeReleased || pv.Spec.HostPath == nil {
				continue
			}
			if err := resetDir(pv.Spec.HostPath.Path); err != nil {
				p.logger.Printf("volume %s: %v", pv.Name, err)
				continue
			}
			patch := []byte(`{"spec":{"claimRef":null}}`)
			if _, err := p.client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				p.logger.Printf("volume %s: failed to release claim: %v", pv.Name, err)
				continue
			}
			p.logger.Printf("volume %s recycled", pv.Name)
		}
	}
}

// resetDir empties dir and makes it writable by any Pod user (the Pods' own security
// context decides who they run as; fsGroup does not apply to host paths).
func resetDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("failed to empty %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return fmt.Errorf("failed to create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil { //nolint:gosec // any Pod user must write here
		return fmt.Errorf("failed to open %s to Pods: %w", dir, err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
