package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StackTemplateSpec is a self-service API that a platform team publishes: a namespaced kind
// whose instances, created by tenants in their own namespaces, each become a Stack in the
// platform namespace, run under the template's identity.
// +kubebuilder:validation:XValidation:rule="!has(self.versions) || !has(self.parameters)",message="spec.parameters and spec.versions are exclusive: give each version its parameters"
// +kubebuilder:validation:XValidation:rule="!has(self.versions) || self.versions.exists_one(v, has(v.storage) && v.storage)",message="exactly one of spec.versions must be the storage version"
// +kubebuilder:validation:XValidation:rule="!has(self.versions) || self.versions.all(v, !(has(v.storage) && v.storage) || !has(v.served) || v.served)",message="the storage version must be served"
// +kubebuilder:validation:XValidation:rule="!has(self.readyWhen) || self.readyWhen.all(n, has(self.statusFields) && self.statusFields.exists(f, f.name == n))",message="spec.readyWhen names a field spec.statusFields does not declare"
type StackTemplateSpec struct {
	// API is the kind the template defines. Stackwright installs its CustomResourceDefinition
	// (<plural>.<group>), which tenants use with plain kubectl. It cannot change: another
	// kind is another template.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.api is immutable: another kind is another template"
	API TemplateAPI `json:"api"`

	// Parameters is the OpenAPI v3 schema of an instance's spec.parameters: what a tenant
	// may set, with its types, defaults, enums and ranges. It must be a structural schema
	// (the API server says why when it is not). Unset, an instance takes no parameters.
	// With spec.versions, each version has its own, and this must be unset.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Parameters *apiextensionsv1.JSON `json:"parameters,omitempty"`

	// Versions are the kind's versions, when it has evolved: each with its parameters'
	// schema, whether it is served, deprecated, and which one instances are stored in.
	// Listed oldest first: each version's schema must read every instance a version before
	// it wrote (only additions: no property removed, no type changed, no new required
	// field without a default), since instances are converted between versions by their
	// apiVersion alone. Unset, the kind has one version, spec.api.version, with
	// spec.parameters; set, spec.api.version is not used.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	Versions []TemplateVersion `json:"versions,omitempty"`

	// Namespace is the platform namespace: each instance's Stack lives there, and every
	// reference of Stack (its program, backend credentials, envRefs, Secrets,
	// ServiceAccount) is looked up there. Tenants need no rights in it.
	// It cannot change: the instances' Stacks and their state live there.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.namespace is immutable: the instances' Stacks live there"
	Namespace string `json:"namespace"`

	// Stack is the Stack each instance becomes: a pulumi.com/v1 Stack's spec, every field
	// as a Stack has it (a field the Stack kind does not know Stalls the template). Its
	// stack is a prefix: an instance's stack is <stack>.<namespace>.<name> (shortened with
	// a hash when longer than 100 characters). Config gains the mapped parameters, and the
	// outputs are exported to a Secret in the platform namespace for Stackwright to publish
	// from. It is kept schemaless here, so that the template's CRD does not carry a second
	// copy of the Stack's (which embeds a Pod's); the manager checks it.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Stack apiextensionsv1.JSON `json:"stack"`

	// Config maps parameters, and outputs of the Stacks of spec.stacks, to stack config.
	// +optional
	// +listType=map
	// +listMapKey=key
	Config []TemplateConfig `json:"config,omitempty"`

	// Stacks are further Stacks each instance becomes, beside spec.stack's, in the same
	// platform namespace: a composition. Each is created once the Stacks it depends on
	// (its dependsOn, and those whose outputs its config reads) are Ready and have
	// published their outputs, and deleted only once the Stacks that depend on it are
	// gone. The Stack of spec.stack depends on all of them: it is created last and deleted
	// first. The instance is Ready when all of its Stacks are.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	Stacks []TemplateStack `json:"stacks,omitempty"`

	// Objects are Kubernetes objects each instance gets in its own namespace once all of
	// its Stacks are Ready, owned by the instance, and deleted first when it is deleted.
	// Only kinds the install allows (--template-object-kinds) are made; a template listing
	// another is Stalled.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=20
	Objects []TemplateObject `json:"objects,omitempty"`

	// Outputs names the stack outputs a tenant receives: all of them in the Secret its
	// instance names (spec.writeConnectionSecretToRef), the non-secret ones also in the
	// ConfigMap it names (spec.writeOutputsToConfigMapRef) and in its status. Outputs not
	// listed never leave the platform namespace.
	// +optional
	// +listType=set
	Outputs []string `json:"outputs,omitempty"`

	// StatusFields are typed fields of an instance's status (status.fields.<name>), each
	// filled from a non-secret output the template lists in Outputs: the kind's
	// definition gives them a schema, so kubectl explain describes them, and may show them
	// as columns of kubectl get. They are the kind's, not a revision's: a change reaches
	// every instance at once. Outputs keep reaching the tenant's Secret and ConfigMap as
	// Outputs says.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=20
	StatusFields []TemplateStatusField `json:"statusFields,omitempty"`

	// ReadyWhen names status fields an instance needs to be Ready: until each is set (a
	// string non-empty), an instance whose Stack is Ready is Reconciling with reason
	// AwaitingStatusFields, naming the fields it waits for.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:Pattern=`^[a-z][A-Za-z0-9]*$`
	// +kubebuilder:validation:items:MaxLength=63
	ReadyWhen []string `json:"readyWhen,omitempty"`

	// NamespaceSelector selects the namespaces whose instances are served, by the
	// namespaces' labels. Unset, or empty, selects every namespace. An instance elsewhere
	// gets Stalled with reason NamespaceNotAllowed and no Stack.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// ProtectInstances protects every instance of the kind from deletion: the install's
	// template protection policy (config/templates, installed by the chart) refuses to
	// delete one unless it is annotated stackwright.dev/protected=false, a person's
	// decision that its stack may go. Unset, an instance is protected only by that
	// annotation set to "true" on it, or on its Stack.
	// +optional
	ProtectInstances bool `json:"protectInstances,omitempty"`

	// UpdateStrategy says how existing instances follow a change of the template.
	// +optional
	UpdateStrategy TemplateUpdateStrategy `json:"updateStrategy,omitempty"`
	// InstanceMessages says what an instance's status repeats of its Stack's messages.
	// Reasons (the default) gives the tenant the conditions' reasons and states only: the
	// messages are the platform's, and may name objects of the platform namespace (a
	// Secret the Stack reads, a backend) or quote its program's errors. Full repeats them.
	// +optional
	// +kubebuilder:default=Reasons
	InstanceMessages InstanceMessagePolicy `json:"instanceMessages,omitempty"`
	// Approvers may approve or reject the changes of instances whose stack requires
	// approval (spec.stack.stackwright.approval: Manual), on the instance itself:
	// kubectl annotate <kind> <name> stackwright.dev/approve=<preview>. The API server
	// checks who sets the annotation, from the request's user, through the admission
	// policy the install ships (--template-approval-policy); without that policy in
	// force, or without approvers, annotations on instances are ignored and only the
	// platform team approves, on the Stack.
	// +optional
	Approvers *TemplateApprovers `json:"approvers,omitempty"`
}

