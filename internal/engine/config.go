package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
)

// configEntry is one validated Request.Config value.
type configEntry struct {
	key    string // as given: "replicas" or "aws:region"
	value  config.Value
	secret string // the plaintext of a secret value
	isSec  bool
}

// parseConfig validates every value before Run touches the stack, so a bad value is a
// Permanent error with nothing half-written.
func parseConfig(in map[string]ConfigValue) ([]configEntry, error) {
	var out []configEntry
	for _, k := range slices.Sorted(maps.Keys(in)) {
		v := in[k]
		if k == "" {
			return nil, errors.New("invalid config key: empty")
		}
		if v.Secret {
			s, err := secretPlaintext(v.Value)
			if err != nil {
				return nil, fmt.Errorf("invalid config value for %q: %w", k, err)
			}
			out = append(out, configEntry{key: k, secret: s, isSec: true})
			continue
		}
		cv, err := configValue(v.Value)
		if err != nil {
			return nil, fmt.Errorf("invalid config value for %q: %w", k, err)
		}
		out = append(out, configEntry{key: k, value: cv})
	}
	return out, nil
}

// configValue turns JSON into a plain config value: a JSON string is stored as that string,
// anything else as a structured ("object") value, which Pulumi.<stack>.yaml keeps as YAML
// of the same shape.
//
// Pulumi has no typed top-level scalars in a stack settings file: the CLI rewrites a
// top-level 3, 2.5 or true as the strings "3", "2.5" and "true" whenever it saves the file,
// and the engine turns untyped strings that look like integers or booleans back into
// numbers and booleans for the program (config.Map.AsDecryptedPropertyMap). So a program
// sees 3 and true as a number and a boolean. 2.5 reaches the language host as the string
// "2.5" (the engine coerces only integers and booleans); the Pulumi YAML host still gives
// the program the number 2.5, other hosts may not. And a JSON *string* that looks like an
// integer or boolean ("42", "true") reaches the program as a number or boolean too, even
// when Pulumi.yaml declares the key a string. Values inside objects and lists keep their
// JSON types.
func configValue(raw json.RawMessage) (config.Value, error) {
	raw = bytes.TrimSpace(raw)
	if !json.Valid(raw) {
		return config.Value{}, errors.New("not valid JSON")
	}
	switch raw[0] {
	case 'n':
		return config.Value{}, errors.New("null is not a config value")
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return config.Value{}, err
		}
		return config.NewValue(s), nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return config.Value{}, err
	}
	return config.NewObjectValue(compact.String()), nil
}

