package artifact

import (
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
)

const digestPrefix = "sha256:"

var (
	// ErrInvalidDigest: the string is not "sha256:" followed by 64 lowercase hex digits.
	ErrInvalidDigest = errors.New("invalid digest")
	// ErrDigestMismatch: the content does not hash to the digest it was expected to have.
	ErrDigestMismatch = errors.New("digest mismatch")
)

// ValidateDigest checks that d is "sha256:<64 lowercase hex digits>". Digests become file
// names, so anything else (uppercase, separators, "..") is refused rather than normalised.
func ValidateDigest(d string) error {
	_, err := digestHex(d)
	return err
}

func digestHex(d string) (string, error) {
	h, ok := strings.CutPrefix(d, digestPrefix)
	if !ok || len(h) != 64 {
		return "", fmt.Errorf("%w: %q", ErrInvalidDigest, d)
	}
	for _, c := range []byte(h) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", fmt.Errorf("%w: %q", ErrInvalidDigest, d)
		}
	}
	return h, nil
}

func digestOf(h hash.Hash) string {
	return digestPrefix + hex.EncodeToString(h.Sum(nil))
}