// TemplateVersion is one version of a template's kind.
type TemplateVersion struct {
	// Name is the version, e.g. v1 or v2beta1.
	// +kubebuilder:validation:Pattern=`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Served: the API server accepts and returns instances in this version. Unset means
	// true; the storage version must be served.
	// +optional
	Served *bool `json:"served,omitempty"`
	// Storage marks the version instances are stored in: exactly one. When it changes,
	// Stackwright rewrites the instances stored in older versions (their content is
	// unchanged, so no Stack runs an update for it) and then lets the definition forget
	// those versions.
	// +optional
	Storage bool `json:"storage,omitempty"`
	// Deprecated makes the API server answer every request in this version with a
	// warning (kubectl prints it), DeprecationWarning or its own.
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
	// DeprecationWarning is the warning of a deprecated version, e.g. "use v2: v1 goes in
	// March".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	DeprecationWarning string `json:"deprecationWarning,omitempty"`
	// Parameters is this version's schema of an instance's spec.parameters (as
	// spec.parameters is for a kind of one version).
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Parameters *apiextensionsv1.JSON `json:"parameters,omitempty"`
	// Renames are the parameters this version renamed from the version before it in
	// spec.versions. The API server then converts instances between versions through the
	// manager's conversion webhook (--conversion-webhook-bind-address), which moves each
	// renamed value; without renames, versions are converted by their apiVersion alone.
	// +optional
	// +listType=map
	// +listMapKey=from
	// +kubebuilder:validation:MaxItems=64
	Renames []ParameterRename `json:"renames,omitempty"`
}

