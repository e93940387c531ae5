package stacktemplate

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The instance kinds' status schema is written by hand; a field of InstanceStatus it
// lacks would be pruned by the API server from every status the controller writes.
func TestStatusSchema_Fields_CoverInstanceStatus(t *testing.T) {
	var missing []string
	var walk func(path string, typ reflect.Type, schema apiextensionsv1.JSONSchemaProps)
	walk = func(path string, typ reflect.Type, schema apiextensionsv1.JSONSchemaProps) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ.PkgPath() != reflect.TypeFor[v1alpha1.InstanceStatus]().PkgPath() {
			return
		}
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			sub, ok := schema.Properties[name]
			if !ok {
				missing = append(missing, path+"."+name)
				continue
			}
			walk(path+"."+name, f.Type, sub)
		}
	}
	walk("status", reflect.TypeFor[v1alpha1.InstanceStatus](), statusSchema())
	slices.Sort(missing)
	if diff := cmp.Diff([]string(nil), missing); diff != "" {
		t.Errorf("fields missing from the status schema (-want +got):\n%s", diff)
	}
}

func TestRevisionName_Names_ValidAndDistinct(t *testing.T) {
	long := strings.Repeat("t", 253)
	tests := []struct {
		name     string
		template string
		rev      int64
		want     string
	}{
		{name: "shortNameKeepsTheTemplatesName", template: "bucket", rev: 3, want: "bucket-3"},
		{name: "longNameIsShortenedWithAHash", template: long, rev: 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := v1alpha1.RevisionName(tt.template, tt.rev)
			if tt.want != "" && got != tt.want {
				t.Errorf("RevisionName() = %q, want %q", got, tt.want)
			}
			if len(got) > 253 || !strings.HasSuffix(got, "-12") && tt.want == "" {
				t.Errorf("RevisionName() = %q: too long or without its revision", got)
			}
		})
	}
	if v1alpha1.RevisionName(long+"a", 1) == v1alpha1.RevisionName(long+"b", 1) {
		t.Error("RevisionName() of two long templates differing at the end collide")
	}
}
