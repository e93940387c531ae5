package engine

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
)

// maxCrypters bounds the engine's derived passphrase keys; past it they are derived again.
const maxCrypters = 20000

// crypterCache keeps the keys derived from passphrase and salt (PBKDF2, a million rounds:
// a third of a second of CPU each), one per stack's secrets manager, keyed by an HMAC of
// both under the cipher cache's key.
type crypterCache struct {
	mu sync.Mutex
	m  map[string]config.Decrypter
}

func (c *crypterCache) get(key string, derive func() (config.Decrypter, error)) (config.Decrypter, error) {
	c.mu.Lock()
	d, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := derive()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCrypters {
		c.m = map[string]config.Decrypter{}
	}
	c.m[key] = d
	return d, nil
}

// stateSecrets reads the values of the named outputs from the stack's state, for the
// backend Stackwright uses by default: a file:// backend with the passphrase secrets
// provider, whose state is a local file the finished operation has just written. That
// saves the `pulumi stack output --show-secrets` process an operation on a stack with
// secret outputs would otherwise need. Anything else (another backend or secrets
// provider, a layout or format it does not know, a passphrase that does not fit) returns
// false, and the caller asks the CLI.
func (x *run) stateSecrets(ctx context.Context, keys []string) (map[string]any, bool) {
	path, ok := x.statePath()
	if !ok {
		return nil, false
	}
	latest, err := readCheckpoint(path)
	if err != nil || latest == nil || latest.SecretsProviders == nil || latest.SecretsProviders.Type != "passphrase" {
		return nil, false
	}
	var st struct {
		Salt string `json:"salt"`
	}
	if json.Unmarshal(latest.SecretsProviders.State, &st) != nil || st.Salt == "" {
		return nil, false
	}
	phrase, ok := x.passphrase()
	if !ok {
		return nil, false
	}
	dec, err := x.crypters.get(x.ciphers.mac("passphrase", phrase, st.Salt), func() (config.Decrypter, error) {
		return passphraseDecrypter(ctx, phrase, st.Salt)
	})
	if err != nil {
		return nil, false
	}
	var outputs map[string]any
	for _, r := range latest.Resources {
		if string(r.Type) == rootStackType && r.Parent == "" {
			outputs = r.Outputs
			break
		}
	}
	values := make(map[string]any, len(keys))
	for _, k := range keys {
		v, ok := outputs[k]
		if !ok {
			return nil, false
		}
		if values[k], err = reveal(ctx, v, dec); err != nil {
			return nil, false
		}
	}
	return values, true
}

// statePath is where a file:// backend keeps this run's stack (the project-scoped layout
// of Pulumi 3.61 and later).
func (x *run) statePath() (string, bool) {
	root, name, ok := x.fileBackendStack()
	if !ok {
		return "", false
	}
	return filepath.Join(root, ".pulumi", "stacks", x.project, name+".json"), true
}

// fileBackendStack returns the directory of this run's file:// backend and the stack's
// short name in it; ok is false for any other backend, or a stack of another project.
func (x *run) fileBackendStack() (root, name string, ok bool) {
	u, err := url.Parse(x.env["PULUMI_BACKEND_URL"])
	if err != nil || u.Scheme != "file" || u.Path == "" || u.Host != "" {
		return "", "", false
	}
	name = x.req.Stack
	if parts := strings.Split(name, "/"); len(parts) == 3 {
		if parts[1] != x.project {
			return "", "", false
		}
		name = parts[2]
	} else if len(parts) != 1 {
		return "", "", false
	}
	return u.Path, name, true
}

// passphrase is the stack's passphrase as the CLI reads it from the run's environment.
func (x *run) passphrase() (string, bool) {
	if p, ok := x.env["PULUMI_CONFIG_PASSPHRASE"]; ok {
		return p, true
	}
	if f := x.env["PULUMI_CONFIG_PASSPHRASE_FILE"]; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	return "", false
}

// readCheckpoint reads a stack's latest deployment from path, or path.gz.
func readCheckpoint(path string) (*apitype.DeploymentV3, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		var gz []byte
		if gz, err = os.ReadFile(path + ".gz"); err == nil {
			b, err = gunzip(gz)
		}
	}
	if err != nil {
		return nil, err
	}
	var v apitype.VersionedCheckpoint
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	if v.Version != 3 {
		return nil, fmt.Errorf("checkpoint version %d", v.Version)
	}
	var cp apitype.CheckpointV3
	if err := json.Unmarshal(v.Checkpoint, &cp); err != nil {
		return nil, err
	}
	return cp.Latest, nil
}

func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// passphraseDecrypter derives the key of a passphrase secrets manager from its state's
// salt ("v1:<salt>:<check ciphertext>") and checks it against the known plaintext the
// salt carries, as the CLI does.
func passphraseDecrypter(ctx context.Context, phrase, state string) (config.Decrypter, error) {
	parts := strings.SplitN(state, ":", 3)
	if len(parts) != 3 || parts[0] != "v1" {
		return nil, errors.New("unknown salt format")
	}
	salt, err := base64.StdEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	c := config.NewSymmetricCrypterFromPassphrase(phrase, salt)
	if check, err := c.DecryptValue(ctx, parts[2]); err != nil || check != "pulumi" {
		return nil, errors.New("the passphrase does not fit the stack")
	}
	return c, nil
}

// reveal turns an output as the state stores it into its plain value. A secret is
// {sig: secret, ciphertext}: encrypted with the stack's key at the outermost level, and
// holding its inner secrets' JSON as is (the CLI does not encrypt twice).
func reveal(ctx context.Context, v any, dec config.Decrypter) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		if v[secretSigKey] == secretSigValue {
			text, ok := v["ciphertext"].(string)
			if !ok {
				if text, ok = v["plaintext"].(string); !ok {
					return nil, errors.New("secret without ciphertext")
				}
			} else if dec != nil {
				var err error
				if text, err = dec.DecryptValue(ctx, text); err != nil {
					return nil, err
				}
			}
			var inner any
			if err := json.Unmarshal([]byte(text), &inner); err != nil {
				return nil, err
			}
			return reveal(ctx, inner, nil)
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			r, err := reveal(ctx, e, dec)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			r, err := reveal(ctx, e, dec)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}
