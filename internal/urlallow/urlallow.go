// Package urlallow decides whether the manager may send a request to a URL that a tenant
// wrote (a StackRollout's metric gate names its Prometheus): the URL must fall under one of
// the prefixes the platform allowed. A prefix is a scheme, a host, a port and a path, each
// compared after parsing, never as a string prefix, so that neither
// http://prom.example@evil (a user name, and host evil) nor http://prom.example.evil (another
// host) nor http://prom.example/prom/../admin (a path that a server resolves elsewhere)
// passes for http://prom.example/prom.
package urlallow

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// List is the allowed URL prefixes. Its zero value allows nothing.
type List struct {
	prefixes []prefix
}

// prefix is one allowed prefix, normalised.
type prefix struct {
	scheme, host, port string
	// path is the allowed path, cleaned and without a trailing slash ("" for every path).
	path string
}

// Parse reads the allowed prefixes, each an http or https URL with a host, an optional port
// (the scheme's when absent) and an optional path (a whole number of segments: /prom allows
// /prom and /prom/api, not /prometheus). A prefix with a user, a query, a fragment or a
// dot segment is refused: it would not mean what it seems to. Blank entries are skipped.
func Parse(entries []string) (List, error) {
	var l List
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		p, err := parsePrefix(e)
		if err != nil {
			return List{}, fmt.Errorf("URL prefix %q: %w", e, err)
		}
		l.prefixes = append(l.prefixes, p)
	}
	return l, nil
}

func parsePrefix(s string) (prefix, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return prefix{}, err
	case u.Scheme != "http" && u.Scheme != "https":
		return prefix{}, errors.New("want an http:// or https:// URL")
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return prefix{}, errors.New("names no host")
	case u.User != nil:
		return prefix{}, errors.New("has a user: an allowed prefix names a server, not its credentials")
	case u.RawQuery != "" || u.ForceQuery:
		return prefix{}, errors.New("has a query")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return prefix{}, errors.New("has a fragment")
	}
	segs, ok := segments(u.Path)
	if !ok {
		return prefix{}, errors.New("has a . or .. path segment")
	}
	port := portOf(u)
	if port == "" {
		return prefix{}, errors.New("has an invalid port")
	}
	return prefix{scheme: u.Scheme, host: strings.ToLower(u.Hostname()), port: port, path: joinPath(segs)}, nil
}

// Len is the number of allowed prefixes.
func (l List) Len() int { return len(l.prefixes) }

// Allows reports whether the request URL u falls under an allowed prefix: the same scheme,
// host (case-insensitively) and port (the scheme's when absent), and a path within the
// prefix's, compared segment by segment after percent-decoding. A URL whose path has a .
// or .. segment (which a server or proxy may resolve to anywhere), or that is not an
// absolute http(s) URL, is never allowed.
func (l List) Allows(u *url.URL) bool {
	if u == nil || u.Opaque != "" || u.Host == "" {
		return false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return false
	}
	segs, ok := segments(u.Path)
	if !ok {
		return false
	}
	host, port, path := strings.ToLower(u.Hostname()), portOf(u), joinPath(segs)
	if port == "" {
		return false
	}
	for _, p := range l.prefixes {
		if p.scheme == scheme && p.host == host && p.port == port && within(path, p.path) {
			return true
		}
	}
	return false
}

// AllowsString is Allows of the URL s; a URL that does not parse is not allowed.
func (l List) AllowsString(s string) bool {
	u, err := url.Parse(s)
	return err == nil && l.Allows(u)
}

// String lists the prefixes as normalised, comma-separated.
func (l List) String() string {
	out := make([]string, 0, len(l.prefixes))
	for _, p := range l.prefixes {
		out = append(out, p.scheme+"://"+hostPort(p.host, p.port)+p.path)
	}
	return strings.Join(out, ",")
}

func hostPort(host, port string) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + port
}

// portOf is u's port as a number (0080 is 80), or its scheme's default; "" when it is
// not a port, which no prefix has.
func portOf(u *url.URL) string {
	p := u.Port()
	if p == "" {
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return ""
	}
	return strconv.FormatUint(n, 10)
}

// segments splits a decoded path into its non-empty segments, and reports false when it
// has a dot segment. Some servers and proxies also take a backslash for a slash, or ignore
// a segment's ;parameters: "/a/x\..\..\b" and "/a/..;/b" have dot segments too.
func segments(path string) ([]string, bool) {
	for s := range strings.FieldsFuncSeq(path, func(r rune) bool { return r == '/' || r == '\\' }) {
		if name, _, _ := strings.Cut(s, ";"); name == "." || name == ".." {
			return nil, false
		}
	}
	return strings.FieldsFunc(path, func(r rune) bool { return r == '/' }), true
}

func joinPath(segs []string) string {
	if len(segs) == 0 {
		return ""
	}
	return "/" + strings.Join(segs, "/")
}

// within reports whether path is base or below it, segment-wise.
func within(path, base string) bool {
	return base == "" || path == base || strings.HasPrefix(path, base+"/")
}
