#!/usr/bin/env bash
# Regenerates deepcopy code and CRDs and fails if that changed anything, so a stale CRD
# (the thing admission actually validates against) can never land. Works in a dirty tree
# too: it compares the generated files before and after, not against git.
set -euo pipefail
cd "$(dirname "$0")/.."

generated() { find api config/crd/bases config/rbac -type f \( -name 'zz_generated*.go' -o -name '*.yaml' \) -print0 2>/dev/null | sort -z | xargs -0 -r sha256sum; }

before=$(generated)
make --no-print-directory -s generate manifests >/dev/null
after=$(generated)
if [ "$before" != "$after" ]; then
	echo "verify-generated: generated files were stale and have been regenerated:" >&2
	diff <(echo "$before") <(echo "$after") | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
	echo "verify-generated: review and commit them." >&2
	exit 1
fi
echo "verify-generated: deepcopy and CRDs are up to date"
