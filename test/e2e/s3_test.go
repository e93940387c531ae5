//go:build e2e

package e2e

import (
	"context"
	"crypto/md5" //nolint:gosec // S3's ETag of a single-part object is its MD5, not a security measure.
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/internal/testing/s3tenants"
)

const (
	s3Namespace = "e2e-s3"
	// The image tag is the versitygw module version (hack/tools/versitygw); hack/images
	// derives it from the binary, so the two cannot drift apart.
	s3Image  = "localhost/versitygw:v1.8.0"
	s3Access = "e2e-access-key"
	s3Secret = "e2e-secret-key-not-for-production"
	s3Port   = 7070
	// s3UID is the image's non-root user; the bucket directories must be its own.
	s3UID = 65532
)

// s3Server is an S3-compatible server (versitygw on a node directory) running in the
// cluster, reached by its Service's cluster IP: Pods have no cluster DNS here (the test
// process reaches it there too).
type s3Server struct {
	endpoint string
	dir      string
	// tenantBucket is the bucket whose namespaces tenantKeys gives keys of their own
	// (withTenantBucket); root signs requests with the server's root keys.
	tenantBucket string
	root         s3tenants.Client
	mu           sync.Mutex
	tenants      []s3tenants.Tenant
}

// s3Option changes how startS3 and runS3 run the server.
type s3Option func(*s3Options)

type s3Options struct {
	tenantBucket string
}

// withTenantBucket runs the server with users (versitygw's internal IAM, on a node
// directory of its own) and metadata, and creates bucket through its S3 API as the root,
// so that tenantKeys can give a namespace keys that reach only its prefix of the bucket
// (see s3tenants). The root's keys (s3CredentialsYAML) still reach everything.
func withTenantBucket(bucket string) s3Option {
	return func(o *s3Options) { o.tenantBucket = bucket }
}

// startS3 runs the server for one test and removes it when the test ends. It keeps no
// metadata unless it has a tenant bucket.
func startS3(t *testing.T, c client.Client, opts ...s3Option) *s3Server {
	t.Helper()
	var o s3Options
	for _, opt := range opts {
		opt(&o)
	}
	createNamespace(t, c, s3Namespace)
	t.Cleanup(func() { deleteNamespace(t, c, s3Namespace) })
	return runS3(t, c, s3Namespace, "s3", o.tenantBucket == "", opts...)
}

