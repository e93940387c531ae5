package v1_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// guidanceClient binds copies of the install's guidance policies to a namespace of its own,
// so other tests' Stacks draw no warning from them, and returns that namespace and a client
// for createWithWarnings, once the policies are in force.
func guidanceClient(t *testing.T) (string, client.Client) {
	t.Helper()
	ns := env.Namespace(t)
	c := env.WarningClient(t)
	kubetest.InstallGuidance(testContext(t), t, c, ns)
	return ns, c
}

// createWithWarnings creates a Stack from YAML below metadata and returns the warnings the
// create drew; the policies must never refuse one.
func createWithWarnings(t *testing.T, c client.Client, ns, name, body string) []string {
	t.Helper()
	var fields map[string]any
	if err := yaml.Unmarshal([]byte(body), &fields); err != nil {
		t.Fatalf("bad test case: %v", err)
	}
	obj := newObject("pulumi.com/v1", "Stack", ns, name)
	for k, v := range fields {
		if k != "metadata" {
			obj.Object[k] = v
		}
	}
	w := &kubetest.Warnings{}
	if err := c.Create(kubetest.WithWarnings(testContext(t), w), obj, client.FieldValidation("Strict")); err != nil {
		t.Fatalf("refused: %v", err)
	}
	return w.Get()
}

func TestStackGuidancePolicy_Create_WarnsAboutUnappliedFields(t *testing.T) {
	ns, c := guidanceClient(t)
	for _, tc := range []struct {
		name string
		body string
		want []string
	}{
		{name: "plainStackNoWarning", body: "spec: {stack: dev, programRef: {name: p}}"},
		{name: "prerequisitesHonouredNoWarning", body: "spec: {stack: dev, programRef: {name: p}, prerequisites: [{name: network, requirement: {succeededWithinDuration: 1h}}]}"},
		{name: "driftDetectionHonouredNoWarning", body: `spec: {stack: dev, programRef: {name: p}, driftDetection: {schedules: [{cron: "*/15 * * * *", autoRemediate: true}]}}`},
		{name: "ordinaryEnvRefsNoWarning", body: "spec: {stack: dev, programRef: {name: p}, envRefs: {AWS_REGION: {type: Literal, literal: {value: eu-west-1}}}}"},
		{name: "envRefsPathWarns", body: "spec: {stack: dev, programRef: {name: p}, envRefs: {PATH: {type: Literal, literal: {value: /tmp}}}}", want: []string{"spec.envRefs sets a variable that steers the engine itself"}},
		{name: "envRefsLoaderPrefixWarns", body: "spec: {stack: dev, programRef: {name: p}, envRefs: {LD_PRELOAD: {type: Literal, literal: {value: /tmp/x.so}}}}", want: []string{"the local executor, which runs the engine in the manager, refuses it"}},
		{name: "allowListedVolumesNoWarning", body: `spec: {stack: dev, programRef: {name: p}, workspaceTemplate: {spec: {podTemplate: {spec: {containers: [{name: pulumi}], volumes: [{name: a, emptyDir: {}}, {name: b, persistentVolumeClaim: {claimName: c}}]}}}}}`},
		{name: "nfsVolumeWarns", body: `spec: {stack: dev, programRef: {name: p}, workspaceTemplate: {spec: {podTemplate: {spec: {containers: [{name: pulumi}], volumes: [{name: share, nfs: {server: 10.0.0.1, path: /export}}]}}}}}`, want: []string{"runner Pods may not mount by default"}},
		{name: "wellKnownPlacementNoWarning", body: `spec: {stack: dev, programRef: {name: p}, workspaceTemplate: {spec: {podTemplate: {metadata: {annotations: {vault.hashicorp.com/agent-inject: "true"}}, spec: {containers: [{name: pulumi}], nodeSelector: {kubernetes.io/arch: arm64}, tolerations: [{key: node.kubernetes.io/unreachable, operator: Exists}]}}}}}`},
		{name: "tenantPoolNodeSelectorWarns", body: `spec: {stack: dev, programRef: {name: p}, workspaceTemplate: {spec: {podTemplate: {spec: {containers: [{name: pulumi}], nodeSelector: {pool: platform}}}}}}`, want: []string{"--runner-allowed-node-selector-keys"}},
		{name: "everyTaintTolerationWarns", body: `spec: {stack: dev, programRef: {name: p}, workspaceTemplate: {spec: {podTemplate: {spec: {containers: [{name: pulumi}], tolerations: [{operator: Exists}]}}}}}`, want: []string{"--runner-allowed-toleration-keys"}},
		{name: "appArmorAnnotationWarns", body: `spec: {stack: dev, programRef: {name: p}, workspaceTemplate: {spec: {podTemplate: {metadata: {annotations: {container.apparmor.security.beta.kubernetes.io/pulumi: unconfined}}}}}}`, want: []string{"--runner-allowed-annotation-prefixes"}},
		{name: "inlineCSIVolumeWarns", body: `spec: {stack: dev, programRef: {name: p}, workspaceTemplate: {spec: {podTemplate: {spec: {containers: [{name: pulumi}], volumes: [{name: s, csi: {driver: secrets-store.csi.k8s.io}}]}}}}}`, want: []string{"--runner-allowed-csi-drivers"}},
		{name: "workspaceTemplateInitContainersWarns", body: `spec: {stack: dev, programRef: {name: p}, workspaceTemplate: {spec: {podTemplate: {spec: {containers: [{name: pulumi}], initContainers: [{name: setup, image: busybox}]}}}}}`, want: []string{"spec.workspaceTemplate.spec.podTemplate.spec.initContainers is set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := createWithWarnings(t, c, ns, strings.ToLower(tc.name), tc.body)
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q; want %d containing %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %q does not say %q", got[i], w)
				}
			}
		})
	}
}

// warnedField reduces a finding to the top-level field it is about ("spec.envRefs" for
// "spec.envRefs[HOME]: ..."), which is how the policy's fixed messages and Review's
// detailed ones are compared.
var (
	warnedField  = regexp.MustCompile(`^spec(\.[A-Za-z]+)?`)
	policyPrefix = regexp.MustCompile(`^Validation failed for ValidatingAdmissionPolicy '[^']*' with binding '[^']*': `)
)

func warnedFields(findings []string) []string {
	var fields []string
	for _, f := range findings {
		fields = append(fields, warnedField.FindString(policyPrefix.ReplaceAllString(f, "")))
	}
	slices.Sort(fields)
	return slices.Compact(fields)
}

// The policy warns at apply time about exactly what Review reports to the controller: every
// case Review finds something in draws a warning about the same field, and nothing else.
func TestStackGuidancePolicy_Create_WarnsAsReviewFinds(t *testing.T) {
	ns, c := guidanceClient(t)
	for _, tc := range reviewCases {
		t.Run(tc.name, func(t *testing.T) {
			got := createWithWarnings(t, c, ns, strings.ToLower(tc.name), tc.body)
			r := reviewOf(t, tc.body)
			want := warnedFields(append(r.Problems, r.Ignored...))
			if diff := cmp.Diff(want, warnedFields(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("warned fields differ from Review's (-review +policy):\n%s\nwarnings: %q", diff, got)
			}
			if len(r.Problems) > 0 && !slicesContainSubstring(got, "will stall (SpecInvalid)") {
				t.Errorf("warnings %q do not say that the Stack will stall", got)
			}
		})
	}
}
