package engine

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"sync"
)

// maxCachedStacks bounds the cipher cache; past it the cache starts again empty, which
// costs one `config set --secret` per value on the next run of each stack.
const maxCachedStacks = 20000

// cipherCache remembers the ciphertexts the CLI made of secret config values, so that a
// later run of the same stack writes them into its fresh settings file itself instead of
// starting `pulumi config set --secret` for each value again.
//
// A ciphertext is only good for the secrets manager that made it: the stack's, as the
// backend keeps it (with PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER the CLI decrypts with the
// state's manager when the settings file names none). Entries are keyed by everything that
// selects that manager and its key: project, stack, secrets provider and the run's whole
// environment (backend URL, passphrase, cloud credentials). A stack that Run creates or
// removes loses its entries. A stack recreated behind Run's back, or a settings file in the
// program's repository that names another secrets manager, fails to decrypt them: Run then
// forgets them and sets the values again (see run).
//
// Keys are HMACs under a key of this process, so the cache holds no plaintext and nothing
// from which a plaintext could be confirmed outside this process.
type cipherCache struct {
	mu     sync.Mutex
	key    []byte
	stacks map[string]map[string]string // stack key → value key → ciphertext
}

func newCipherCache() *cipherCache {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return &cipherCache{key: key, stacks: map[string]map[string]string{}}
}

// mac is the HMAC of parts, unambiguously joined.
func (c *cipherCache) mac(parts ...string) string {
	h := hmac.New(sha256.New, c.key)
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// stackKey identifies a stack's secrets manager as a run sees it.
func (c *cipherCache) stackKey(project, stack, provider string, env map[string]string) string {
	parts := []string{project, stack, provider}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		parts = append(parts, k+"="+env[k])
	}
	return c.mac(parts...)
}

func (c *cipherCache) valueKey(key, plaintext string) string { return c.mac(key, plaintext) }

func (c *cipherCache) get(stack, value string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ct, ok := c.stacks[stack][value]
	return ct, ok
}

func (c *cipherCache) put(stack, value, ciphertext string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.stacks[stack]
	if m == nil {
		if len(c.stacks) >= maxCachedStacks {
			c.stacks = map[string]map[string]string{}
		}
		m = map[string]string{}
		c.stacks[stack] = m
	}
	m[value] = ciphertext
}

func (c *cipherCache) forget(stack string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.stacks, stack)
}

// decryptFailure reports whether an operation's error says the stack's config could not
// be decrypted: what a cached ciphertext of another secrets manager causes.
func decryptFailure(err error) bool {
	if err == nil {
		return false
	}
	text := strings.ToLower(err.Error())
	return strings.Contains(text, "cipher:") || strings.Contains(text, "decrypt")
}
