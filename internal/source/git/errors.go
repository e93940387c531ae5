package git

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/skeema/knownhosts"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/fault"
)

// fault turns a transport failure into a retryable SourceUnavailable fault that says what
// to fix. Every such failure can clear without a spec change (a server coming back, a
// Secret corrected, a repository created), so none stalls the Stack. The message is built
// from our own words and go-git's error text with every credential value scrubbed; the
// original error is not wrapped, so nothing can print it later.
//
// The exception is a cap overrun: the repository holds as much on the next try, so the
// Stack stalls until its source or the cap changes.
func (rm *remote) fault(action string, err error) error {
	var over *capError
	if errors.As(err, &over) {
		return rm.capFault(action, over, false)
	}
	sensitive := append(append(rm.cred.sensitive(), rm.ep.Password), rm.recentTokens()...)
	return fault.Retry(pulumiv1.ReasonSourceUnavailable, "failed to %s %s: %s", action, rm.url, scrub(rm.explain(err), sensitive))
}

// capFault stalls on a cap overrun; suggestShallow adds that a shallow fetch may fit.
func (rm *remote) capFault(action string, over *capError, suggestShallow bool) error {
	fix := "the manager's operator can raise the cap"
	if suggestShallow {
		fix = "spec.shallow may fetch less (the commit without its history), or " + fix
	}
	return fault.Stall(pulumiv1.ReasonSourceUnavailable, "failed to %s %s: %s; %s", action, rm.url, over, fix)
}

func (rm *remote) explain(err error) string {
	var tokErr *tokenError
	switch {
	case errors.As(err, &tokErr):
		return fmt.Sprintf("no GitHub App installation token for the credentials from %s: %v", rm.cred.origin(), tokErr)
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod), strings.Contains(err.Error(), "unable to authenticate"):
		switch rm.cred.method {
		case authNone:
			return "the server requires credentials; set spec.gitAuth"
		case authGitHubApp:
			return fmt.Sprintf("the server refused the GitHub App installation token minted with the credentials from %s (is the app installed on this repository, with read access to its contents?)", rm.cred.origin())
		}
		return fmt.Sprintf("the server refused the credentials from %s", rm.cred.origin())
	case knownhosts.IsHostKeyChanged(err):
		return fmt.Sprintf("the server's host key does not match the %q key of %s (the server's key changed, or something intercepts the connection)", KnownHostsKey, rm.cred.origin())
	case knownhosts.IsHostUnknown(err):
		return fmt.Sprintf("the %q key of %s has no host key for %s", KnownHostsKey, rm.cred.origin(), rm.ep.Host)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		if rm.cred.method == authNone {
			return "repository not found (if it is private, set spec.gitAuth)"
		}
		return fmt.Sprintf("repository not found, or not visible with the credentials from %s", rm.cred.origin())
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return "the repository is empty"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	}
	return err.Error()
}

// scrub replaces every occurrence of a credential value in msg. Values shorter than four
// bytes are left alone: they would mangle ordinary words and are not worth hiding from a
// message that already names their Secret.
func scrub(msg string, values []string) string {
	for _, v := range values {
		if len(v) >= 4 {
			msg = strings.ReplaceAll(msg, v, "<redacted>")
		}
	}
	return msg
}
