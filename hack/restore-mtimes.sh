#!/usr/bin/env bash
# Sets every tracked file that is unchanged from HEAD to the time of the last commit that
# changed it, and every tracked directory to one fixed time.
#
# Why: `go test` reuses a package's cached result only while the files its tests opened
# keep their size and modification time. A fresh clone (CI makes one per run) gives every
# file the clone's time, so no result of a test that reads a CRD, a sample or testdata
# could ever be reused. With the commit's time instead, a result is reused exactly when
# those files did not change. Files changed in the working tree keep their own times. A
# directory's listing is part of what `go test` records, so one fixed time for all
# directories loses nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

changed=$(git ls-files --modified --deleted --others --exclude-standard)
# Newest first: the first time a path appears is its last change.
git log --format='@%ct' --name-only --no-renames HEAD |
	awk -v changed="$changed" '
		BEGIN { n = split(changed, c, "\n"); for (i = 1; i <= n; i++) skip[c[i]] = 1 }
		/^@/ { t = $0; next }
		NF && !($0 in seen) { seen[$0] = 1; if (!($0 in skip)) print t "\t" $0 }' |
	sort -t$'\t' -k1,1 |
	{
		batch=() at=""
		while IFS=$'\t' read -r t path; do
			if [ "$t" != "$at" ] && [ ${#batch[@]} -gt 0 ]; then
				touch -c -m -d "$at" -- "${batch[@]}"
				batch=()
			fi
			at=$t
			[ -e "$path" ] && batch+=("$path")
		done
		[ ${#batch[@]} -eq 0 ] || touch -c -m -d "$at" -- "${batch[@]}"
	}
git ls-files | awk -F/ '{ d = "."; for (i = 1; i < NF; i++) { d = d "/" $i; print d } } END { print "." }' |
	sort -u | xargs -r touch -c -m -d @946684800 --
