// Package s3tenants gives the tenants of one S3 bucket keys of their own that reach only
// their prefix of it (<bucket>/<prefix>/, the shape of Stackwright's default backend), on
// versitygw (bin/versitygw, built by `make tools`), the S3 server of the engine and
// end-to-end tests.
//
// versitygw enforces it with what it has: a user per tenant in its internal IAM
// (--iam-dir), created through its admin API with the role "user" (no bucket of its own, no
// policy bypass), and a bucket policy naming each user's access key as its Principal, which
// allows s3:GetObject, s3:PutObject and s3:DeleteObject on <bucket>/<prefix>/* and
// s3:ListBucket only with an s3:prefix under <prefix>/ (Policy). The bucket is created
// through the S3 API by the root (Client.CreateBucket), not as a directory by hand: a
// user's CopyObject, which Pulumi's S3 backend uses for its backups, reads the bucket's
// ACL and fails with 500 InternalError on a bucket that has none. The root's keys still
// reach everything.
//
// Start runs such a server on 127.0.0.1 for a test; Setup prepares a bucket and its
// tenants on any versitygw with users, such as the end-to-end tests' in the cluster.
// Client signs requests (AWS Signature Version 4) for both.
package s3tenants
