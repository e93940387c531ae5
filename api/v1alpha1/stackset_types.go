package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// Labels and annotations that tie a StackSet to the Stacks it generates.
const (
	// StackSetLabel names the StackSet on each Stack it generated.
	StackSetLabel = "stackwright.dev/stackset"
	// StackSetElementLabel is a generated Stack's element key (a hash of the element).
	StackSetElementLabel = "stackwright.dev/stackset-element"
	// StackSetElementAnnotation is the element a generated Stack stands for, as the
	// generator found it (a branch, a directory, a list element's name).
	StackSetElementAnnotation = "stackwright.dev/stackset-element"
	// StackSetFinalizer holds a StackSet until its Stacks are handled as its deletion
	// policy says.
	StackSetFinalizer = "stackwright.dev/stackset"
)

// StackSetSpec generates one Stack per element of its generator, from a template.
type StackSetSpec struct {
	// Generator yields the set's elements.
	Generator StackSetGenerator `json:"generator"`

	// Template is the Stack each element becomes.
	Template StackSetTemplate `json:"template"`

	// DeletionPolicy says what becomes of the Stack of an element that disappears (a
	// branch deleted, a directory removed, a list element dropped) and of every Stack
	// when the set is deleted. Orphan (the default) keeps the Stack and drops it from
	// the set; Destroy deletes it, destroying its resources whatever the template's
	// destroyOnFinalize says.
	// +optional
	// +kubebuilder:default=Orphan
	DeletionPolicy StackSetDeletionPolicy `json:"deletionPolicy,omitempty"`

	// MaxRemovals bounds how many elements may disappear at once, as a number (0: the
	// set removes nothing by itself) or a percentage of the set's Stacks (rounded up, at
	// least one): beyond it nothing is removed, and the set
	// is Stalled (reason RemovalsHeld) until the elements come back, the bound is
	// raised, or the set is changed. It protects against a repository that lists
	// nothing or a pattern gone wrong. Default 50%.
	// +optional
	// +kubebuilder:validation:XIntOrString
	MaxRemovals *intstr.IntOrString `json:"maxRemovals,omitempty"`
}

// StackSetDeletionPolicy names what becomes of a removed element's Stack.
// +kubebuilder:validation:Enum=Orphan;Destroy
type StackSetDeletionPolicy string

const (
	// StackSetOrphan keeps the Stack, without the set's owner reference and labels.
	StackSetOrphan StackSetDeletionPolicy = "Orphan"
	// StackSetDestroy destroys the Stack's resources and deletes it.
	StackSetDestroy StackSetDeletionPolicy = "Destroy"
)

// StackSetGenerator yields a set's elements: exactly one of its fields is set.
// +kubebuilder:validation:XValidation:rule="(has(self.gitBranches) ? 1 : 0) + (has(self.gitDirectories) ? 1 : 0) + (has(self.list) ? 1 : 0) + (has(self.pullRequests) ? 1 : 0) == 1",message="set exactly one of gitBranches, gitDirectories, list and pullRequests"
type StackSetGenerator struct {
	// GitBranches yields one element per branch of a repository that matches; its
	// placeholders are {{branch}}, {{branchSlug}} and {{commit}}.
	// +optional
	GitBranches *GitBranchesGenerator `json:"gitBranches,omitempty"`

	// GitDirectories yields one element per directory holding a Pulumi project
	// (Pulumi.yaml) at the head of a branch that matches; its placeholders are
	// {{path}}, {{pathBase}}, {{pathSlug}}, {{branch}} and {{commit}}.
	// +optional
	GitDirectories *GitDirectoriesGenerator `json:"gitDirectories,omitempty"`

	// List yields its elements; the placeholders are {{name}} and {{values.<key>}}.
	// +optional
	List *ListGenerator `json:"list,omitempty"`

	// PullRequests yields one element per open pull request of a repository on a forge
	// that matches; its placeholders are {{number}}, {{branch}} (the head branch),
	// {{branchSlug}}, {{headSHA}}, {{headRef}} (the ref the repository keeps of the
	// head, which a fork's commits are fetched from: refs/pull/<n>/head, or
	// refs/merge-requests/<n>/head on GitLab), {{baseBranch}}, {{author}} and
	// {{labels}} (comma-separated).
	// +optional
	PullRequests *PullRequestsGenerator `json:"pullRequests,omitempty"`
}

// PullRequestForks says whether the pull requests of forks get a Stack.
// +kubebuilder:validation:Enum=Refuse;Allow
type PullRequestForks string

const (
	// PullRequestForksRefuse leaves out the pull requests whose head is in another
	// repository: their programs are strangers' code, run with the set's credentials.
	PullRequestForksRefuse PullRequestForks = "Refuse"
	// PullRequestForksAllow gives them Stacks too, but only in a namespace the platform
	// team labelled with ForkPullRequestsLabel=allow.
	PullRequestForksAllow PullRequestForks = "Allow"
)

