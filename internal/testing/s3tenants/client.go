package s3tenants

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Client sends requests to an S3 server (and versitygw's admin API) as one user, signed
// with AWS Signature Version 4 in the Authorization header.
type Client struct {
	// Endpoint is the server's base URL, http://host:port.
	Endpoint string
	// Access and Secret are the user's keys.
	Access, Secret string
	// Region is the signing region; empty is us-east-1.
	Region string
	// HTTP sends the requests; nil is a client with a 30 s timeout.
	HTTP *http.Client
}

// As is c with another user's keys.
func (c Client) As(access, secret string) Client {
	c.Access, c.Secret = access, secret
	return c
}

// Request is one request: Path is /bucket or /bucket/key (unescaped), Header holds any
// x-amz- headers (signed with the rest).
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Header map[string]string
	Body   []byte
}

// APIError is a refusal from the server: its status and, unless the response had no body
// (HEAD), the S3 error's Code and Message.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("status %d", e.Status)
	}
	return fmt.Sprintf("status %d: %s: %s", e.Status, e.Code, e.Message)
}

// Code is the S3 error code of err (AccessDenied, NoSuchKey, ...), or "" when err is not a
// refusal from the server.
func Code(err error) string {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code
	}
	return ""
}

// Do sends r and returns the response's body, or an *APIError when the status is not 2xx.
func (c Client) Do(ctx context.Context, r Request) ([]byte, error) {
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("failed to parse endpoint %s: %w", c.Endpoint, err)
	}
	// The path is sent as it is signed: every byte but the unreserved ones and slashes
	// escaped, and never cleaned (a key may hold "..").
	u.Path, u.RawPath = r.Path, escape(r.Path, true)
	query := canonicalQuery(r.Query)
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(r.Body))
	if err != nil {
		return nil, fmt.Errorf("failed to build request %s %s: %w", r.Method, r.Path, err)
	}
	sum := sha256.Sum256(r.Body)
	headers := map[string]string{
		"host":                 u.Host,
		"x-amz-content-sha256": hex.EncodeToString(sum[:]),
		"x-amz-date":           time.Now().UTC().Format("20060102T150405Z"),
	}
	for k, v := range r.Header {
		headers[strings.ToLower(k)] = v
	}
	names := slices.Sorted(maps.Keys(headers))
	var canonical strings.Builder
	fmt.Fprintf(&canonical, "%s\n%s\n%s\n", r.Method, u.EscapedPath(), query)
	for _, k := range names {
		fmt.Fprintf(&canonical, "%s:%s\n", k, strings.TrimSpace(headers[k]))
		if k != "host" {
			req.Header.Set(k, headers[k])
		}
	}
	signed := strings.Join(names, ";")
	fmt.Fprintf(&canonical, "\n%s\n%s", signed, headers["x-amz-content-sha256"])
	region := c.Region
	if region == "" {
		region = "us-east-1"
	}
	date := headers["x-amz-date"]
	scope := date[:8] + "/" + region + "/s3/aws4_request"
	hashed := sha256.Sum256([]byte(canonical.String()))
	toSign := "AWS4-HMAC-SHA256\n" + date + "\n" + scope + "\n" + hex.EncodeToString(hashed[:])
	key := []byte("AWS4" + c.Secret)
	for _, part := range []string{date[:8], region, "s3", "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
		c.Access, scope, signed, hex.EncodeToString(hmacSHA256(key, toSign))))

	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to send %s %s: %w", r.Method, r.Path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("failed to read the response to %s %s: %w", r.Method, r.Path, err)
	}
	if resp.StatusCode/100 != 2 {
		apiErr := &APIError{Status: resp.StatusCode}
		var e struct{ Code, Message string }
		if xml.Unmarshal(body, &e) == nil {
			apiErr.Code, apiErr.Message = e.Code, e.Message
		}
		return body, apiErr
	}
	return body, nil
}

// ListResult is a ListObjectsV2 response: the keys and the common prefixes.
type ListResult struct {
	Keys     []string
	Prefixes []string
}

// List lists bucket's objects (ListObjectsV2) with prefix and delimiter ("" sends none).
func (c Client) List(ctx context.Context, bucket, prefix, delimiter string) (ListResult, error) {
	q := url.Values{"list-type": {"2"}}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if delimiter != "" {
		q.Set("delimiter", delimiter)
	}
	body, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/" + bucket, Query: q})
	if err != nil {
		return ListResult{}, err
	}
	var out struct {
		Contents       []struct{ Key string }
		CommonPrefixes []struct{ Prefix string }
	}
	if err := xml.Unmarshal(body, &out); err != nil {
		return ListResult{}, fmt.Errorf("failed to parse the listing of %s: %w", bucket, err)
	}
	var r ListResult
	for _, o := range out.Contents {
		r.Keys = append(r.Keys, o.Key)
	}
	for _, p := range out.CommonPrefixes {
		r.Prefixes = append(r.Prefixes, p.Prefix)
	}
	return r, nil
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalQuery is q in Signature Version 4's canonical form, which is also how it is
// sent: keys sorted, then values, each escaped.
func canonicalQuery(q url.Values) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(q)) {
		for _, v := range slices.Sorted(slices.Values(q[k])) {
			parts = append(parts, escape(k, false)+"="+escape(v, false))
		}
	}
	return strings.Join(parts, "&")
}

// escape percent-encodes every byte of s but the unreserved characters (and slashes, when
// keepSlash), as Signature Version 4 requires.
func escape(s string, keepSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case 'A' <= ch && ch <= 'Z', 'a' <= ch && ch <= 'z', '0' <= ch && ch <= '9',
			ch == '-', ch == '_', ch == '.', ch == '~', ch == '/' && keepSlash:
			b.WriteByte(ch)
		default:
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}
