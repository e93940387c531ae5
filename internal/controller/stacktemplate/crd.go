package stacktemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/conversion"
)

// definition builds the CustomResourceDefinition of t's kind: for each of its versions,
// spec.parameters with that version's schema, the two output references, and the status
// every instance has. Versions are converted by their apiVersion alone (strategy None),
// which the breaking-change guard makes safe: each version reads what the others wrote;
// checkSpec points a kind whose versions rename parameters at the conversion webhook.
func definition(t *v1alpha1.StackTemplate) (*apiextensionsv1.CustomResourceDefinition, error) {
	api := t.Spec.API
	if err := checkStatusFields(t); err != nil {
		return nil, err
	}
	var versions []apiextensionsv1.CustomResourceDefinitionVersion
	var params []apiextensionsv1.JSONSchemaProps
	for _, v := range t.KindVersions() {
		schema, err := versionSchema(t, &v)
		if err != nil {
			return nil, err
		}
		params = append(params, schema.Properties["spec"].Properties["parameters"])
		cv := apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v.Name, Served: v.IsServed(), Storage: v.Name == t.StorageVersion(), Deprecated: v.Deprecated,
			Schema:                   &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schema},
			Subresources:             &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			AdditionalPrinterColumns: columns(t.Spec.StatusFields),
		}
		if v.Deprecated && v.DeprecationWarning != "" {
			cv.DeprecationWarning = ptr.To(v.DeprecationWarning)
		}
		versions = append(versions, cv)
	}
	if err := conversion.Check(t.KindVersions(), params); err != nil {
		return nil, err
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: t.DefinitionName(), Labels: map[string]string{v1alpha1.TemplateLabel: t.Name}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: api.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: api.Kind, ListKind: api.Kind + "List", Plural: api.Plural, Singular: strings.ToLower(api.Kind),
				ShortNames: api.ShortNames, Categories: categories(api.Categories),
			},
			Scope:      apiextensionsv1.NamespaceScoped,
			Versions:   versions,
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		},
	}, nil
}

// webhookConversion converts a template's instances through the manager's conversion
// webhook, at the template's own path.
func webhookConversion(base *apiextensionsv1.WebhookClientConfig, template string) *apiextensionsv1.CustomResourceConversion {
	cc := base.DeepCopy()
	path := conversion.PathPrefix + template
	switch {
	case cc.Service != nil:
		cc.Service.Path = &path
	case cc.URL != nil:
		cc.URL = ptr.To(strings.TrimSuffix(*cc.URL, "/") + path)
	}
	return &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook:  &apiextensionsv1.WebhookConversion{ClientConfig: cc, ConversionReviewVersions: []string{"v1"}},
	}
}

// parameters decodes a version's schema of spec.parameters; unset is an object that takes
// nothing.
func parameters(v *v1alpha1.TemplateVersion) (apiextensionsv1.JSONSchemaProps, error) {
	params := apiextensionsv1.JSONSchemaProps{Type: "object"}
	if p := v.Parameters; p != nil && len(p.Raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(p.Raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&params); err != nil {
			return params, fmt.Errorf("the parameters of version %s are not an OpenAPI v3 schema: %w", v.Name, err)
		}
	}
	if params.Type != "object" {
		return params, fmt.Errorf("the parameters of version %s must be a schema of type object, not %q", v.Name, params.Type)
	}
	return params, nil
}

// versionSchema is the schema of an instance in version v.
func versionSchema(t *v1alpha1.StackTemplate, v *v1alpha1.TemplateVersion) (*apiextensionsv1.JSONSchemaProps, error) {
	params, err := parameters(v)
	if err != nil {
		return nil, err
	}
	var required []string
	if len(params.Required) == 0 {
		// An empty object by default, so that the API server applies the parameters' own
		// defaults to an instance that sets none.
		params.Default = &apiextensionsv1.JSON{Raw: []byte("{}")}
	} else {
		// An empty object would not be a valid default (the API server refuses the
		// definition), and without parameters an instance would escape their required
		// fields: it must set them.
		required = []string{"parameters"}
	}
	spec := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Required:    required,
		Description: fmt.Sprintf("What the instance asks of StackTemplate %s.", t.Name),
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"parameters":                 params,
			"writeConnectionSecretToRef": localRef("A Secret in the instance's namespace that receives every output the template publishes; Stackwright creates and owns it."),
			"writeOutputsToConfigMapRef": localRef("A ConfigMap in the instance's namespace that receives the non-secret outputs the template publishes; Stackwright creates and owns it."),
		},
	}
	return &apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: fmt.Sprintf("%s is a self-service kind of StackTemplate %s: each one becomes a stack run by the platform team's Stackwright.", t.Spec.API.Kind, t.Name),
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": {Type: "string"},
			"kind":       {Type: "string"},
			"metadata":   {Type: "object"},
			"spec":       spec,
			"status":     statusSchema(t.Spec.StatusFields),
		},
	}, nil
}

func categories(c []string) []string {
	if slices.Contains(c, "stackwright") {
		return c
	}
	return append(slices.Clone(c), "stackwright")
}

func localRef(desc string) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{
		Type: "object", Description: desc, Required: []string{"name"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"name": {Type: "string", MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](253), Description: "Name of the object."},
		},
	}
}