// ForkPullRequestsLabel on a Namespace, set to "allow" by the platform team, lets the
// StackSets in it that ask for it (forks: Allow) run the pull requests of forks.
const ForkPullRequestsLabel = "stackwright.dev/fork-pull-requests"

// PullRequestsGenerator yields the open pull requests of a repository on a forge, and
// tells the forge what became of each (feedback).
type PullRequestsGenerator struct {
	// Forge is the forge's API: Gitea (Forgejo speaks it too), GitHub or GitLab.
	// +kubebuilder:validation:Enum=Gitea;GitHub;GitLab
	Forge string `json:"forge"`

	// API is the forge's API base URL: https://<host>/api/v1 for Gitea (required),
	// default https://api.github.com for GitHub (https://<host>/api/v3 for GitHub
	// Enterprise Server) and https://gitlab.com/api/v4 for GitLab.
	// +optional
	// +kubebuilder:validation:Pattern=`^https?://`
	API string `json:"api,omitempty"`

	// Repository is owner/name (on GitLab, the project's full path: group/sub/name).
	// +kubebuilder:validation:Pattern=`^[^/\s]+(/[^/\s]+)+$`
	Repository string `json:"repository"`

	// TokenSecretRef is the Secret key, in the set's namespace, holding the forge API
	// token the set lists pull requests with and, with feedback, writes comments and
	// commit statuses with.
	TokenSecretRef SecretKeyRef `json:"tokenSecretRef"`

	// TargetBranches keeps the pull requests whose target branch matches any of these
	// globs (path.Match syntax); unset keeps every one.
	// +optional
	TargetBranches []string `json:"targetBranches,omitempty"`

	// Labels keeps the pull requests that carry every one of these labels.
	// +optional
	Labels []string `json:"labels,omitempty"`

	// NotLabels leaves out the pull requests that carry any of these labels.
	// +optional
	NotLabels []string `json:"notLabels,omitempty"`

	// Title keeps the pull requests whose title matches this regular expression (RE2).
	// +optional
	Title string `json:"title,omitempty"`

	// Forks says whether pull requests from forks get Stacks: Refuse (the default) or
	// Allow, which takes effect only in a namespace labelled
	// stackwright.dev/fork-pull-requests=allow by the platform team.
	// +optional
	// +kubebuilder:default=Refuse
	Forks PullRequestForks `json:"forks,omitempty"`

	// Interval is how often the forge is asked for the open pull requests; default 1m,
	// never under 10s. A pull request webhook to the manager brings it forward.
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Feedback says what the set writes on each pull request. Unset writes both a
	// comment and a commit status.
	// +optional
	Feedback *PullRequestFeedback `json:"feedback,omitempty"`
}

// SecretKeyRef names a key of a Secret in the object's namespace.
type SecretKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key of the Secret; default token.
	// +optional
	Key string `json:"key,omitempty"`
}

// PullRequestFeedback is what a set writes on each pull request about its Stack.
type PullRequestFeedback struct {
	// Comment keeps one comment per Stack on the pull request with its last preview or
	// update (changes by resource type, the Update's name, its error), edited in place
	// on every new one, and says when the Stack goes. Default true.
	// +optional
	Comment *bool `json:"comment,omitempty"`

	// Status sets a commit status (pending, success, failure) on the pull request's
	// head, with the context <context>/<Stack name>. Default true.
	// +optional
	Status *bool `json:"status,omitempty"`

	// Context is the commit status context's prefix; default stackwright.
	// +optional
	// +kubebuilder:validation:MaxLength=100
	Context string `json:"context,omitempty"`

	// URL is a link the comment and the status point to, such as the platform's
	// console; {{namespace}}, {{stack}} and {{update}} are replaced.
	// +optional
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url,omitempty"`
}

