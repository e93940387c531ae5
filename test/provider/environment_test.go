package provider

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEnvironmentNames_NamesOnlySortedAndFiltered(t *testing.T) {
	environ := []string{"ZED=secret", "PATH=/bin", "PULUMI_HOME=/tmp/p", "EMPTY=", "PULUMI_CONFIG_PASSPHRASE=hunter2"}
	for _, tc := range []struct {
		name, prefix string
		want         []string
	}{
		{name: "all", want: []string{"EMPTY", "PATH", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_HOME", "ZED"}},
		{name: "prefix", prefix: "PULUMI_", want: []string{"PULUMI_CONFIG_PASSPHRASE", "PULUMI_HOME"}},
		{name: "none match", prefix: "AWS_", want: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, environmentNames(environ, tc.prefix)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