// columns are the printer columns of every version: the instance's readiness and revision,
// then the status fields the template shows, and the age last, as kubectl's own are.
func columns(fields []v1alpha1.TemplateStatusField) []apiextensionsv1.CustomResourceColumnDefinition {
	cols := []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
		{Name: "Reason", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].reason`},
		{Name: "Revision", Type: "integer", JSONPath: ".status.templateRevision"},
	}
	for _, f := range fields {
		if f.PrinterColumn == "" {
			continue
		}
		col := apiextensionsv1.CustomResourceColumnDefinition{
			Name: columnName(f.Name), Type: string(f.Type), JSONPath: ".status.fields." + f.Name, Description: f.Description,
		}
		if f.PrinterColumn == v1alpha1.PrinterColumnWide {
			col.Priority = 1
		}
		cols = append(cols, col)
	}
	return append(cols, apiextensionsv1.CustomResourceColumnDefinition{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"})
}

// columnName is a status field's column header, capitalised as the others are (kubectl
// prints headers in upper case, other clients as they are).
func columnName(field string) string {
	return strings.ToUpper(field[:1]) + field[1:]
}

// checkStatusFields refuses status fields that could publish what the template does not
// (an output it does not list), that readyWhen names without declaring, or whose column
// would repeat one every instance has. Admission checks their shape.
func checkStatusFields(t *v1alpha1.StackTemplate) error {
	var errs []error
	names := map[string]bool{}
	for _, f := range t.Spec.StatusFields {
		names[f.Name] = true
		output, _, _ := strings.Cut(f.Output, ".")
		if !slices.Contains(t.PublishedOutputs(), output) {
			errs = append(errs, fmt.Errorf("status field %s: output %s is not one of spec.outputs (or spec.stacks[].outputs), the outputs an instance may receive", f.Name, output))
		}
		if f.PrinterColumn != "" && slices.ContainsFunc(builtinColumns, func(c string) bool { return strings.EqualFold(c, f.Name) }) {
			errs = append(errs, fmt.Errorf("status field %s: every instance has a column %s already; rename the field", f.Name, columnName(f.Name)))
		}
	}
	for _, n := range t.Spec.ReadyWhen {
		if !names[n] {
			errs = append(errs, fmt.Errorf("spec.readyWhen names %s, which spec.statusFields does not declare", n))
		}
	}
	return errors.Join(errs...)
}

// builtinColumns are the columns every instance kind has.
var builtinColumns = []string{"Ready", "Reason", "Revision", "Age"}

// fieldsSchema is the schema of status.fields: the template's status fields, typed.
func fieldsSchema(fields []v1alpha1.TemplateStatusField) apiextensionsv1.JSONSchemaProps {
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for _, f := range fields {
		desc := f.Description
		if desc == "" {
			desc = fmt.Sprintf("From the stack output %s.", f.Output)
		}
		p := apiextensionsv1.JSONSchemaProps{Type: string(f.Type), Description: desc}
		if f.Type == v1alpha1.StatusFieldInteger {
			p.Format = "int64"
		}
		props[f.Name] = p
	}
	return apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "The typed fields the template declares (its spec.statusFields), filled from the stack's non-secret outputs.",
		Properties:  props,
	}
}

// statusSchema is v1alpha1.InstanceStatus's schema, with the template's status fields.
func statusSchema(fields []v1alpha1.TemplateStatusField) apiextensionsv1.JSONSchemaProps {
	str := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "string", Description: desc}
	}
	integer := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int64", Description: desc}
	}
	timestamp := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time", Description: desc}
	}
	condition := apiextensionsv1.JSONSchemaProps{
		Type: "object", Required: []string{"type", "status", "reason", "message", "lastTransitionTime"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"type":               str("Ready, Reconciling or Stalled."),
			"status":             {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"True"`)}, {Raw: []byte(`"False"`)}, {Raw: []byte(`"Unknown"`)}}},
			"reason":             str("Why, in one word."),
			"message":            str("Why, in words."),
			"lastTransitionTime": timestamp("When the status last changed."),
			"observedGeneration": integer("The generation the condition describes."),
		},
	}
	return apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "What became of the instance.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"observedGeneration": integer("The generation the status describes."),
			"conditions": {
				Type: "array", Description: "Ready, Reconciling and Stalled (kstatus), mirrored from the instance's stack.",
				Items:        &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &condition},
				XListType:    ptr.To("map"),
				XListMapKeys: []string{"type"},
			},
			"templateRevision": integer("The template revision the instance's stack was rendered from."),
			"lastUpdate": {
				Type: "object", Description: "The last operation of the instance's stack.",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"type":    str("up, preview, refresh or destroy."),
					"state":   str("succeeded or failed."),
					"message": str("The operation's summary."),
					"time":    timestamp("When it ended."),
				},
			},
			"approval": {
				Type: "object", Description: "The change of the instance's stack that waits for, or had, an approval.",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"state":   str("Previewing, AwaitingApproval, Approved, Rejected, Blocked or Failed."),
					"preview": str("The preview of the change: the value of the stackwright.dev/approve annotation that approves it."),
					"summary": str("The preview's change summary."),
				},
			},
			"outputs": {
				Type: "object", Description: "The non-secret outputs the template publishes.",
				AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{
					XPreserveUnknownFields: ptr.To(true),
				}},
			},
			"fields": fieldsSchema(fields),
		},
	}
}
