package git

import (
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// RepoKey names a repository the way its URLs agree: host and path in lower case, without
// scheme, user, port, trailing slash or ".git" suffix. A push notification names the
// repository by its clone, SSH and web URLs while a Stack names it by one of them, so
// "https://github.com/o/r.git", "git@github.com:o/r" and "ssh://git@github.com:22/o/r/" share
// the key "github.com/o/r". It is "" for what is not a git URL. Keys of distinct repositories
// can collide only where a server tells repositories apart by case or port; the cost of a
// collision is one extra ref listing.
func RepoKey(raw string) string {
	ep, err := transport.NewEndpoint(strings.TrimSpace(raw))
	if err != nil || ep.Protocol == "file" {
		return ""
	}
	path := strings.TrimSuffix(strings.Trim(ep.Path, "/"), ".git")
	if ep.Host == "" || path == "" {
		return ""
	}
	return strings.ToLower(ep.Host + "/" + path)
}

// Poke makes every cached ref listing of the repository stale, whatever credentials it was
// listed with, so that the next resolve of a Stack on it lists the refs anew instead of
// waiting out its polling interval. A listing already under way when Poke is called does
// not count as fresh either (it may have been taken before the push). It reports how many
// cached remotes use the repository.
func (c *Cache) Poke(repoURL string) int {
	key := RepoKey(repoURL)
	if key == "" {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, rm := range c.remotes {
		if RepoKey(rm.url) != key {
			continue
		}
		rm.mu.Lock()
		rm.pokes++
		rm.mu.Unlock()
		n++
	}
	return n
}