// ParameterRename is a parameter the version before renamed: its value moves from From to
// To converting an instance up, and back converting down. Both are paths of properties
// under spec.parameters, dot-separated for nested objects (e.g. network.cidr); the
// property's schema type must be the same in both versions.
type ParameterRename struct {
	// From is the parameter's path in the version before.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$`
	// +kubebuilder:validation:MaxLength=253
	From string `json:"from"`
	// To is the parameter's path in this version.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$`
	// +kubebuilder:validation:MaxLength=253
	To string `json:"to"`
}

// TemplateStatusField is a typed field of an instance's status, filled from a stack output.
type TemplateStatusField struct {
	// Name is the field's name in the instance's status: status.fields.<name>. A letter
	// then letters and digits, so that it is a plain JSONPath step.
	// +kubebuilder:validation:Pattern=`^[a-z][A-Za-z0-9]*$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Type is the field's type in the kind's schema. The output's value is converted to
	// it: a string takes a string, number or boolean (as its JSON text); an integer takes
	// a whole number, or a string that is one; a number any number, or a string that is
	// one; a boolean true or false, or the string "true" or "false". Any other value
	// leaves the field unset, with a StatusFieldUnset event.
	Type StatusFieldType `json:"type"`

	// Description says what the field is: kubectl explain shows it, and a printer column
	// its description.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// Output is the stack output the field is filled from, one of Outputs, optionally
	// followed by a dotted path into a structured output's value: url, db.host, or
	// endpoints.0 (an array's first element). An output the stack marks secret never
	// fills a field: the field stays unset, with a StatusFieldUnset event.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`
	Output string `json:"output"`

	// PrinterColumn shows the field in kubectl get: Standard, in every listing, or Wide,
	// with kubectl get -o wide only. Unset, the field is not a column.
	// +optional
	PrinterColumn PrinterColumn `json:"printerColumn,omitempty"`
}

// StatusFieldType is the type of a status field.
// +kubebuilder:validation:Enum=string;integer;number;boolean
type StatusFieldType string

// The types a status field may have: OpenAPI's, and a printer column's.
const (
	StatusFieldString  StatusFieldType = "string"
	StatusFieldInteger StatusFieldType = "integer"
	StatusFieldNumber  StatusFieldType = "number"
	StatusFieldBoolean StatusFieldType = "boolean"
)

// PrinterColumn says whether kubectl get shows a status field.
// +kubebuilder:validation:Enum=Standard;Wide
type PrinterColumn string

const (
	// PrinterColumnStandard: a column of every kubectl get listing.
	PrinterColumnStandard PrinterColumn = "Standard"
	// PrinterColumnWide: a column of kubectl get -o wide only.
	PrinterColumnWide PrinterColumn = "Wide"
)

// TemplateApprovers names who may approve an instance's change.
type TemplateApprovers struct {
	// Groups: a user in any of them may approve or reject, as the API server authenticated
	// the user (e.g. from OIDC claims), never as the annotation says.
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	Groups []string `json:"groups"`
}

// TemplateAPI names the kind a StackTemplate defines.
type TemplateAPI struct {
	// Group is the kind's API group. The manager serves only the groups its install
	// allows (--template-api-groups); a template of any other group is Stalled.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`
	Group string `json:"group"`

	// Version is the kind's only version, when spec.versions is unset.
	// +optional
	// +kubebuilder:default=v1alpha1
	// +kubebuilder:validation:Pattern=`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`
	Version string `json:"version,omitempty"`

	// Kind is the kind's name, e.g. PostgresDatabase.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind"`

	// Plural is the resource's name in URLs and kubectl, e.g. postgresdatabases.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Plural string `json:"plural"`

	// ShortNames are kubectl's abbreviations of the kind.
	// +optional
	ShortNames []string `json:"shortNames,omitempty"`

	// Categories add the kind to kubectl get <category>; "stackwright" is always one.
	// +optional
	Categories []string `json:"categories,omitempty"`
}

