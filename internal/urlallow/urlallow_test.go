package urlallow

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Each case is a list of prefixes and the verdict on request URLs: only what the prefix
// names passes, whatever a string comparison would say.
func TestList_Allows_ComparesParsedURLs(t *testing.T) {
	tests := []struct {
		name     string
		prefixes []string
		want     map[string]bool
	}{
		{
			name:     "Empty",
			prefixes: nil,
			want: map[string]bool{
				"http://prometheus.monitoring:9090/api/v1/query": false,
			},
		},
		{
			name:     "HostAndPort",
			prefixes: []string{"http://prometheus.monitoring:9090"},
			want: map[string]bool{
				"http://prometheus.monitoring:9090/api/v1/query":      true,
				"http://prometheus.monitoring:9090":                   true,
				"http://PROMETHEUS.Monitoring:9090/api/v1/query":      true,
				"HTTP://prometheus.monitoring:09090/api/v1/query":     true,
				"http://prometheus.monitoring/api/v1/query":           false,
				"http://prometheus.monitoring:9091/api/v1/query":      false,
				"https://prometheus.monitoring:9090/api/v1/query":     false,
				"http://prometheus.monitoring.evil:9090/api/v1/query": false,
				"http://prometheus.monitoring.:9090/api/v1/query":     false,
				"http://evil/prometheus.monitoring:9090/api/v1/query": false,
				"http://prometheus.monitoring:9090@evil/api/v1/query": false,
				"http://prometheus.monitoring@evil:9090/api/v1/query": false,
				"ftp://prometheus.monitoring:9090/api/v1/query":       false,
				"//prometheus.monitoring:9090/api/v1/query":           false,
				"/api/v1/query":                   false,
				"http:prometheus.monitoring:9090": false,
			},
		},
		{
			name:     "DefaultPorts",
			prefixes: []string{"http://prom.example", "https://secure.example:443"},
			want: map[string]bool{
				"http://prom.example/api/v1/query":        true,
				"http://prom.example:80/api/v1/query":     true,
				"http://prom.example:8080/api/v1/query":   false,
				"https://prom.example/api/v1/query":       false,
				"https://secure.example/api/v1/query":     true,
				"https://secure.example:443/api/v1/query": true,
				"http://secure.example/api/v1/query":      false,
			},
		},
		{
			name:     "PathPrefix",
			prefixes: []string{"https://gateway.example/team-a/prom/"},
			want: map[string]bool{
				"https://gateway.example/team-a/prom/api/v1/query":                     true,
				"https://gateway.example/team-a/prom":                                  true,
				"https://gateway.example/team-a//prom/api/v1/query":                    true,
				"https://gateway.example/team-a/prometheus/api/v1/query":               false,
				"https://gateway.example/team-a/api/v1/query":                          false,
				"https://gateway.example/team-b/prom/api/v1/query":                     false,
				"https://gateway.example/team-a/prom/../../team-b/prom":                false,
				"https://gateway.example/team-a/prom/%2e%2e/%2e%2e/team-b":             false,
				"https://gateway.example/team-a/prom%2F..%2F..%2Fteam-b":               false,
				"https://gateway.example/team-a/prom/..;/..;/team-b":                   false,
				"https://gateway.example/team-a/prom/x\\..\\..\\..\\team-b":            false,
				"https://gateway.example/team-a/prom/./api/v1/query":                   false,
				"https://gateway.example/team-a/prom/a%2Fb/api/v1/query":               true,
				"https://gateway.example/team-a/prom\\api/v1/query":                    false,
				"https://gateway.example/team-a/prom?x=/team-a/prom/api":               true,
				"https://gateway.example/team-b?x=https://gateway.example/team-a/prom": false,
			},
		},
		{
			name:     "IPv6",
			prefixes: []string{"http://[FD00::1]:9090"},
			want: map[string]bool{
				"http://[fd00::1]:9090/api/v1/query": true,
				"http://[fd00::2]:9090/api/v1/query": false,
				"http://[fd00::1]/api/v1/query":      false,
			},
		},
		{
			name:     "Several",
			prefixes: []string{"http://a.example:9090", " ", "http://b.example:9090/prom"},
			want: map[string]bool{
				"http://a.example:9090/api/v1/query":      true,
				"http://b.example:9090/prom/api/v1/query": true,
				"http://b.example:9090/api/v1/query":      false,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Parse(tt.prefixes)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for raw := range tt.want {
				got[raw] = l.AllowsString(raw)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("allowed (-want +got):\n%s", diff)
			}
		})
	}
}

// A URL that was never parsed from text, or is nil, is judged as well.
func TestList_Allows_BuiltURLs(t *testing.T) {
	l, err := Parse([]string{"http://prom.example:9090/prom"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		u    *url.URL
		want bool
	}{
		{name: "Nil", u: nil},
		{name: "Within", u: &url.URL{Scheme: "HTTP", Host: "prom.example:9090", Path: "/prom/api/v1/query"}, want: true},
		{name: "DotSegment", u: &url.URL{Scheme: "http", Host: "prom.example:9090", Path: "/prom/../admin"}},
		{name: "Opaque", u: &url.URL{Scheme: "http", Opaque: "prom.example:9090/prom"}},
		{name: "BadPort", u: &url.URL{Scheme: "http", Host: "prom.example:99999", Path: "/prom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := l.Allows(tt.u); got != tt.want {
				t.Errorf("Allows(%v) = %v, want %v", tt.u, got, tt.want)
			}
		})
	}
}

// Parse refuses what could not be meant as a prefix, naming the entry and why, and
// normalises the rest.
func TestParse_Prefixes_RefusesWhatIsNotAPrefix(t *testing.T) {
	tests := []struct {
		name    string
		entries []string
		want    string // the normalised list
		wantErr string
	}{
		{name: "None", entries: nil, want: ""},
		{name: "Blank", entries: []string{"", "  "}, want: ""},
		{name: "Normalised", entries: []string{"HTTP://Prom.Example", "https://x.example:0443/a/b/", "http://[::1]:9090"}, want: "http://prom.example:80,https://x.example:443/a/b,http://[::1]:9090"},
		{name: "NoScheme", entries: []string{"prom.example:9090"}, wantErr: `URL prefix "prom.example:9090": want an http:// or https:// URL`},
		{name: "OtherScheme", entries: []string{"file:///etc"}, wantErr: "want an http:// or https:// URL"},
		{name: "NoHost", entries: []string{"http:///api"}, wantErr: "names no host"},
		{name: "Opaque", entries: []string{"http:prom.example"}, wantErr: "names no host"},
		{name: "User", entries: []string{"http://prom.example@evil"}, wantErr: "has a user"},
		{name: "Query", entries: []string{"http://prom.example/?x=1"}, wantErr: "has a query"},
		{name: "EmptyQuery", entries: []string{"http://prom.example/?"}, wantErr: "has a query"},
		{name: "Fragment", entries: []string{"http://prom.example/#x"}, wantErr: "has a fragment"},
		{name: "DotSegment", entries: []string{"http://prom.example/a/../b"}, wantErr: "has a . or .. path segment"},
		{name: "BadPort", entries: []string{"http://prom.example:0"}, wantErr: "has an invalid port"},
		{name: "Unparsable", entries: []string{"http://prom example"}, wantErr: "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Parse(tt.entries)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) = %v, want an error saying %q", tt.entries, err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatalf("Parse(%q): %v", tt.entries, err)
			}
			if diff := cmp.Diff(tt.want, l.String()); diff != "" {
				t.Errorf("prefixes (-want +got):\n%s", diff)
			}
		})
	}
}
