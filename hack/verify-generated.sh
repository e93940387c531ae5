#!/usr/bin/env bash
# Regenerates deepcopy code, CRDs and RBAC, their copies in the Helm chart and
# deploy/install.yaml in a scratch copy of the checkout, and fails if any differs from the
# checkout's, so a stale CRD (the thing admission actually validates against) or install
# manifest can never land.
#
# It writes nothing in the checkout: CI runs the end-to-end tests, which install from the
# chart and config/, beside it, and `go test` keeps reusing results of tests that read
# those files (hack/restore-mtimes.sh). It compares with the working tree, not with git,
# so it works in a dirty tree too.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

generated() { (cd "$1" && find api config/crd/bases config/rbac charts/stackwright/crds charts/stackwright/files deploy -type f \( -name 'zz_generated*.go' -o -name '*.yaml' -o -name '*.json' \) -print0 2>/dev/null | sort -z | xargs -0 -r sha256sum); }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# The working tree's files (tracked and new, as they are now); the tools in ./bin are
# shared, so nothing is built again.
git ls-files -z --cached --others --exclude-standard |
	tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$scratch"
ln -s "$root/bin" "$scratch/bin"
make -C "$scratch" --no-print-directory -s generate manifests >/dev/null

want=$(generated "$scratch")
have=$(generated "$root")
if [ "$have" != "$want" ]; then
	echo "verify-generated: these generated files are stale:" >&2
	diff <(echo "$have") <(echo "$want") | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
	echo "verify-generated: run \`make generate manifests\`, review and commit them." >&2
	exit 1
fi
echo "verify-generated: deepcopy, CRDs, RBAC, chart copies and deploy/install.yaml are up to date"