// TemplateConfig sets one stack config key from a parameter or from an output of another
// of the instance's Stacks.
// +kubebuilder:validation:XValidation:rule="has(self.parameter) != has(self.stackOutput)",message="set exactly one of parameter and stackOutput"
type TemplateConfig struct {
	// Key is the config key, e.g. bucket:size (a key without a namespace gets the project's).
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`

	// Parameter is the parameter's path under spec.parameters, its fields separated by
	// dots, e.g. size or tags.owner. Unset in an instance (and without a default in the
	// schema), the key is not set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`
	Parameter string `json:"parameter,omitempty"`

	// StackOutput takes the value from an output of one of the Stacks of spec.stacks,
	// as that Stack publishes it in the platform namespace (a string as its text,
	// another value as its JSON): the Stack reading it depends on that Stack. An output
	// the engine keeps secret is read only by a secret key.
	// +optional
	StackOutput *TemplateStackOutput `json:"stackOutput,omitempty"`

	// Secret makes the key secret config: the engine encrypts it in the state, and its
	// value never appears in the Stack's spec (it is passed through a Secret in the
	// platform namespace).
	// +optional
	Secret bool `json:"secret,omitempty"`
}

// TemplateStackOutput names an output of one of a template's spec.stacks.
type TemplateStackOutput struct {
	// Stack is the name of the entry of spec.stacks.
	// +kubebuilder:validation:MinLength=1
	Stack string `json:"stack"`
	// Output is the output's name.
	// +kubebuilder:validation:MinLength=1
	Output string `json:"output"`
}

// TemplateStack is one more Stack each instance of a composed template becomes.
type TemplateStack struct {
	// Name names the Stack within the template: config and dependsOn refer to it, and it
	// is part of each instance's Stack's name (<template>-<name>-<namespace>-<instance>,
	// shortened, plus a hash).
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=30
	Name string `json:"name"`

	// Stack is this Stack's spec, as spec.stack is (its stack a prefix, which must differ
	// from every other Stack's of the template).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Stack apiextensionsv1.JSON `json:"stack"`

	// Config maps parameters, and outputs of the other Stacks of spec.stacks, to this
	// Stack's config.
	// +optional
	// +listType=map
	// +listMapKey=key
	Config []TemplateConfig `json:"config,omitempty"`

	// Outputs names this Stack's outputs a tenant receives, with those of spec.outputs
	// (a name may be listed once across the template).
	// +optional
	// +listType=set
	Outputs []string `json:"outputs,omitempty"`

	// DependsOn names other entries of spec.stacks this Stack waits for, besides those
	// whose outputs its config reads.
	// +optional
	// +listType=set
	DependsOn []string `json:"dependsOn,omitempty"`
}

// TemplateObject is a Kubernetes object each instance gets in its own namespace.
type TemplateObject struct {
	// Name names the object within the template; the object's name is
	// <instance>-<name> (shortened with a hash when too long).
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Object is the object's manifest: apiVersion, kind, and what the kind holds
	// (spec, data...); its metadata may set labels and annotations only. In every string
	// value, ${parameters.<path>} is replaced by the instance's parameter and
	// ${outputs.<name>} by a non-secret output the template lists. A placeholder that is
	// the whole string keeps the value's type (a number stays a number); one within text
	// becomes the value's text. Only strings, numbers and booleans are substituted, so a
	// parameter never adds structure to the object.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Object apiextensionsv1.JSON `json:"object"`
}

// InstanceMessagePolicy says what an instance's status repeats of its Stack's messages.
// +kubebuilder:validation:Enum=Reasons;Full
type InstanceMessagePolicy string

const (
	// InstanceMessagesReasons: reasons and states only; each message says where the
	// details are (the Stack in the platform namespace).
	InstanceMessagesReasons InstanceMessagePolicy = "Reasons"
	// InstanceMessagesFull: the Stack's condition and last update messages as they are.
	InstanceMessagesFull InstanceMessagePolicy = "Full"
)

// TemplateUpdateStrategyType names how instances follow a template change.
// +kubebuilder:validation:Enum=AllAtOnce;Hold
type TemplateUpdateStrategyType string

const (
	// UpdateStrategyAllAtOnce: every instance's Stack is rendered again from the new
	// revision at once; each Stack then runs its up as the executor's queue allows.
	UpdateStrategyAllAtOnce TemplateUpdateStrategyType = "AllAtOnce"
	// UpdateStrategyHold: an instance stays at the revision its Stack was rendered from
	// (a change of its parameters is rendered from that revision too) until someone
	// opens a newer one for it, with the stackwright.dev/open-template-revision
	// annotation on its Stack in the platform namespace. New instances start at the
	// latest revision.
	UpdateStrategyHold TemplateUpdateStrategyType = "Hold"
)

