package gitwebhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/stackwright/stackwright/internal/source/git"
)

// push is what a notification says changed.
type push struct {
	// repos are the keys (git.RepoKey) of the URLs naming the repository; none means
	// every repository.
	repos []string
	// branch is the short name of the branch pushed; "" means every branch.
	branch string
	// ref is the ref as the notification names it, for the log.
	ref string
	// pullRequests is, for a pull request's notification instead of a push, the
	// repository whose pull requests changed, as forges name it (owner/name; GitLab's
	// full path): the StackSets whose pullRequests generator follows it list them again.
	pullRequests string
}

// hook is one request's kind of notification: how it proves it knows the token and how
// its body reads.
type hook struct {
	kind  string
	event string
	// proof is the signature or token the request carries; "" when it carries none.
	proof  string
	verify func(proof string, body, token []byte) bool
	// parse returns the push the body reports, nil when it reports none that a Stack
	// could track (other events, tags, deleted branches).
	parse func(event, contentType string, body []byte) (*push, error)
}

// hookOf tells the kinds apart by their event headers: GitHub and GitLab always send
// theirs, and a generic caller sends neither.
func hookOf(h http.Header) hook {
	switch {
	case h.Get("X-GitHub-Event") != "":
		return hook{kind: "github", event: h.Get("X-GitHub-Event"), proof: h.Get("X-Hub-Signature-256"), verify: validHMAC, parse: parseGitHub}
	case h.Get("X-Gitlab-Event") != "":
		return hook{kind: "gitlab", event: h.Get("X-Gitlab-Event"), proof: h.Get("X-Gitlab-Token"), verify: validToken, parse: parseGitLab}
	default:
		// The header and format of Flux's generic-hmac Receiver. Only sha256: Flux also
		// takes sha1, which a new endpoint has no reason to accept.
		return hook{kind: "generic", proof: h.Get("X-Signature"), verify: validHMAC, parse: parseGeneric}
	}
}

// validHMAC checks a "sha256=<hex>" HMAC-SHA256 of the body keyed with the token.
func validHMAC(proof string, body, token []byte) bool {
	sig, ok := strings.CutPrefix(proof, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, token)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// validToken checks a token sent as is (GitLab). Comparing digests keeps the time taken
// from telling the token's length, which ConstantTimeCompare alone would.
func validToken(proof string, _, token []byte) bool {
	got, want := sha256.Sum256([]byte(proof)), sha256.Sum256(token)
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// parseGitHub reads GitHub's push and pull_request events, and Gitea's, which it sends
// with GitHub's headers and shapes.
func parseGitHub(event, contentType string, body []byte) (*push, error) {
	if event != "push" && event != "pull_request" {
		return nil, nil
	}
	// GitHub's default content type for a new webhook is a form whose payload field holds
	// the JSON; the signature covers the form as sent.
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, fmt.Errorf("failed to parse form payload: %w", err)
		}
		body = []byte(form.Get("payload"))
	}
	if event == "pull_request" {
		var p struct {
			Repository struct {
				FullName string `json:"full_name"`
			} `json:"repository"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, fmt.Errorf("failed to parse pull request payload: %w", err)
		}
		return pullRequests(p.Repository.FullName)
	}
	var p struct {
		Ref        string `json:"ref"`
		Deleted    bool   `json:"deleted"`
		Repository struct {
			CloneURL string `json:"clone_url"`
			SSHURL   string `json:"ssh_url"`
			GitURL   string `json:"git_url"`
			HTMLURL  string `json:"html_url"`
			URL      string `json:"url"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("failed to parse push payload: %w", err)
	}
	if p.Deleted {
		return nil, nil
	}
	r := p.Repository
	return hostPush(p.Ref, r.CloneURL, r.SSHURL, r.GitURL, r.HTMLURL, r.URL)
}

func parseGitLab(event, _ string, body []byte) (*push, error) {
	if event == "Merge Request Hook" {
		var p struct {
			Project struct {
				PathWithNamespace string `json:"path_with_namespace"`
			} `json:"project"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, fmt.Errorf("failed to parse merge request payload: %w", err)
		}
		return pullRequests(p.Project.PathWithNamespace)
	}
	if event != "Push Hook" {
		return nil, nil
	}
	var p struct {
		Ref     string `json:"ref"`
		After   string `json:"after"`
		Project struct {
			GitHTTPURL string `json:"git_http_url"`
			GitSSHURL  string `json:"git_ssh_url"`
			WebURL     string `json:"web_url"`
		} `json:"project"`
		Repository struct {
			GitHTTPURL string `json:"git_http_url"`
			GitSSHURL  string `json:"git_ssh_url"`
			Homepage   string `json:"homepage"`
			URL        string `json:"url"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("failed to parse push payload: %w", err)
	}
	// GitLab reports a deleted branch as a push whose new commit is all zeros.
	if p.After != "" && strings.Trim(p.After, "0") == "" {
		return nil, nil
	}
	pr, r := p.Project, p.Repository
	return hostPush(p.Ref, pr.GitHTTPURL, pr.GitSSHURL, pr.WebURL, r.GitHTTPURL, r.GitSSHURL, r.Homepage, r.URL)
}

// parseGeneric reads {"repository": "<git URL>", "ref": "<branch>"}; both are optional, and
// so is the body, so that a bare signed POST means "look at every branch you track".
func parseGeneric(_, _ string, body []byte) (*push, error) {
	var p struct {
		Repository string `json:"repository"`
		Ref        string `json:"ref"`
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, fmt.Errorf("failed to parse payload: %w", err)
		}
	}
	branch, ok := branchOf(p.Ref)
	if !ok {
		return nil, nil
	}
	out := &push{branch: branch, ref: p.Ref}
	if p.Repository != "" {
		if out.repos = repoKeys(p.Repository); len(out.repos) == 0 {
			return nil, fmt.Errorf("repository %q is not a git URL", p.Repository)
		}
	}
	return out, nil
}

// pullRequests is a forge's notification that the pull requests of repository changed.
func pullRequests(repository string) (*push, error) {
	if repository == "" || !strings.Contains(repository, "/") {
		return nil, errors.New("pull request payload names no repository")
	}
	return &push{pullRequests: repository, ref: "pull requests of " + repository}, nil
}

// hostPush is a git host's push: unlike a generic one it always names its ref and
// repository.
func hostPush(ref string, urls ...string) (*push, error) {
	if ref == "" {
		return nil, errors.New("push payload names no ref")
	}
	branch, ok := branchOf(ref)
	if !ok {
		return nil, nil
	}
	keys := repoKeys(urls...)
	if len(keys) == 0 {
		return nil, errors.New("push payload names no git repository")
	}
	return &push{repos: keys, branch: branch, ref: ref}, nil
}

// branchOf returns the short name of a branch ref, or of a short name, and false for
// other refs (tags, notes, merge requests): no Stack tracks those.
func branchOf(ref string) (string, bool) {
	if b, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		return b, b != ""
	}
	return ref, !strings.HasPrefix(ref, "refs/")
}

// repoKeys returns the distinct keys of the URLs that are git URLs.
func repoKeys(urls ...string) []string {
	var keys []string
	for _, u := range urls {
		if k := git.RepoKey(u); k != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}
