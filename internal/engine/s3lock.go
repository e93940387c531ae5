package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// s3Location is where an s3:// backend's objects are, as gocloud's s3blob reads its URL.
type s3Location struct {
	bucket, region string
	endpoint       *url.URL // nil: AWS's regional endpoint
	pathStyle      bool
}

// parseS3Backend reads an s3:// backend URL: its bucket, and the query parameters gocloud
// takes for a server of one's own (endpoint, region, use_path_style or s3ForcePathStyle,
// disable_https or disableSSL). The region falls back to AWS_REGION, AWS_DEFAULT_REGION,
// then us-east-1.
func parseS3Backend(backend string, env map[string]string) (s3Location, error) {
	u, err := url.Parse(backend)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return s3Location{}, fmt.Errorf("not an s3:// backend URL")
	}
	q := u.Query()
	loc := s3Location{bucket: u.Host, region: q.Get("region")}
	for _, v := range []string{env["AWS_REGION"], env["AWS_DEFAULT_REGION"], "us-east-1"} {
		if loc.region == "" {
			loc.region = v
		}
	}
	truthy := func(keys ...string) bool {
		for _, k := range keys {
			if v := strings.ToLower(q.Get(k)); v == "true" || v == "1" {
				return true
			}
		}
		return false
	}
	loc.pathStyle = truthy("use_path_style", "s3ForcePathStyle")
	if ep := q.Get("endpoint"); ep != "" {
		if !strings.Contains(ep, "://") {
			scheme := "https"
			if truthy("disable_https", "disableSSL") {
				scheme = "http"
			}
			ep = scheme + "://" + ep
		}
		if loc.endpoint, err = url.Parse(ep); err != nil || loc.endpoint.Host == "" {
			return s3Location{}, fmt.Errorf("failed to parse the backend's endpoint %q", q.Get("endpoint"))
		}
	}
	return loc, nil
}

// objectURL is the URL of key in the bucket.
func (l s3Location) objectURL(key string) *url.URL {
	ep := l.endpoint
	if ep == nil {
		ep = &url.URL{Scheme: "https", Host: "s3." + l.region + ".amazonaws.com"}
	}
	u := *ep
	if l.pathStyle {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/" + l.bucket + "/" + key
	} else {
		u.Host = l.bucket + "." + u.Host
		u.Path = strings.TrimSuffix(u.Path, "/") + "/" + key
	}
	u.RawQuery = ""
	return &u
}

// removeS3Locks deletes the lock objects (their s3:// URLs) a conflict listed, with the
// run's static AWS credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and, if set,
// AWS_SESSION_TOKEN), and reports whether it deleted them all. The caller has proven every
// holder gone. Only keys in the backend's bucket under .pulumi/locks/ are touched.
// Credentials from elsewhere (a web identity, an instance profile, a profile file) are not
// read: then the locks stay, and the failure with them.
func (x *run) removeS3Locks(ctx context.Context, locks []string) error {
	loc, err := parseS3Backend(x.env["PULUMI_BACKEND_URL"], x.env)
	if err != nil {
		return err
	}
	access, secret := x.env["AWS_ACCESS_KEY_ID"], x.env["AWS_SECRET_ACCESS_KEY"]
	if access == "" || secret == "" {
		return fmt.Errorf("no AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the run's environment")
	}
	if len(locks) == 0 {
		return fmt.Errorf("the conflict names no lock object")
	}
	for _, lock := range locks {
		u, err := url.Parse(lock)
		if err != nil || u.Scheme != "s3" || u.Host != loc.bucket {
			return fmt.Errorf("lock %q is not in the backend's bucket", lock)
		}
		key := strings.TrimPrefix(u.Path, "/")
		if !strings.Contains("/"+key, "/.pulumi/locks/") || !strings.HasSuffix(key, ".json") {
			return fmt.Errorf("%q is not a lock object", key)
		}
		if err := deleteS3Object(ctx, loc, key, access, secret, x.env["AWS_SESSION_TOKEN"], time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// deleteS3Object deletes one object with an AWS Signature Version 4 request. A key already
// gone counts as deleted, as S3 itself answers.
func deleteS3Object(ctx context.Context, loc s3Location, key, access, secret, token string, now time.Time) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, loc.objectURL(key).String(), nil)
	if err != nil {
		return fmt.Errorf("failed to build the request to delete %s: %w", key, err)
	}
	if token != "" {
		req.Header.Set("X-Amz-Security-Token", token)
	}
	signS3(req, loc.region, access, secret, now)
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("failed to delete lock object %s: %w", key, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("failed to delete lock object %s: %s", key, resp.Status)
	}
	return nil
}

// emptySHA256 is the hex SHA-256 of an empty payload.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// signS3 signs a request without a body or query for S3 (AWS Signature Version 4, the payload's hash
// sent in x-amz-content-sha256): every header already set is signed, with host,
// x-amz-content-sha256 and x-amz-date.
func signS3(req *http.Request, region, access, secret string, now time.Time) {
	stamp := now.UTC().Format("20060102T150405Z")
	day := stamp[:8]
	req.Header.Set("X-Amz-Date", stamp)
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)

	headers := map[string]string{"host": req.URL.Host}
	for k, v := range req.Header {
		headers[strings.ToLower(k)] = strings.TrimSpace(strings.Join(v, ","))
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	var canonHeaders strings.Builder
	for _, k := range names {
		canonHeaders.WriteString(k + ":" + headers[k] + "\n")
	}
	signed := strings.Join(names, ";")
	canonical := strings.Join([]string{
		req.Method, s3EscapePath(req.URL.Path), "", // no query string
		canonHeaders.String(), signed, emptySHA256,
	}, "\n")
	scope := day + "/" + region + "/s3/aws4_request"
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + stamp + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := []byte("AWS4" + secret)
	for _, part := range []string{day, region, "s3", "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
		access, scope, signed, hex.EncodeToString(hmacSHA256(key, toSign))))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// s3EscapePath encodes a path as S3's canonical request wants it: every byte but the
// unreserved ones and "/" percent-encoded, once.
func s3EscapePath(p string) string {
	if p == "" {
		return "/"
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '/' || c == '-' || c == '_' || c == '.' || c == '~' ||
			'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
