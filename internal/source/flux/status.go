package flux

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
)

// published is what a Flux source's status.artifact promises.
type published struct {
	url      string
	revision string
	// digest is "<algorithm>:<hex>" as declared, with a bare v1beta2 checksum turned into a
	// sha256 digest.
	digest string
	// size is the declared size in bytes, or -1 when status.artifact.size is absent (it is
	// optional, and older source-controllers never set it).
	size int64
}

// digestHexLen are the digest algorithms we can verify, with the length of their hex form.
// source-controller's --artifact-digest-algo also offers blake3, which the standard library
// lacks; such digests are refused rather than trusted unverified.
var digestHexLen = map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}

// readArtifact returns the artifact obj publishes, or a fault saying why a Stack cannot use
// it (yet). It asks what kstatus asks of any object before trusting its status: the status
// describes the current generation, Ready is True. Otherwise a Stack could deploy the
// artifact of a branch its GitRepository was just moved away from.
//
// A source whose Ready is False is reported as such first, whatever generation its status
// observed: source-controller leaves status.observedGeneration behind while a new spec
// keeps failing, and its Ready condition is what tells the Stack's author why.
func readArtifact(obj *unstructured.Unstructured) (published, error) {
	what := fmt.Sprintf("%s %q", obj.GetKind(), obj.GetName())
	status, reason, msg, hasReady := readyCondition(obj)
	if hasReady && status != "True" {
		return published{}, fault.Retry(pulumiv1.ReasonSourceUnavailable, "%s is not ready (%s): %s", what, reason, msg)
	}
	observed, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if found && observed != obj.GetGeneration() {
		return published{}, fault.Retry(pulumiv1.ReasonSourceUnavailable,
			"%s has not reconciled its latest spec yet (generation %d, observed %d)", what, obj.GetGeneration(), observed)
	}
	if !hasReady {
		return published{}, fault.Retry(pulumiv1.ReasonSourceUnavailable, "%s is not ready: it has no Ready condition yet", what)
	}
	a, found, _ := unstructured.NestedMap(obj.Object, "status", "artifact")
	if !found {
		return published{}, fault.Retry(pulumiv1.ReasonSourceUnavailable, "%s has no artifact yet", what)
	}
	str := func(field string) string {
		s, _ := a[field].(string)
		return s
	}
	p := published{url: str("url"), revision: str("revision"), size: -1}
	if p.url == "" {
		return published{}, fault.Retry(pulumiv1.ReasonSourceUnavailable, "%s publishes an artifact without a url", what)
	}
	if n, ok := a["size"].(int64); ok && n >= 0 {
		p.size = n
	}
	d, err := declaredDigest(str("digest"), str("checksum"))
	if err != nil {
		return published{}, fault.Stall(pulumiv1.ReasonSourceUnavailable, "%s: %v", what, err)
	}
	if d == "" {
		// Every source-controller that serves v1beta2 or v1 sets one of them, so this is a
		// status written by something else, perhaps still being filled in.
		return published{}, fault.Retry(pulumiv1.ReasonSourceUnavailable,
			"%s publishes an artifact without digest or checksum, which cannot be verified", what)
	}
	p.digest = d
	return p, nil
}

// readyCondition returns the status, reason and message of obj's Ready condition, and
// whether it has one.
func readyCondition(obj *unstructured.Unstructured) (status, reason, msg string, found bool) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		status, _ = m["status"].(string)
		reason, _ = m["reason"].(string)
		msg, _ = m["message"].(string)
		return status, reason, msg, true
	}
	return "", "", "", false
}

// declaredDigest normalises what status.artifact declares. digest ("sha256:<hex>") is what
// v1 and later v1beta2 source-controllers write; the first v1beta2 releases wrote only
// checksum, the bare sha256 hex of the same tarball. A 40-digit checksum is a SHA-1 from
// v1beta1 days, which is too weak to verify a download against.
func declaredDigest(digest, checksum string) (string, error) {
	if digest != "" {
		algo, hexPart, ok := strings.Cut(digest, ":")
		want, known := digestHexLen[algo]
		if !ok || !known {
			return "", fmt.Errorf("status.artifact.digest %q uses an algorithm Stackwright cannot verify; run source-controller with --artifact-digest-algo=sha256", digest)
		}
		if len(hexPart) != want || !isLowerHex(hexPart) {
			return "", fmt.Errorf("status.artifact.digest %q is malformed", digest)
		}
		return digest, nil
	}
	if checksum == "" {
		return "", nil
	}
	if len(checksum) != digestHexLen["sha256"] || !isLowerHex(checksum) {
		return "", fmt.Errorf("status.artifact.checksum %q is not a sha256 checksum", checksum)
	}
	return "sha256:" + checksum, nil
}

func isLowerHex(s string) bool {
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
