package stacktemplate

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
	walk("status", reflect.TypeFor[v1alpha1.InstanceStatus](), statusSchema(nil))
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

// fieldsTemplate is a template of two versions that publishes url, port and db, with the
// given status fields.
func fieldsTemplate(fields ...v1alpha1.TemplateStatusField) *v1alpha1.StackTemplate {
	t := &v1alpha1.StackTemplate{ObjectMeta: metav1.ObjectMeta{Name: "databases"}}
	t.Spec.API = v1alpha1.TemplateAPI{Group: "db.example.com", Kind: "Database", Plural: "databases"}
	t.Spec.Versions = []v1alpha1.TemplateVersion{{Name: "v1alpha1"}, {Name: "v1", Storage: true}}
	t.Spec.Outputs = []string{"url", "port", "db"}
	t.Spec.StatusFields = fields
	return t
}

// Every version of the kind carries the status fields, typed, under status.fields, and
// the columns asked for between the instance's revision and its age.
func TestDefinition_StatusFields_TypedInEveryVersionWithTheirColumns(t *testing.T) {
	tmpl := fieldsTemplate(
		v1alpha1.TemplateStatusField{Name: "endpoint", Type: v1alpha1.StatusFieldString, Description: "Where to connect.", Output: "url", PrinterColumn: v1alpha1.PrinterColumnStandard},
		v1alpha1.TemplateStatusField{Name: "port", Type: v1alpha1.StatusFieldInteger, Output: "port", PrinterColumn: v1alpha1.PrinterColumnWide},
		v1alpha1.TemplateStatusField{Name: "load", Type: v1alpha1.StatusFieldNumber, Output: "db.load"},
		v1alpha1.TemplateStatusField{Name: "primary", Type: v1alpha1.StatusFieldBoolean, Output: "db.nodes.0.primary"},
	)
	tmpl.Spec.ReadyWhen = []string{"endpoint"}
	crd, err := definition(tmpl)
	if err != nil {
		t.Fatalf("definition() error = %v", err)
	}
	wantFields := map[string]apiextensionsv1.JSONSchemaProps{
		"endpoint": {Type: "string", Description: "Where to connect."},
		"port":     {Type: "integer", Format: "int64", Description: "From the stack output port."},
		"load":     {Type: "number", Description: "From the stack output db.load."},
		"primary":  {Type: "boolean", Description: "From the stack output db.nodes.0.primary."},
	}
	wantColumns := []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
		{Name: "Reason", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].reason`},
		{Name: "Revision", Type: "integer", JSONPath: ".status.templateRevision"},
		{Name: "Endpoint", Type: "string", JSONPath: ".status.fields.endpoint", Description: "Where to connect."},
		{Name: "Port", Type: "integer", JSONPath: ".status.fields.port", Priority: 1},
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
	if len(crd.Spec.Versions) != 2 {
		t.Fatalf("definition() has %d versions, want 2", len(crd.Spec.Versions))
	}
	for _, v := range crd.Spec.Versions {
		fields := v.Schema.OpenAPIV3Schema.Properties["status"].Properties["fields"]
		if diff := cmp.Diff(wantFields, fields.Properties); diff != "" {
			t.Errorf("version %s: status.fields (-want +got):\n%s", v.Name, diff)
		}
		if fields.Type != "object" || fields.XPreserveUnknownFields != nil {
			t.Errorf("version %s: status.fields is %q, preserving unknown fields %v; want an object that prunes what it does not declare", v.Name, fields.Type, fields.XPreserveUnknownFields)
		}
		if diff := cmp.Diff(wantColumns, v.AdditionalPrinterColumns); diff != "" {
			t.Errorf("version %s: printer columns (-want +got):\n%s", v.Name, diff)
		}
	}
}

func TestDefinition_StatusFields_RefusedAsTemplateInvalid(t *testing.T) {
	tests := []struct {
		name      string
		fields    []v1alpha1.TemplateStatusField
		readyWhen []string
		want      string
	}{
		{
			name:   "outputNotListed",
			fields: []v1alpha1.TemplateStatusField{{Name: "token", Type: v1alpha1.StatusFieldString, Output: "adminToken"}},
			want:   "status field token: output adminToken is not one of spec.outputs (or spec.stacks[].outputs), the outputs an instance may receive",
		},
		{
			name:   "pathIntoAnOutputNotListed",
			fields: []v1alpha1.TemplateStatusField{{Name: "host", Type: v1alpha1.StatusFieldString, Output: "internal.host"}},
			want:   "status field host: output internal is not one of spec.outputs (or spec.stacks[].outputs), the outputs an instance may receive",
		},
		{
			name:   "columnOfABuiltinName",
			fields: []v1alpha1.TemplateStatusField{{Name: "ready", Type: v1alpha1.StatusFieldBoolean, Output: "db.ready", PrinterColumn: v1alpha1.PrinterColumnWide}},
			want:   "status field ready: every instance has a column Ready already; rename the field",
		},
		{
			name:      "readyWhenUndeclared",
			fields:    []v1alpha1.TemplateStatusField{{Name: "endpoint", Type: v1alpha1.StatusFieldString, Output: "url"}},
			readyWhen: []string{"endpoint", "port"},
			want:      "spec.readyWhen names port, which spec.statusFields does not declare",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := fieldsTemplate(tt.fields...)
			tmpl.Spec.ReadyWhen = tt.readyWhen
			_, err := definition(tmpl)
			if diff := cmp.Diff(tt.want, fmt.Sprint(err)); diff != "" {
				t.Errorf("definition() error (-want +got):\n%s", diff)
			}
		})
	}
}

// Status fields are written by the controller only, never stored by tenants: the
// breaking-change guard leaves their changes alone, whatever they are.
func TestServedChanges_StatusFields_NeverBreaking(t *testing.T) {
	served, err := definition(fieldsTemplate(
		v1alpha1.TemplateStatusField{Name: "endpoint", Type: v1alpha1.StatusFieldString, Output: "url", PrinterColumn: v1alpha1.PrinterColumnStandard},
		v1alpha1.TemplateStatusField{Name: "port", Type: v1alpha1.StatusFieldString, Output: "port"},
	))
	if err != nil {
		t.Fatal(err)
	}
	served.Status.StoredVersions = []string{"v1alpha1", "v1"}
	want, err := definition(fieldsTemplate(v1alpha1.TemplateStatusField{Name: "port", Type: v1alpha1.StatusFieldInteger, Output: "port"}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string(nil), servedChanges(served, want)); diff != "" {
		t.Errorf("servedChanges() of a field removed and a type changed (-want +got):\n%s", diff)
	}
}

func TestWebhookConversion_ClientConfig_AtTheTemplatesPath(t *testing.T) {
	ca := []byte("ca")
	tests := []struct {
		name string
		base apiextensionsv1.WebhookClientConfig
		want apiextensionsv1.WebhookClientConfig
	}{
		{
			name: "service",
			base: apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: "sw", Name: "conv", Port: ptr.To[int32](443)}, CABundle: ca},
			want: apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: "sw", Name: "conv", Port: ptr.To[int32](443), Path: ptr.To("/convert/queues")}, CABundle: ca},
		},
		{
			name: "url",
			base: apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9444/"), CABundle: ca},
			want: apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9444/convert/queues"), CABundle: ca},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := tt.base.DeepCopy()
			got := webhookConversion(base, "queues")
			want := &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook:  &apiextensionsv1.WebhookConversion{ClientConfig: &tt.want, ConversionReviewVersions: []string{"v1"}},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("webhookConversion() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(&tt.base, base); diff != "" {
				t.Errorf("webhookConversion() changed its base (-want +got):\n%s", diff)
			}
		})
	}
}