// secretPlaintext is what a secret value encrypts: the string for a JSON string, the
// compact JSON text otherwise. Pulumi secrets are strings: a secret number or object reaches
// the program as its JSON text (a program reads it with e.g. config.GetSecretObject or a
// YAML fn::fromJSON).
func secretPlaintext(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if !json.Valid(raw) {
		return "", errors.New("not valid JSON")
	}
	if raw[0] == 'n' {
		return "", errors.New("null is not a config value")
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var compact bytes.Buffer
	err := json.Compact(&compact, raw)
	return compact.String(), err
}

// configKey qualifies a key without a namespace with the project's name, as the CLI does.
func configKey(project, key string) (config.Key, error) {
	if !strings.Contains(key, ":") {
		key = project + ":" + key
	}
	return config.ParseKey(key)
}

// configure writes the request's config: plain values, secrets whose ciphertext for this
// stack is cached, and the environments to import, straight into the stack settings file
// (keeping everything else in it: other keys, the secrets provider and its salt, the
// project's own imports); then each other secret through `pulumi config set --secret`,
// which encrypts it with the stack's secrets provider, and whose ciphertext it then
// caches. Secrets go to the CLI on stdin, one invocation each: the Automation API's
// SetConfig/SetAllConfig put them on the command line, where any process on the machine
// can read them in /proc.
//
// The environments' import list is the one `pulumi config env add` edits (the Automation
// API's AddEnvironments, which PKO calls): writing it here costs no process, where the
// command would start one that also asks the backend for the stack.
func (x *run) configure(ctx context.Context, ws auto.Workspace, stack, project string, entries []configEntry) error {
	addEnvs := len(x.req.Environments) > 0 && !x.envAdded
	if len(entries) == 0 && !addEnvs {
		return nil
	}
	action := "failed to set config of stack " + stack
	keys := make([]config.Key, len(entries))
	values := make([]config.Value, len(entries))
	var direct, set []int // entries written into the file; secrets the CLI must encrypt
	for i, c := range entries {
		k, err := configKey(project, c.key)
		if err != nil {
			return x.fail(ctx, action, "", ClassPermanent, fmt.Errorf("invalid config key %q: %w", c.key, err))
		}
		keys[i], values[i] = k, c.value
		if !c.isSec {
			direct = append(direct, i)
			continue
		}
		ct, ok := "", false
		if x.ciphers != nil && !x.noCache {
			ct, ok = x.ciphers.get(x.stackKey, x.ciphers.valueKey(k.String(), c.secret))
		}
		if !ok {
			set = append(set, i)
			continue
		}
		values[i] = config.NewSecureValue(ct)
		direct = append(direct, i)
		x.usedCache = true
	}
	if len(direct) > 0 || addEnvs {
		ps, err := x.stackSettings(ctx, ws, stack)
		if err != nil {
			return x.fail(ctx, action, "", ClassPermanent, err)
		}
		for _, i := range direct {
			ps.Config[keys[i]] = values[i]
		}
		if addEnvs {
			ps.Environment = ps.Environment.Append(slices.Clone(x.req.Environments)...)
		}
		if err := ws.SaveStackSettings(ctx, stack, ps); err != nil {
			return x.fail(ctx, action, "", "", err)
		}
		x.envAdded = x.envAdded || addEnvs
	}
	for _, i := range set {
		args := []string{"config", "set", "--stack", stack, "--secret", "--raw", "--", keys[i].String()}
		if _, err := x.cli(ctx, "set secret config "+keys[i].String(), strings.NewReader(entries[i].secret), false, args...); err != nil {
			return x.fail(ctx, action, "", "", err)
		}
	}
	if len(set) > 0 && x.ciphers != nil {
		x.remember(ctx, ws, stack, keys, entries, set)
	}
	return nil
}

// remember caches the ciphertexts `config set --secret` wrote for entries[set]. A
// settings file it cannot read only costs the cache.
func (x *run) remember(ctx context.Context, ws auto.Workspace, stack string, keys []config.Key, entries []configEntry, set []int) {
	ps, err := ws.StackSettings(ctx, stack)
	if err != nil {
		return
	}
	for _, i := range set {
		v, ok := ps.Config[keys[i]]
		if !ok || !v.Secure() {
			continue
		}
		ct, err := v.Value(config.NopDecrypter)
		if err != nil || ct == "" {
			continue
		}
		x.ciphers.put(x.stackKey, x.ciphers.valueKey(keys[i].String(), entries[i].secret), ct)
	}
}

// stackSettings reads the work dir's stack settings file, or starts an empty one.
func (x *run) stackSettings(ctx context.Context, ws auto.Workspace, stack string) (*workspace.ProjectStack, error) {
	ps := &workspace.ProjectStack{}
	if stackSettingsExist(ws.WorkDir(), stack) {
		var err error
		if ps, err = ws.StackSettings(ctx, stack); err != nil {
			return nil, err
		}
	}
	if ps.Config == nil {
		ps.Config = config.Map{}
	}
	return ps, nil
}

// stackSettingsExist mirrors LocalWorkspace.StackSettings' lookup, which does not tell a
// missing file from a broken one.
func stackSettingsExist(workDir, stack string) bool {
	name := stack[strings.LastIndex(stack, "/")+1:]
	for _, ext := range []string{".yaml", ".yml", ".json"} {
		if _, err := os.Stat(filepath.Join(workDir, "Pulumi."+name+ext)); err == nil {
			return true
		}
	}
	return false
}

// cliError is a failed CLI invocation Run made itself, shaped like the Automation API's
// errors so that Message and Classify read it the same way.
type cliError struct {
	err            error
	stdout, stderr string
	code           int
}

func (e *cliError) Error() string {
	return fmt.Sprintf("%s\ncode: %d\nstdout: %s\nstderr: %s\n", e.err, e.code, e.stdout, e.stderr)
}

func (e *cliError) Unwrap() error { return e.err }