// OpenTemplateRevisionAnnotation, on the Stack of an instance of a template with the Hold
// strategy, lets the instance move to a newer revision: a revision number, or "latest"
// for whatever revision is latest. It sits on the Stack, in the platform namespace, so
// that only the platform team (or a rollout it runs) opens revisions, not tenants.
const OpenTemplateRevisionAnnotation = "stackwright.dev/open-template-revision"

// TemplateUpdateStrategy says how existing instances follow a change of the template.
type TemplateUpdateStrategy struct {
	// Type is AllAtOnce (the default) or Hold.
	// +optional
	// +kubebuilder:default=AllAtOnce
	Type TemplateUpdateStrategyType `json:"type,omitempty"`
}

// StackTemplateStatus says whether the template's kind is served.
type StackTemplateStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready=True once the kind's CustomResourceDefinition is established and
	// its instances are reconciled; Stalled=True when the template cannot be served as
	// written (a group the install does not allow, a CustomResourceDefinition Stackwright
	// did not create, a schema the API server refuses).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Revision is the template's revision: its generation when the kind was last served,
	// kept as a StackTemplateRevision. Each instance records the revision its Stack was
	// rendered from.
	// +optional
	Revision int64 `json:"revision,omitempty"`

	// CustomResourceDefinition is the name of the kind's CustomResourceDefinition.
	// +optional
	CustomResourceDefinition string `json:"customResourceDefinition,omitempty"`

	// Instances counts the kind's instances; InstancesBehind those whose Stack was
	// rendered from an older revision.
	// +optional
	Instances int32 `json:"instances,omitempty"`
	// +optional
	InstancesBehind int32 `json:"instancesBehind,omitempty"`
}

// StackTemplate is a self-service API published by the platform team: Stackwright installs
// a CustomResourceDefinition for the kind it names, and turns each instance into a Stack in
// the platform namespace, so that tenants request infrastructure without holding its
// credentials, state or program.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=stackwright
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.api.kind`
// +kubebuilder:printcolumn:name="Group",type=string,JSONPath=`.spec.api.group`
// +kubebuilder:printcolumn:name="Instances",type=integer,JSONPath=`.status.instances`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StackTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StackTemplateSpec   `json:"spec"`
	Status StackTemplateStatus `json:"status,omitempty"`
}

// StackTemplateList is a list of StackTemplates.
//
// +kubebuilder:object:root=true
type StackTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StackTemplate `json:"items"`
}

// StackTemplateRevisionSpec is what an instance's Stack is rendered from, as one revision
// of a StackTemplate had it.
type StackTemplateRevisionSpec struct {
	// Template names the StackTemplate.
	// +kubebuilder:validation:MinLength=1
	Template string `json:"template"`
	// Revision is the template's generation this is a copy of.
	// +kubebuilder:validation:Minimum=1
	Revision int64 `json:"revision"`
	// Stack is the template's spec.stack at this revision.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Stack apiextensionsv1.JSON `json:"stack"`
	// Config is the template's spec.config at this revision.
	// +optional
	// +listType=atomic
	Config []TemplateConfig `json:"config,omitempty"`
	// Outputs is the template's spec.outputs at this revision.
	// +optional
	// +listType=atomic
	Outputs []string `json:"outputs,omitempty"`
	// ParametersVersion is the version of the kind whose parameter names this revision's
	// stack and config refer to: the storage version when it was made. An instance read in
	// another version has its parameters converted to this one (renames undone) before the
	// revision renders it. Empty (revisions made before versions could rename): the
	// version instances are read in.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ParametersVersion string `json:"parametersVersion,omitempty"`
	// Stacks is the template's spec.stacks at this revision.
	// +optional
	// +listType=atomic
	Stacks []TemplateStack `json:"stacks,omitempty"`
	// Objects is the template's spec.objects at this revision.
	// +optional
	// +listType=atomic
	Objects []TemplateObject `json:"objects,omitempty"`
}

// StackTemplateRevision is an immutable copy of what one revision of a StackTemplate
// renders: instances held at an older revision (updateStrategy Hold) are rendered from
// it. The template controller creates one for each revision it serves, owned by the
// template, and deletes those that no instance uses and are not the latest.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=stackwright
// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="a StackTemplateRevision is immutable"
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.template`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.spec.revision`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StackTemplateRevision struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec StackTemplateRevisionSpec `json:"spec"`
}

// StackTemplateRevisionList is a list of StackTemplateRevisions.
//
// +kubebuilder:object:root=true
type StackTemplateRevisionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StackTemplateRevision `json:"items"`
}
