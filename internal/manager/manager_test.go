package manager

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

func TestOptions_BindFlags_WatchNamespacesRestrictTheCache(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // nil: every namespace
	}{
		{name: "unset watches everything", args: nil, want: nil},
		{name: "empty watches everything", args: []string{"--watch-namespaces="}, want: nil},
		{name: "comma separated", args: []string{"--watch-namespaces=a,b"}, want: []string{"a", "b"}},
		{name: "spaces, blanks and duplicates dropped", args: []string{"--watch-namespaces= a , b,,a"}, want: []string{"a", "b"}},
		{name: "repeated flag", args: []string{"--watch-namespaces=a", "--watch-namespaces=b"}, want: []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
			o.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatalf("failed to parse %v: %v", tc.args, err)
			}
			var got []string
			opts, err := o.cacheOptions()
			if err != nil {
				t.Fatal(err)
			}
			for ns := range opts.DefaultNamespaces {
				got = append(got, ns)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cached namespaces (-want +got):\n%s", diff)
			}
		})
	}
}
