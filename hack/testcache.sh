#!/usr/bin/env bash
# Clears go test's cached results when a tool the tests run (./bin) changed since they
# were cached.
#
# Why: go test reuses a package's result while its test binary and the files and
# environment variables its tests read are the same. The suites check for pulumi, its
# language host, the test provider, kube-apiserver and etcd in TestMain, before
# testing.M.Run starts the log go test learns those reads from, and run them as child
# processes, which it never sees; so a new pulumi or kube-apiserver alone would leave the
# results of the old one in place, on CI too, whose Go cache outlives its clean clones.
# The tools' stamps (hack/tools.sh) name each build exactly; their sum is kept beside the
# results, in the Go cache.
set -euo pipefail
cd "$(dirname "$0")/.."

cache=$(go env GOCACHE)
if [ -z "$cache" ] || [ "$cache" = off ] || [ ! -d bin/.stamps ]; then
	exit 0
fi
sum=$(find bin/.stamps -maxdepth 1 -type f | LC_ALL=C sort | while read -r f; do
	echo "${f##*/} $(cat "$f")"
done | sha256sum | cut -d' ' -f1)
marker="$cache/stackwright-tools.sum"
if [ "$(cat "$marker" 2>/dev/null)" != "$sum" ]; then
	echo "testcache: the tools in ./bin changed since the cached test results; clearing them (go clean -testcache)"
	go clean -testcache
	echo "$sum" >"$marker"
fi
