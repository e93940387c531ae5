package job

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

const defaultsList = "configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected, secret"

// refusal is the error parseWorkspaceTemplate gives for volume name of type typ.
func refusal(name, typ, allowed string) string {
	return fmt.Sprintf("workspaceTemplate volume %q is of type %s, which runner Pods may not mount (allowed: %s; a platform admin can allow more with --runner-allowed-volume-types)", name, typ, allowed)
}

func TestParseWorkspaceTemplate_Volumes_AllowListRefusesOtherTypes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		volumes string
		allowed []string
		wantErr string
	}{
		{
			name: "every default type is allowed",
			volumes: `{"name":"a","configMap":{"name":"c"}},{"name":"b","secret":{"secretName":"s"}},{"name":"c","emptyDir":{}},
			  {"name":"d","projected":{"sources":[]}},{"name":"e","downwardAPI":{}},{"name":"f","persistentVolumeClaim":{"claimName":"p"}},
			  {"name":"g","ephemeral":{"volumeClaimTemplate":{"spec":{"storageClassName":"standard"}}}},{"name":"h","csi":{"driver":"d"}}`,
		},
		{
			name:    "nfs mounts a server with the node's network identity",
			volumes: `{"name":"data","nfs":{"server":"10.0.0.1","path":"/exports"}}`,
			wantErr: `workspaceTemplate volume "data" is of type nfs, which runner Pods may not mount (allowed: configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected, secret; a platform admin can allow more with --runner-allowed-volume-types)`,
		},
		{
			name:    "hostPath reaches the node's disk",
			volumes: `{"name":"root","hostPath":{"path":"/"}}`,
			wantErr: refusal("root", "hostPath", defaultsList),
		},
		{
			name:    "flexVolume runs a driver on the node",
			volumes: `{"name":"flex","flexVolume":{"driver":"x/y"}}`,
			wantErr: refusal("flex", "flexVolume", defaultsList),
		},
		{
			name:    "gitRepo runs git on the node",
			volumes: `{"name":"src","gitRepo":{"repository":"https://example.com/r.git"}}`,
			wantErr: refusal("src", "gitRepo", defaultsList),
		},
		{
			name:    "image, a newer type, is refused by default",
			volumes: `{"name":"tools","image":{"reference":"example.com/tools:1"}}`,
			wantErr: refusal("tools", "image", defaultsList),
		},
		{
			name:    "a refused volume is named even after allowed ones",
			volumes: `{"name":"ok","emptyDir":{}},{"name":"disk","iscsi":{"targetPortal":"p","iqn":"i","lun":0}}`,
			wantErr: refusal("disk", "iscsi", defaultsList),
		},
		{
			name:    "a volume without a source is the emptyDir the API server makes of it",
			volumes: `{"name":"bare"}`,
		},
		{
			name:    "a volume without a source is refused where emptyDir is not allowed",
			volumes: `{"name":"bare"}`,
			allowed: []string{"configMap"},
			wantErr: refusal("bare", "emptyDir", "configMap"),
		},
		{
			name:    "an admin may allow nfs",
			volumes: `{"name":"data","nfs":{"server":"10.0.0.1","path":"/exports"}}`,
			allowed: append(DefaultAllowedVolumeTypes(), "nfs"),
		},
		{
			name:    "an admin's list replaces the defaults",
			volumes: `{"name":"cfg","configMap":{"name":"c"}}`,
			allowed: []string{"secret", "nfs"},
			wantErr: refusal("cfg", "configMap", "nfs, secret"),
		},
		{
			name:    "an empty list allows none",
			volumes: `{"name":"scratch","emptyDir":{}}`,
			allowed: []string{},
			wantErr: refusal("scratch", "emptyDir", "none"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := workspaceTemplate(t, `{"spec":{"podTemplate":{"spec":{"volumes":[`+tc.volumes+`]}}}}`)
			// The drivers and classes are Placement's to check (placement_test.go).
			_, err := parseWorkspaceTemplate(tmpl, Placement{VolumeTypes: tc.allowed, CSIDrivers: []string{"d"}, StorageClasses: []string{"standard"}})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// The allow-list is checked against the types read from corev1.VolumeSource: every one of
// its fields must be read as a type, or a type would escape the check.
func TestVolumeTypes_EveryVolumeSourceFieldIsAType(t *testing.T) {
	src := reflect.TypeFor[corev1.VolumeSource]()
	for i, name := range volumeSourceTypes {
		f := src.Field(i)
		if f.Type.Kind() != reflect.Pointer || name == "" || name == "-" {
			t.Errorf("field %s (%s) is read as type %q; want a pointer with a JSON name", f.Name, f.Type, name)
		}
		// Setting the field alone must make the volume of that type.
		v := corev1.Volume{}
		reflect.ValueOf(&v.VolumeSource).Elem().Field(i).Set(reflect.New(f.Type.Elem()))
		if diff := cmp.Diff([]string{name}, volumeTypes(&v)); diff != "" {
			t.Errorf("volume with %s set: types (-want +got):\n%s", f.Name, diff)
		}
	}
}

func TestValidateAllowedVolumeTypes_UnknownTypesRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		types   []string
		wantErr bool
	}{
		{name: "the defaults are known", types: DefaultAllowedVolumeTypes()},
		{name: "nfs added is known", types: []string{"secret", "nfs"}},
		{name: "none at all", types: []string{}},
		{name: "misspelt type", types: []string{"configmap"}, wantErr: true},
		{name: "Go field name instead of JSON name", types: []string{"PersistentVolumeClaim"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := ValidateAllowedVolumeTypes(tc.types); (err != nil) != tc.wantErr {
				t.Errorf("ValidateAllowedVolumeTypes(%q) = %v; want error: %v", tc.types, err, tc.wantErr)
			}
		})
	}
}
