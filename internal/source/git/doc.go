// Package git resolves Stacks whose source is a git repository (spec.projectRepo) into
// artifacts, with go-git and without a git binary.
//
// It owns:
//   - reading git credentials (gitAuth and the deprecated gitAuthSecret) from Secrets in the
//     Stack's namespace, with PKO's key names and precedence, and SSH host key checking
//     against a known_hosts key;
//   - the on-disk fetch cache shared by every Stack: one bare repository per repository
//     URL and credentials (and per shallow or full history), ref listings shared and
//     memoised for the polling interval, one fetch per new commit;
//   - bounding what Stack authors, who may be hostile to each other, can make that cache
//     download and keep: bytes per fetch and per ref listing (on every transport: the
//     wire of SSH and git:// sessions is counted too), and cache disk per namespace
//     (CacheLimits);
//   - turning the tree of a commit into a deterministic tarball in the artifact store,
//     once per commit, within the manager's size and file-count limits.
//
// The Stack controller decides when to resolve; this package decides how much network
// that costs.
package git