// runS3 runs versitygw as the Deployment and Service name in ns, on a node directory of
// its own. With noMeta it keeps no metadata, so buckets and objects can be made as plain
// directories and files, but objects have no ETag; without, an object made by hand needs
// its ETag set as the xattr user.etag (see putObject). A tenant bucket
// (withTenantBucket) needs metadata: its policy and ACL are kept there.
func runS3(t *testing.T, c client.Client, ns, name string, noMeta bool, opts ...s3Option) *s3Server {
	t.Helper()
	var o s3Options
	for _, opt := range opts {
		opt(&o)
	}
	if noMeta && o.tenantBucket != "" {
		t.Fatal("a tenant bucket needs an S3 server with metadata")
	}
	dir := t.TempDir()
	if err := os.Chown(dir, s3UID, s3UID); err != nil {
		t.Fatal(err)
	}
	backend := `"posix", "/data"`
	if noMeta {
		backend = `"posix", "--nometa", "/data"`
	}
	// Users live in a directory of their own, out of the buckets' (where it would be one).
	iamArgs, iamMount, iamVolume := "", "", ""
	if o.tenantBucket != "" {
		iam := t.TempDir()
		if err := os.Chown(iam, s3UID, s3UID); err != nil {
			t.Fatal(err)
		}
		iamArgs = `"--iam-dir", "/iam", `
		iamMount = "\n        - {name: iam, mountPath: /iam}"
		iamVolume = "\n      - name: iam\n        hostPath: {path: " + iam + ", type: Directory}"
	}
	manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[6]s
spec:
  selector:
    matchLabels: {app: %[6]s}
  template:
    metadata:
      labels: {app: %[6]s}
    spec:
      containers:
      - name: versitygw
        image: %[1]s
        imagePullPolicy: Never
        args: ["--port", ":%[2]d", "--access", "%[3]s", "--secret", "%[4]s", %[8]s%[7]s]
        ports:
        - containerPort: %[2]d
        readinessProbe:
          tcpSocket: {port: %[2]d}
          periodSeconds: 1
        volumeMounts:
        - {name: data, mountPath: /data}%[9]s
      volumes:
      - name: data
        hostPath: {path: %[5]s, type: Directory}%[10]s
---
apiVersion: v1
kind: Service
metadata:
  name: %[6]s
spec:
  selector: {app: %[6]s}
  ports:
  - port: %[2]d
    targetPort: %[2]d
`, s3Image, s3Port, s3Access, s3Secret, dir, name, backend, iamArgs, iamMount, iamVolume)
	path := filepath.Join(t.TempDir(), "s3.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "kubectl", "apply", "-n", ns, "-f", path)
	s := &s3Server{dir: dir}
	NewWithT(t).Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
		g.Expect(d.Status.ReadyReplicas).To(Equal(int32(1)))
		var svc corev1.Service
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &svc)).To(Succeed())
		g.Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
		s.endpoint = fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, s3Port)
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "S3 server not ready\n%s", describeNamespace(ns))
	s.root = s3tenants.Client{Endpoint: s.endpoint, Access: s3Access, Secret: s3Secret}
	if o.tenantBucket != "" {
		// Through the API, so that the bucket has an ACL: a user's CopyObject (Pulumi's
		// backups) fails with 500 on a bucket made as a directory.
		s.tenantBucket = o.tenantBucket
		NewWithT(t).Eventually(func() error { return s.root.CreateBucket(context.Background(), s.tenantBucket) }).
			WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "failed to create the tenant bucket")
	}
	return s
}

// tenantKeys returns keys of namespace ns's own, which reach its prefix of the tenant bucket
// (where the install's default backend keeps its Stacks' state) and nothing else: a user
// for ns, added to the bucket's policy with the users before it.
func (s *s3Server) tenantKeys(t *testing.T, ns string) s3tenants.Tenant {
	t.Helper()
	if s.tenantBucket == "" {
		t.Fatal("the S3 server has no tenant bucket (withTenantBucket)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tn := range s.tenants {
		if tn.Prefix == ns {
			return tn
		}
	}
	tenants := append(slices.Clone(s.tenants), s3tenants.NewTenant(ns))
	NewWithT(t).Eventually(func() error { return s3tenants.Setup(context.Background(), s.root, s.tenantBucket, tenants...) }).
		WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "failed to give %s keys of its own", ns)
	s.tenants = tenants
	return tenants[len(tenants)-1]
}

// putObject writes an object of a server started without noMeta, as a file with its ETag.
func (s *s3Server) putObject(t *testing.T, bucket, key, content string) {
	t.Helper()
	path := filepath.Join(s.dir, bucket, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum([]byte(content))
	if err := unix.Setxattr(path, "user.etag", []byte(hex.EncodeToString(sum[:])), 0); err != nil {
		t.Fatalf("failed to set the ETag of %s: %v", path, err)
	}
	for p := path; p != s.dir; p = filepath.Dir(p) {
		if err := os.Chown(p, s3UID, s3UID); err != nil {
			t.Fatal(err)
		}
	}
}

// bucket creates a bucket (a directory of the server's) and returns the backend URL of a
// prefix in it.
func (s *s3Server) bucket(t *testing.T, name, prefix string) string {
	t.Helper()
	dir := filepath.Join(s.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, s3UID, s3UID); err != nil {
		t.Fatal(err)
	}
	url := "s3://" + name
	if prefix != "" {
		url += "/" + prefix
	}
	return url + "?endpoint=" + s.endpoint + "&region=us-east-1&use_path_style=true"
}

// objects lists the keys below prefix in a bucket, from the server's directory.
func (s *s3Server) objects(bucket, prefix string) []string {
	var keys []string
	base := filepath.Join(s.dir, bucket)
	_ = filepath.WalkDir(filepath.Join(base, prefix), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(base, path)
			keys = append(keys, rel)
		}
		return nil
	})
	return keys
}

// s3CredentialsYAML holds the Secrets of a Stack on the S3 server: the server's root keys
// and a passphrase for the secrets provider; s3EnvRefsYAML is the envRefs entries (under a
// Stack's envRefs) that hand them to the program's backend.
var s3CredentialsYAML = credentialsYAML(s3Access, s3Secret)

// tenantCredentialsYAML is s3CredentialsYAML with a tenant's keys (s3Server.tenantKeys).
func tenantCredentialsYAML(tn s3tenants.Tenant) string { return credentialsYAML(tn.Access, tn.Secret) }

func credentialsYAML(access, secret string) string {
	return `apiVersion: v1
kind: Secret
metadata:
  name: s3-credentials
stringData:
  accessKey: ` + access + `
  secretKey: ` + secret + `
` + passphraseSecretYAML
}

const (
	passphraseSecretYAML = `---
apiVersion: v1
kind: Secret
metadata:
  name: pass
stringData:
  passphrase: e2e-only
`
	s3EnvRefsYAML = `    AWS_ACCESS_KEY_ID:
      type: Secret
      secret:
        name: s3-credentials
        key: accessKey
    AWS_SECRET_ACCESS_KEY:
      type: Secret
      secret:
        name: s3-credentials
        key: secretKey
    PULUMI_CONFIG_PASSPHRASE:
      type: Secret
      secret:
        name: pass
        key: passphrase
`
)

// configMapWriterYAML lets the ServiceAccount "deployer" write ConfigMaps in its namespace.
var configMapWriterYAML = configMapWriter("deployer")

// configMapWriter is a ServiceAccount sa that may write ConfigMaps in its namespace.
func configMapWriter(sa string) string {
	return `apiVersion: v1
kind: ServiceAccount
metadata:
  name: ` + sa + `
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: configmap-writer
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: ` + sa + `-writes-configmaps
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: configmap-writer
subjects:
- kind: ServiceAccount
  name: ` + sa + `
`
}

// applyConfigMapStack applies, in ns, a Stack "cm" running as the ServiceAccount
// "deployer" whose program creates the ConfigMap "made-by-stack" (data by=value) with the
// runner Pod's credentials, its state in backend (or the install's default when empty)
// reached with the keys in credentials (s3CredentialsYAML, tenantCredentialsYAML). The
// ServiceAccount's rights are the caller's to grant (configMapWriterYAML).
func applyConfigMapStack(t *testing.T, ns, credentials, backend, value string) {
	t.Helper()
	spec := ""
	if backend != "" {
		spec = "  backend: " + backend + "\n"
	}
	manifest := credentials + `---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: deployer
---
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: cm
program:
  resources:
    made:
      type: kubernetes:core/v1:ConfigMap
      properties:
        metadata:
          name: made-by-stack
        data:
          by: "` + value + `"
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: cm
spec:
  stack: e2e
  programRef:
    name: cm
  serviceAccountName: deployer
  destroyOnFinalize: true
` + spec + `  envRefs:
` + s3EnvRefsYAML
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, manifest))
}

// writeManifest writes YAML to a file for kubectl apply -f.
func writeManifest(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
