#!/usr/bin/env bash
# Regenerates deepcopy code, CRDs and RBAC, their copies in the Helm chart and
# deploy/install.yaml, and fails if that changed anything, so a stale CRD (the thing
# admission actually validates against) or install manifest can never land. Works in a
# dirty tree too: it compares the generated files before and after, not against git.
set -euo pipefail
cd "$(dirname "$0")/.."

generated() { find api config/crd/bases config/rbac charts/stackwright/crds charts/stackwright/files deploy -type f \( -name 'zz_generated*.go' -o -name '*.yaml' -o -name '*.json' \) -print0 2>/dev/null | sort -z | xargs -0 -r sha256sum; }

before=$(generated)
make --no-print-directory -s generate manifests >/dev/null
after=$(generated)
if [ "$before" != "$after" ]; then
	echo "verify-generated: generated files were stale and have been regenerated:" >&2
	diff <(echo "$before") <(echo "$after") | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
	echo "verify-generated: review and commit them." >&2
	exit 1
fi
echo "verify-generated: deepcopy, CRDs, RBAC, chart copies and deploy/install.yaml are up to date"
