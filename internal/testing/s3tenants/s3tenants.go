package s3tenants

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Tenant is one tenant's user: keys that reach <bucket>/<Prefix>/ and nothing else.
type Tenant struct {
	// Prefix is the tenant's share of the bucket, without slashes (a namespace's name).
	Prefix string
	// Access and Secret are the user's keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
	Access, Secret string
}

// NewTenant is a tenant of prefix with new keys: the access key names the prefix, the
// secret is random.
func NewTenant(prefix string) Tenant {
	return Tenant{Prefix: prefix, Access: "tenant-" + prefix, Secret: randomHex(20)}
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand's Read never fails
	return hex.EncodeToString(b)
}

// statement is one statement of a bucket policy, as versitygw reads it.
type statement struct {
	Effect    string                         `json:"Effect"`
	Principal map[string][]string            `json:"Principal"`
	Action    []string                       `json:"Action"`
	Resource  string                         `json:"Resource"`
	Condition map[string]map[string][]string `json:"Condition,omitempty"`
}

// Policy is the bucket policy that confines each tenant's user to its prefix of bucket:
// Get, Put and Delete of the objects under <prefix>/, and listings only with a prefix that
// starts with <prefix>/. A listing with the bare "<prefix>" (which AWS's examples often
// allow too) is not allowed: it would show the names of another tenant's objects whose
// prefix starts the same ("team-a" lists "team-ab/..."), and Pulumi never asks for it.
func Policy(bucket string, tenants ...Tenant) ([]byte, error) {
	if len(tenants) == 0 {
		return nil, errors.New("failed to write the bucket policy: no tenants")
	}
	var statements []statement
	for _, tn := range tenants {
		if tn.Prefix == "" || strings.ContainsAny(tn.Prefix, "/*?") {
			return nil, fmt.Errorf("failed to write the bucket policy: prefix %q is empty or has a slash or a wildcard", tn.Prefix)
		}
		principal := map[string][]string{"AWS": {tn.Access}}
		statements = append(statements,
			statement{
				Effect:    "Allow",
				Principal: principal,
				Action:    []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
				Resource:  "arn:aws:s3:::" + bucket + "/" + tn.Prefix + "/*",
			},
			statement{
				Effect:    "Allow",
				Principal: principal,
				Action:    []string{"s3:ListBucket"},
				Resource:  "arn:aws:s3:::" + bucket,
				Condition: map[string]map[string][]string{"StringLike": {"s3:prefix": {tn.Prefix + "/*"}}},
			})
	}
	return json.MarshalIndent(map[string]any{"Version": "2012-10-17", "Statement": statements}, "", "  ")
}

// Setup prepares bucket on the server root is the root of: the bucket (through the S3
// API, so that it has an ACL), a user of role "user" for each tenant, and the bucket
// policy of all of them (replacing any policy it had). It can be repeated with more
// tenants: an existing bucket or user is left as it is.
func Setup(ctx context.Context, root Client, bucket string, tenants ...Tenant) error {
	policy, err := Policy(bucket, tenants...)
	if err != nil {
		return err
	}
	if err := root.CreateBucket(ctx, bucket); err != nil {
		return err
	}
	for _, tn := range tenants {
		if err := root.CreateUser(ctx, tn.Access, tn.Secret); err != nil {
			return err
		}
	}
	return root.PutBucketPolicy(ctx, bucket, policy)
}

// CreateBucket creates bucket, owned by c's user; a bucket c's user already owns is left
// as it is.
func (c Client) CreateBucket(ctx context.Context, bucket string) error {
	_, err := c.Do(ctx, Request{Method: http.MethodPut, Path: "/" + bucket})
	if Code(err) == "BucketAlreadyOwnedByYou" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to create bucket %s: %w", bucket, err)
	}
	return nil
}

// CreateUser creates a user of role "user" with the keys access and secret, through
// versitygw's admin API (c must be the root or an admin); a user of that access key
// already there is left as it is.
func (c Client) CreateUser(ctx context.Context, access, secret string) error {
	// The body is the admin API's auth.Account, in XML.
	body, err := xml.Marshal(struct {
		XMLName xml.Name `xml:"Account"`
		Access  string   `xml:"Access"`
		Secret  string   `xml:"Secret"`
		Role    string   `xml:"Role"`
	}{Access: access, Secret: secret, Role: "user"})
	if err != nil {
		return fmt.Errorf("failed to encode user %s: %w", access, err)
	}
	_, err = c.Do(ctx, Request{Method: http.MethodPatch, Path: "/create-user", Body: body})
	if Code(err) == "XAdminUserExists" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to create user %s: %w", access, err)
	}
	return nil
}

// PutBucketPolicy sets bucket's policy (versitygw validates it, its principals included).
func (c Client) PutBucketPolicy(ctx context.Context, bucket string, policy []byte) error {
	if _, err := c.Do(ctx, Request{Method: http.MethodPut, Path: "/" + bucket, Query: url.Values{"policy": {""}}, Body: policy}); err != nil {
		return fmt.Errorf("failed to put the policy of bucket %s: %w", bucket, err)
	}
	return nil
}
