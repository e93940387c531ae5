package forge

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// hub speaks GitHub's REST API, and Gitea's, which follows it for everything used here
// (pulls, issue comments, commit statuses); they differ in authentication, in the name of
// the page size parameter, and in the listing of an issue's comments, which Gitea does not
// page.
type hub struct {
	*api
	// repo is the repository's path: /repos/<owner>/<name>.
	repo      string
	pageParam string
	// pagedComments is false when the forge answers all of an issue's comments at once,
	// whatever page is asked (Gitea): asking for page after page would read them again.
	pagedComments bool
	// fullName is owner/name, to tell a fork's head from the repository's own.
	fullName string
	// login is the token's user, once asked.
	login string
}

type hubPull struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	User   *struct {
		Login string `json:"login"`
	} `json:"user"`
	Labels []struct {
		Name string `json:"name"`
	} `json:"labels"`
	Head hubBranch `json:"head"`
	Base hubBranch `json:"base"`
}

type hubBranch struct {
	Label string `json:"label"`
	Ref   string `json:"ref"`
	SHA   string `json:"sha"`
	Repo  *struct {
		FullName string `json:"full_name"`
	} `json:"repo"`
}

type hubComment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User *struct {
		Login string `json:"login"`
	} `json:"user"`
}

func (h *hub) query(page int) string {
	return "?" + h.pageParam + "=" + strconv.Itoa(pageSize) + "&page=" + strconv.Itoa(page)
}

func (h *hub) PullRequests(ctx context.Context) ([]PullRequest, error) {
	var out []PullRequest
	err := pages(func(page int) (int, error) {
		var ps []hubPull
		if _, err := h.do(ctx, http.MethodGet, h.repo+"/pulls"+h.query(page)+"&state=open", nil, &ps); err != nil {
			return 0, err
		}
		for _, p := range ps {
			branch := p.Head.Ref
			if strings.HasPrefix(branch, "refs/pull/") && p.Head.Label != "" {
				// Gitea's name of a head whose repository or branch is gone: the base's
				// ref of it. Its label is the branch (GitHub's is owner:branch, but
				// GitHub's ref is always the branch).
				branch = p.Head.Label
			}
			pr := PullRequest{
				Number: p.Number, Title: p.Title, BaseBranch: p.Base.Ref,
				HeadBranch: branch, HeadSHA: p.Head.SHA, HeadRef: fmt.Sprintf("refs/pull/%d/head", p.Number),
				// A head whose repository is gone (a deleted fork) is a fork's.
				Fork: p.Head.Repo == nil || !strings.EqualFold(p.Head.Repo.FullName, h.fullName),
			}
			if p.User != nil {
				pr.Author = p.User.Login
			}
			for _, l := range p.Labels {
				pr.Labels = append(pr.Labels, l.Name)
			}
			out = append(out, pr)
		}
		return len(ps), nil
	})
	return out, err
}

func (h *hub) whoami(ctx context.Context) (string, error) {
	if h.login != "" {
		return h.login, nil
	}
	var u struct {
		Login string `json:"login"`
	}
	if _, err := h.do(ctx, http.MethodGet, "/user", nil, &u); err != nil {
		return "", err
	}
	if u.Login == "" {
		return "", fmt.Errorf("GET /user: the token's user has no login")
	}
	h.login = u.Login
	return u.Login, nil
}

func (h *hub) UpsertComment(ctx context.Context, number int, marker, body string) error {
	me, err := h.whoami(ctx)
	if err != nil {
		return err
	}
	var mine ids
	list := fmt.Sprintf("%s/issues/%d/comments", h.repo, number)
	read := func(query string) (int, error) {
		var cs []hubComment
		if _, err := h.do(ctx, http.MethodGet, list+query, nil, &cs); err != nil {
			return 0, err
		}
		for _, c := range cs {
			// Only the token's own comments count: anyone may write the marker.
			if c.User != nil && c.User.Login == me && strings.Contains(c.Body, marker) {
				mine.add(c.ID)
			}
		}
		return len(cs), nil
	}
	if h.pagedComments {
		err = pages(func(page int) (int, error) { return read(h.query(page)) })
	} else {
		_, err = read("")
	}
	if err != nil {
		return err
	}
	msg := map[string]string{"body": clip(body)}
	if len(mine.list) == 0 {
		_, err := h.do(ctx, http.MethodPost, list, msg, nil)
		return err
	}
	if _, err := h.do(ctx, http.MethodPatch, fmt.Sprintf("%s/issues/comments/%d", h.repo, mine.list[0]), msg, nil); err != nil {
		return err
	}
	for _, id := range mine.list[1:] {
		if _, err := h.do(ctx, http.MethodDelete, fmt.Sprintf("%s/issues/comments/%d", h.repo, id), nil, nil); err != nil {
			return err
		}
	}
	return nil
}

func (h *hub) SetStatus(ctx context.Context, sha string, s Status) error {
	if !isSHA(sha) {
		return fmt.Errorf("%q is not a commit SHA", sha)
	}
	_, err := h.do(ctx, http.MethodPost, h.repo+"/statuses/"+sha, map[string]string{
		"state": string(s.State), "context": s.Context, "description": clipDescription(s.Description), "target_url": s.TargetURL,
	}, nil)
	return err
}

func isSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
