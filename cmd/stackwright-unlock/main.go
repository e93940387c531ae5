package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path"
	"strings"
	"syscall"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

const usage = "usage: stackwright-unlock <backend URL> <lock URL>..."

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := unlock(ctx, os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// timeout bounds the whole run: a backend that does not answer in a minute is down, and the
// engine's run must not hang on it.
const timeout = time.Minute

// unlock deletes the lock objects locks name from the backend. Every lock is checked
// before anything is opened, so a list with one lock too many deletes none.
func unlock(ctx context.Context, backend string, locks []string) error {
	b, err := url.Parse(backend)
	if err != nil {
		return fmt.Errorf("failed to parse the backend URL: %w", err)
	}
	keys := make([]string, 0, len(locks))
	for _, l := range locks {
		k, err := lockKey(b, l)
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	bucket, err := openBucket(ctx, b)
	if err != nil {
		return err
	}
	defer func() { _ = bucket.Close() }()
	for _, k := range keys {
		if err := bucket.Delete(ctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("failed to delete lock %s: %w", k, err)
		}
		fmt.Println("deleted", k)
	}
	return nil
}

// lockKey is the key, in the backend's bucket (below the backend URL's path, which pulumi
// uses as a prefix), of a lock URL as pulumi's conflict lists it: the backend URL with the
// lock's key joined to its path. Only keys of Pulumi's lock directory are returned.
func lockKey(backend *url.URL, lock string) (string, error) {
	switch backend.Scheme {
	case "s3", "gs", "azblob":
	default:
		return "", fmt.Errorf("backend scheme %q: only s3://, gs:// and azblob:// backends are handled here", backend.Scheme)
	}
	l, err := url.Parse(lock)
	if err != nil {
		return "", fmt.Errorf("failed to parse lock URL %q: %w", lock, err)
	}
	prefix := strings.Trim(backend.Path, "/")
	if prefix != "" {
		prefix += "/"
	}
	key := strings.TrimPrefix(l.Path, "/")
	if l.Scheme != backend.Scheme || l.Host != backend.Host || !strings.HasPrefix(key, prefix) {
		return "", fmt.Errorf("lock %q is not in the backend %s", lock, backend.Redacted())
	}
	key = strings.TrimPrefix(key, prefix)
	if path.Clean(key) != key || !strings.HasPrefix(key, ".pulumi/locks/") || path.Ext(key) != ".json" {
		return "", fmt.Errorf("%q is not a lock of the backend", key)
	}
	return key, nil
}

// openBucket opens the backend's bucket as pulumi's self-managed backend does: gocloud's
// opener for the scheme (pulumi's choices of credentials for gs:// and of opener for
// azblob://), then the URL's path as a prefix.
func openBucket(ctx context.Context, b *url.URL) (*blob.Bucket, error) {
	mux := blob.DefaultURLMux()
	switch b.Scheme {
	case gcsblob.Scheme:
		var err error
		if mux, err = googleMux(ctx); err != nil {
			return nil, err
		}
	case azureblob.Scheme:
		// As pulumi: gocloud's default opener refuses a SAS token with a URL that names
		// its storage account.
		mux = &blob.URLMux{}
		mux.RegisterBucket(azureblob.Scheme, &azureblob.URLOpener{
			MakeClient:        azureblob.NewDefaultClient,
			ServiceURLOptions: *azureblob.NewDefaultServiceURLOptions(),
		})
	}
	root := *b
	root.Path, root.RawPath = "", ""
	bucket, err := mux.OpenBucket(ctx, root.String())
	if err != nil {
		return nil, fmt.Errorf("failed to open the backend %s: %w", b.Redacted(), err)
	}
	if p := strings.Trim(b.Path, "/"); p != "" {
		bucket = blob.PrefixedBucket(bucket, p+"/")
	}
	return bucket, nil
}

// googleMux opens gs:// buckets with the credentials pulumi's backend takes, in its order:
// GOOGLE_CREDENTIALS (a key file's content), GOOGLE_OAUTH_ACCESS_TOKEN, then Google's
// application default credentials (GOOGLE_APPLICATION_CREDENTIALS, workload identity, the
// metadata server).
func googleMux(ctx context.Context) (*blob.URLMux, error) {
	const scope = "https://www.googleapis.com/auth/devstorage.read_write"
	var creds *google.Credentials
	var err error
	switch {
	case os.Getenv("GOOGLE_CREDENTIALS") != "":
		creds, err = google.CredentialsFromJSON(ctx, []byte(os.Getenv("GOOGLE_CREDENTIALS")), scope) //nolint:staticcheck // pulumi reads it so
	case os.Getenv("GOOGLE_OAUTH_ACCESS_TOKEN") != "":
		creds = &google.Credentials{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: os.Getenv("GOOGLE_OAUTH_ACCESS_TOKEN")})}
	default:
		creds, err = gcp.DefaultCredentials(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to find Google credentials: %w", err)
	}
	client, err := gcp.NewHTTPClient(gcp.DefaultTransport(), creds.TokenSource)
	if err != nil {
		return nil, fmt.Errorf("failed to make a Google Cloud Storage client: %w", err)
	}
	mux := &blob.URLMux{}
	mux.RegisterBucket(gcsblob.Scheme, &gcsblob.URLOpener{Client: client})
	return mux, nil
}
