package gitea

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// hookReceiver records the webhook deliveries it is sent.
type hookReceiver struct {
	secret string
	mu     sync.Mutex
	// got holds "<X-Gitea-Event> <action>" of each delivery, or why it was refused.
	got []string
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	mac := hmac.New(sha256.New, []byte(h.secret))
	mac.Write(body)
	var payload struct {
		Action string `json:"action"`
	}
	got := ""
	switch {
	case !hmac.Equal([]byte(r.Header.Get("X-Gitea-Signature")), []byte(hex.EncodeToString(mac.Sum(nil)))):
		got = "bad signature"
	case json.Unmarshal(body, &payload) != nil:
		got = "not JSON"
	default:
		got = r.Header.Get("X-Gitea-Event") + " " + payload.Action
	}
	h.mu.Lock()
	h.got = append(h.got, got)
	h.mu.Unlock()
}

func (h *hookReceiver) deliveries() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// A test's Gitea serves the API (repositories, branches, pull requests, comments, commit
// statuses, webhooks) and git's smart HTTP (a new branch from main, then a commit on it,
// each fetched and pushed), and delivers signed webhooks to 127.0.0.1.
func TestGitea_Start_ServesAPIAndGit(t *testing.T) {
	g := NewWithT(t)
	s := Start(t)
	hooks := &hookReceiver{secret: "webhook-secret"}
	receiver := httptest.NewServer(hooks)
	t.Cleanup(receiver.Close)

	r := s.CreateRepo("programs")
	main := r.BranchHead("main")
	if main == "" {
		t.Fatal("the new repository has no main branch")
	}
	if id := r.AddWebhook(receiver.URL, hooks.secret, "pull_request"); id == 0 {
		t.Fatal("AddWebhook returned no ID")
	}

	first := r.Push("feature", "main", map[string]string{"Pulumi.yaml": "name: programs\nruntime: yaml\n"})
	second := r.Push("feature", "", map[string]string{"README.md": ""})
	if got := r.BranchHead("feature"); got != second {
		t.Errorf("feature's head = %s; want the second push's %s", got, second)
	}
	var commit struct {
		Parents []struct {
			SHA string `json:"sha"`
		} `json:"parents"`
	}
	s.API(http.MethodGet, "/repos/"+r.Owner+"/"+r.Name+"/git/commits/"+second, nil, &commit)
	if len(commit.Parents) != 1 || commit.Parents[0].SHA != first {
		t.Errorf("the second push's parents = %+v; want the first push's %s", commit.Parents, first)
	}
	// Anyone may fetch: the URL without credentials lists both branches.
	ls := newGit(t).run("ls-remote", "--heads", r.CloneURL)
	for _, want := range []string{main + "\trefs/heads/main", second + "\trefs/heads/feature"} {
		if !strings.Contains(ls, want) {
			t.Errorf("git ls-remote %s =\n%s\nwant a line %q", r.CloneURL, ls, want)
		}
	}

	pr := r.OpenPullRequest("feature", "main", "Add the program", "Preview it, please.")
	if pr.Number == 0 || pr.State != "open" || pr.Head.SHA != second || pr.Base.Ref != "main" {
		t.Errorf("OpenPullRequest() = %+v; want an open pull request of %s into main", pr, second)
	}
	r.Comment(pr.Number, "/preview")
	comments := r.Comments(pr.Number)
	if len(comments) != 1 || comments[0].Body != "/preview" || comments[0].User.Login != AdminUser {
		t.Errorf("Comments() = %+v; want the one comment /preview by %s", comments, AdminUser)
	}

	r.SetCommitStatus(second, CommitStatus{State: "pending", Context: "stackwright/preview", Description: "previewing"})
	r.SetCommitStatus(second, CommitStatus{State: "success", Context: "stackwright/preview", Description: "2 to create", TargetURL: "http://127.0.0.1/preview"})
	want := []CommitStatus{
		{State: "success", Context: "stackwright/preview", Description: "2 to create", TargetURL: "http://127.0.0.1/preview"},
		{State: "pending", Context: "stackwright/preview", Description: "previewing"},
	}
	if got := r.CommitStatuses(second); !slices.Equal(got, want) {
		t.Errorf("CommitStatuses() = %+v; want %+v", got, want)
	}

	r.ClosePullRequest(pr.Number)
	if got := r.PullRequest(pr.Number); got.State != "closed" || got.Merged {
		t.Errorf("PullRequest() after ClosePullRequest = %+v; want it closed, not merged", got)
	}
	// A comment on a pull request is an issue_comment event.
	g.Eventually(hooks.deliveries).WithTimeout(30*time.Second).Should(
		ContainElements("pull_request opened", "issue_comment created", "pull_request closed"),
		"the webhook's deliveries; Gitea's log: %s", s.Log)
	for _, d := range hooks.deliveries() {
		if d == "bad signature" || d == "not JSON" {
			t.Errorf("a delivery was refused: %s", d)
		}
	}
}