// GitRepository is a repository a generator reads, with the git source and cache the
// Stacks use: the same credentials, listed at most once per interval.
type GitRepository struct {
	// URL of the repository (https or ssh), as a Stack's projectRepo.
	// +kubebuilder:validation:MinLength=1
	URL string `json:"url"`

	// GitAuth authenticates to the repository, as a Stack's gitAuth, its Secrets in
	// the set's namespace.
	// +optional
	GitAuth *pulumiv1.GitAuthConfig `json:"gitAuth,omitempty"`

	// Interval is how often the repository is listed; default 1m, never under 10s.
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// GitBranchesGenerator yields the branches of a repository.
type GitBranchesGenerator struct {
	GitRepository `json:",inline"`

	// Include keeps the branches matching any of these globs (path.Match syntax, where
	// * does not match /; e.g. feature/*). Unset keeps every branch.
	// +optional
	Include []string `json:"include,omitempty"`

	// Exclude drops the branches matching any of these globs.
	// +optional
	Exclude []string `json:"exclude,omitempty"`
}

// GitDirectoriesGenerator yields the project directories of one branch.
type GitDirectoriesGenerator struct {
	GitRepository `json:",inline"`

	// Branch whose head is read.
	// +kubebuilder:validation:MinLength=1
	Branch string `json:"branch"`

	// Include keeps the directories matching any of these globs (e.g. stacks/*); unset
	// keeps every directory with a Pulumi project, the root included ("").
	// +optional
	Include []string `json:"include,omitempty"`

	// Exclude drops the directories matching any of these globs.
	// +optional
	Exclude []string `json:"exclude,omitempty"`
}

// ListGenerator yields explicit elements.
type ListGenerator struct {
	// Elements, each with a name unique in the list.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	Elements []ListElement `json:"elements"`
}

// ListElement is one element of a list generator.
type ListElement struct {
	// Name of the element.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Values are substituted for {{values.<key>}}.
	// +optional
	Values map[string]string `json:"values,omitempty"`
}

// StackSetTemplate is the Stack each element becomes.
type StackSetTemplate struct {
	// Metadata: labels and annotations added to each Stack.
	// +optional
	Metadata StackSetTemplateMetadata `json:"metadata,omitempty"`

	// Spec is a pulumi.com/v1 Stack's spec, every field as a Stack has it, in whose
	// strings the generator's placeholders ({{branch}} ...) are replaced by each
	// element's values. A field the Stack kind does not know, or a placeholder the
	// generator does not have, Stalls the set (SpecInvalid). Kept schemaless so that the
	// set's CRD does not carry a second copy of the Stack's schema.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Spec apiextensionsv1.JSON `json:"spec"`
}

// StackSetTemplateMetadata is what a generated Stack's metadata gets from the template.
type StackSetTemplateMetadata struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// StackSetStatus says what the set generated.
type StackSetStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready once every element has its Stack and those are Ready;
	// Reconciling while Stacks converge or the source is unavailable; Stalled when the
	// template cannot render or removals are held (RemovalsHeld).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Elements counts the elements last generated.
	// +optional
	Elements int32 `json:"elements,omitempty"`

	// Stacks counts the set's Stacks; Ready and Failing those Ready, and Stalled or
	// whose last update failed.
	// +optional
	Stacks int32 `json:"stacks,omitempty"`
	// +optional
	Ready int32 `json:"ready,omitempty"`
	// +optional
	Failing int32 `json:"failing,omitempty"`

	// Revision is the commit the directories were read at (gitDirectories).
	// +optional
	Revision string `json:"revision,omitempty"`

	// PullRequests are the pull requests with a Stack (pullRequests) and what the forge
	// was last told about each.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	PullRequests []PullRequestStatus `json:"pullRequests,omitempty"`

	// SkippedForks counts the open pull requests from forks left without a Stack.
	// +optional
	SkippedForks int32 `json:"skippedForks,omitempty"`

	// Expired are the elements whose Stack's TTL expired: they get no new Stack while
	// they stay as they were (for a branch, at the same commit; a push revives it), and
	// are forgotten once they disappear.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Expired []ExpiredElement `json:"expired,omitempty"`
}

// PullRequestStatus is one pull request with a Stack, and its feedback.
type PullRequestStatus struct {
	Number int32 `json:"number"`
	// Stack is the pull request's Stack.
	Stack string `json:"stack"`
	// HeadSHA is the commit the pull request's head was at when last listed.
	HeadSHA string `json:"headSHA"`
	// Reported is what the forge was last told: the state, the commit and the Update
	// (success of <sha> by <update>); empty until the first feedback.
	// +optional
	Reported string `json:"reported,omitempty"`
	// Error is why the last feedback did not reach the forge; it is retried with backoff.
	// +optional
	Error string `json:"error,omitempty"`
}

// ExpiredElement is an element whose Stack's TTL expired.
type ExpiredElement struct {
	// Element, as the generator names it.
	Element string `json:"element"`
	// Commit the element was at when its Stack expired ("" for list elements).
	// +optional
	Commit string `json:"commit,omitempty"`
}

// StackSet generates Stacks: one per branch of a repository, per project directory of a
// branch, or per element of a list, named stably, owned by the set, and removed (orphaned
// or destroyed) when their element disappears.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=stackwright
// +kubebuilder:printcolumn:name="Elements",type=integer,JSONPath=`.status.elements`
// +kubebuilder:printcolumn:name="Stacks",type=integer,JSONPath=`.status.stacks`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Failing",type=integer,JSONPath=`.status.failing`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StackSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StackSetSpec   `json:"spec"`
	Status StackSetStatus `json:"status,omitempty"`
}

// StackSetList is a list of StackSets.
//
// +kubebuilder:object:root=true
type StackSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StackSet `json:"items"`
}
