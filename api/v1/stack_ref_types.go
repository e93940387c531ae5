package v1

// ConfigMapRef selects one key of a ConfigMap in the Stack's namespace.
type ConfigMapRef struct {
	// Name of the ConfigMap.
	Name string `json:"name"`

	// Key within the ConfigMap.
	Key string `json:"key"`

	// JSON parses the value as JSON and sets it as structured configuration;
	// otherwise the value is used as a plain string.
	// +optional
	JSON bool `json:"json,omitempty"`
}

// ResourceSelectorType says where a ResourceRef takes its value from.
type ResourceSelectorType string

const (
	// ResourceSelectorEnv reads an environment variable of the process that
	// runs the engine.
	ResourceSelectorEnv ResourceSelectorType = "Env"
	// ResourceSelectorFS reads a file from the file system of the process
	// that runs the engine.
	ResourceSelectorFS ResourceSelectorType = "FS"
	// ResourceSelectorSecret reads a key of a Secret in the Stack's namespace.
	ResourceSelectorSecret ResourceSelectorType = "Secret"
	// ResourceSelectorLiteral uses a value given inline.
	ResourceSelectorLiteral ResourceSelectorType = "Literal"
)

// ResourceRef says where a value (an environment variable, a secret config
// value, a credential) is loaded from. The selector matching type must be set.
type ResourceRef struct {
	// Type selects the selector used: Env, FS, Secret or Literal.
	Type ResourceSelectorType `json:"type"`

	ResourceSelector `json:",inline"`
}

// ResourceSelector holds the possible selectors of a ResourceRef; only the one
// matching the ResourceRef's type is used.
type ResourceSelector struct {
	// Env selects an environment variable.
	// +optional
	Env *EnvSelector `json:"env,omitempty"`

	// FileSystem selects a file.
	// +optional
	FileSystem *FSSelector `json:"filesystem,omitempty"`

	// Secret selects a key of a Secret.
	// +optional
	Secret *SecretSelector `json:"secret,omitempty"`

	// Literal is an inline value.
	// +optional
	Literal *LiteralRef `json:"literal,omitempty"`
}

// EnvSelector names an environment variable.
type EnvSelector struct {
	// Name of the environment variable.
	Name string `json:"name"`
}

// FSSelector names a file.
type FSSelector struct {
	// Path of the file.
	Path string `json:"path"`
}

// SecretSelector names a key of a Secret.
type SecretSelector struct {
	// Namespace of the Secret. Deprecated: references are resolved in the
	// Stack's own namespace; any other value is refused at reconcile time
	// (CrossNamespaceReference).
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Name of the Secret.
	Name string `json:"name"`

	// Key within the Secret.
	Key string `json:"key"`
}

// LiteralRef is a value given inline.
type LiteralRef struct {
	// Value to use.
	Value string `json:"value"`
}
