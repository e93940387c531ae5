#!/usr/bin/env bash
# Builds the pinned toolchain into ./bin from the Go module proxy.
#
# Each tool is built from a throwaway module (hack/tools/<tool>, or test/provider for our
# own test provider) so that none of their dependencies leak into the main module. A tool
# is rebuilt only when its stamp changes: the stamp hashes the module's go.mod, go.sum and
# sources, the link flags and the Go version, so a run with nothing to do costs a few
# hashes and no `go` invocation beyond `go env`.
#
# Every tool is linked statically (CGO_ENABLED=0): the same binaries go into the container
# images (make images), which have no libc.
#
# Usage: hack/tools.sh [tool...]   (default: all tools; "cluster" adds the node's tools)
#
# TOOLS_GOARCH=<arch> cross-compiles the named tools for linux/<arch> into bin/linux-<arch>
# instead (make release builds the engine that way for every platform of the images). For
# the machine's own platform the tools in ./bin are copied: the tools that go into images
# are always built with -trimpath, so they are the same binaries.
set -euo pipefail
export CGO_ENABLED=0
# A tool is built with exactly the flags its stamp names (the Makefile's GOFLAGS are for
# the module's own builds).
unset GOFLAGS

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
stamps="$bin/.stamps"
# The tools the runner image carries: no build paths in them, whichever platform.
image_tools=" pulumi pulumi-yaml unlock pulumi-kubernetes "
# Go's build cache shares a compiled package between two builds only when the flags and
# every dependency's version match. The modules of repo.AlignedModules (the repository's,
# and those of the Kubernetes binaries, the pulumi CLI, its YAML language host, the test
# provider and stackwright-unlock) require one version of every module they share
# (hack/align-modules) and are built with the same flags (the module's builds are
# -trimpath), so a cold run compiles client-go, gRPC, OpenTelemetry, the Pulumi SDK and
# the cloud SDKs once.
trimmed_tools="$image_tools provider k8s k8s-node "
copy_to=""
if [ -n "${TOOLS_GOARCH:-}" ]; then
	if [ "$(go env GOHOSTOS)/$(go env GOHOSTARCH)" = "linux/$TOOLS_GOARCH" ]; then
		copy_to="$root/bin/linux-$TOOLS_GOARCH"
		mkdir -p "$copy_to"
		unset TOOLS_GOARCH
	else
		export GOOS=linux GOARCH=$TOOLS_GOARCH
		bin="$root/bin/linux-$TOOLS_GOARCH"
		stamps="$root/bin/.stamps/linux-$TOOLS_GOARCH"
	fi
fi
mkdir -p "$stamps"
# Built tools are also kept outside the checkout, under their stamp: a fresh clone (as CI
# makes for every run) takes them from there instead of linking them again. The stamp
# names everything the build reads, so an entry is the build's output for those inputs.
# TOOLS_CACHE= (empty) turns it off.
cache=${TOOLS_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/stackwright/tools}

k8s_version=v1.37.1
# The Kubernetes provider is built from a commit of its module, not a tag: v4.25.0 needs a
# newer Pulumi SDK than its provider compiles with. This is the version its own release
# tooling gives such a commit (pulumictl: the next minor, alpha, the commit's time, its
# hash), the one the plugin reports to the engine.
k8s_provider_version=4.25.0-alpha.1768448096+f47bc2d6

modversion() { # modversion <go.mod> <module path>
	awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1"
}

k8s_ldflags() {
	local flags="" pkg
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=37"
		flags+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit=0000000000000000000000000000000000000000"
		flags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	echo "$flags"
}

# tool_spec <tool> prints: module dir | packages | binaries | ldflags | build tags
tool_spec() {
	case "$1" in
	k8s)
		# The controller manager is here, not with the node's tools, because `make demo`
		# runs its garbage collector: the Kubernetes provider deletes in the foreground.
		echo "hack/tools/k8s|k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl ./cmd/etcd k8s.io/kubernetes/cmd/kube-controller-manager|kube-apiserver kubectl etcd kube-controller-manager|$(k8s_ldflags)|"
		;;
	k8s-node)
		echo "hack/tools/k8s|k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler|kubelet kube-proxy kube-scheduler|$(k8s_ldflags)|"
		;;
	containerd)
		local v
		v=$(modversion "$root/hack/tools/containerd/go.mod" github.com/containerd/containerd/v2)
		echo "hack/tools/containerd|github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr|containerd containerd-shim-runc-v2 ctr|-X github.com/containerd/containerd/v2/version.Version=$v|no_btrfs"
		;;
	helm)
		local v
		v=$(modversion "$root/hack/tools/helm/go.mod" helm.sh/helm/v3)
		echo "hack/tools/helm|helm.sh/helm/v3/cmd/helm|helm|-X helm.sh/helm/v3/internal/version.version=$v|"
		;;
	pulumi)
		local v
		v=$(modversion "$root/hack/tools/pulumi/go.mod" github.com/pulumi/pulumi/pkg/v3)
		echo "hack/tools/pulumi|github.com/pulumi/pulumi/pkg/v3/cmd/pulumi|pulumi|-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$v"
		;;
	pulumi-yaml)
		local v
		v=$(modversion "$root/hack/tools/pulumi-yaml/go.mod" github.com/pulumi/pulumi-yaml)
		echo "hack/tools/pulumi-yaml|github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml|pulumi-language-yaml|-X github.com/pulumi/pulumi-yaml/pkg/version.Version=$v"
		;;
	pulumi-kubernetes)
		echo "hack/tools/pulumi-kubernetes|./cmd/pulumi-resource-kubernetes|pulumi-resource-kubernetes|-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$k8s_provider_version|"
		;;
	controller-gen)
		echo "hack/tools/controller-gen|sigs.k8s.io/controller-tools/cmd/controller-gen|controller-gen|"
		;;
	golangci-lint)
		echo "hack/tools/golangci-lint|github.com/golangci/golangci-lint/v2/cmd/golangci-lint|golangci-lint|"
		;;
	promtool)
		# The tests only check and unit-test rule files: remove_all_sd leaves out the
		# cloud service discoveries (AWS, Azure, GCE and a dozen more SDKs), more than half
		# of a cold build's CPU time. Kubernetes' discovery stays: promtool imports it.
		local v
		v=$(modversion "$root/hack/tools/promtool/go.mod" github.com/prometheus/prometheus)
		echo "hack/tools/promtool|github.com/prometheus/prometheus/cmd/promtool|promtool|-X github.com/prometheus/common/version.Version=$v|remove_all_sd"
		;;
	prometheus)
		# The end-to-end tests run it on the node, scraping a static target: no service
		# discovery of a cloud is needed (remove_all_sd, as for promtool).
		local v
		v=$(modversion "$root/hack/tools/prometheus/go.mod" github.com/prometheus/prometheus)
		echo "hack/tools/prometheus|github.com/prometheus/prometheus/cmd/prometheus|prometheus|-X github.com/prometheus/common/version.Version=$v|remove_all_sd"
		;;
	krew)
		local v
		v=$(modversion "$root/hack/tools/krew/go.mod" sigs.k8s.io/krew)
		echo "hack/tools/krew|sigs.k8s.io/krew/cmd/krew|krew|-X sigs.k8s.io/krew/internal/version.gitTag=$v|"
		;;
	versitygw)
		local v
		v=$(modversion "$root/hack/tools/versitygw/go.mod" github.com/versity/versitygw)
		echo "hack/tools/versitygw|github.com/versity/versitygw/cmd/versitygw|versitygw|-X main.Version=$v|"
		;;
	source-controller)
		echo "hack/tools/source-controller|github.com/fluxcd/source-controller|source-controller||"
		;;
	notification-controller)
		echo "hack/tools/notification-controller|github.com/fluxcd/notification-controller|notification-controller||"
		;;
	provider)
		echo "test/provider|./cmd/pulumi-resource-stackwright-testing|pulumi-resource-stackwright-testing|"
		;;
	unlock)
		echo "cmd/stackwright-unlock|.|stackwright-unlock|"
		;;
	fake-gcs-server)
		echo "hack/tools/fake-gcs-server|github.com/fsouza/fake-gcs-server|fake-gcs-server|"
		;;
	registry)
		echo "hack/tools/registry|github.com/distribution/distribution/v3/cmd/registry|registry||"
		;;
	gitea)
		# Built as upstream's release is, with tag bindata: the binary carries its
		# templates, locales and licences (prepare writes the archives it embeds).
		local v
		v=$(modversion "$root/hack/tools/gitea/go.mod" gitea.dev)
		echo "hack/tools/gitea|./cmd/gitea|gitea|-X main.Version=${v#v} -X main.Tags=bindata|bindata"
		;;
	*)
		echo "unknown tool: $1" >&2
		return 1
		;;
	esac
}

all_tools=(k8s pulumi pulumi-yaml pulumi-kubernetes provider unlock controller-gen golangci-lint helm promtool krew versitygw fake-gcs-server registry azurite gitea)
cluster_tools=(k8s k8s-node containerd versitygw source-controller notification-controller prometheus)
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=("${all_tools[@]}")
if [ "${tools[0]}" = cluster ]; then
	tools=("${cluster_tools[@]}")
	"$root/hack/cluster-packages.sh"
fi

goversion=$(go env GOVERSION)

# npm_tool <tool>: a Node.js tool, installed from its package-lock.json (hack/tools/<tool>)
# into bin/<tool>/ (its commands in bin/<tool>/node_modules/.bin).
npm_tool() {
	local tool=$1 dir="$root/hack/tools/$1" stamp start
	if ! command -v npm >/dev/null; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
			apt-get update -qq
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm
		else
			echo "tools: $tool skipped: it needs Node.js and npm (only the engine's azblob:// test uses it)" >&2
			return
		fi
	fi
	stamp=$( { node --version; cat "$dir/package.json" "$dir/package-lock.json"; } | sha256sum | cut -d' ' -f1)
	if [ -d "$bin/$tool/node_modules" ] && [ "$(cat "$stamps/$tool" 2>/dev/null)" = "$stamp" ]; then
		echo "tools: $tool up to date"
		return
	fi
	start=$(date +%s)
	rm -rf "$bin/$tool"
	mkdir -p "$bin/$tool"
	cp "$dir/package.json" "$dir/package-lock.json" "$bin/$tool/"
	(cd "$bin/$tool" && npm ci --no-audit --no-fund --silent)
	echo "$stamp" >"$stamps/$tool"
	echo "tools: installed $tool in $(($(date +%s) - start))s"
}

# prepare <tool> <module dir>: what a tool's build needs besides its module.
prepare() {
	case "$1" in
	pulumi-kubernetes)
		# The two files the provider's main package embeds, from its module's own (for the
		# machine's platform even when cross-compiling: gen runs here).
		# `go list -m` names a module's directory only once it is downloaded: on a machine
		# with an empty module cache it prints nothing, so download it first.
		local mod
		(cd "$root/$2" && go mod download github.com/pulumi/pulumi-kubernetes/provider/v4)
		mod=$(cd "$root/$2" && go list -m -f '{{.Dir}}' github.com/pulumi/pulumi-kubernetes/provider/v4)
		if [ -z "$mod" ]; then
			echo "tools: the module github.com/pulumi/pulumi-kubernetes/provider/v4 was not downloaded" >&2
			exit 1
		fi
		(cd "$root/$2" && GOOS='' GOARCH='' go run ./gen "$mod" "$k8s_provider_version" ./cmd/pulumi-resource-kubernetes)
		;;
	gitea)
		# The module's zip lacks the archives of assets Gitea's bindata build embeds (its
		# templates, locales, licences, .gitignore and label templates, migration
		# schemas): upstream generates them into its packages before building. The module
		# cache is read-only and a build may not overlay files in it, so the build uses a
		# copy of the module, with the archives written into it (../gen), in a workspace
		# with the tool's module (every module at the version the tool's go.mod selects).
		local mod work="$bin/.gitea-work"
		(cd "$root/$2" && go mod download gitea.dev)
		mod=$(cd "$root/$2" && go list -m -f '{{.Dir}}' gitea.dev)
		if [ -z "$mod" ]; then
			echo "tools: the module gitea.dev (code.gitea.io/gitea) was not downloaded" >&2
			exit 1
		fi
		rm -rf "$work"
		mkdir -p "$work"
		cp -R "$mod" "$work/src"
		chmod -R u+w "$work/src"
		(cd "$root/$2" && GOOS='' GOARCH='' go run ./gen "$work/src")
		(cd "$work" && go work init ./src "$root/$2")
		gowork="$work/go.work"
		;;
	esac
}

for tool in "${tools[@]}"; do
	if [ -f "$root/hack/tools/$tool/package.json" ]; then
		npm_tool "$tool"
		continue
	fi
	IFS='|' read -r dir pkgs bins ldflags tags <<<"$(tool_spec "$tool")"
	trim=""
	if [ -n "${TOOLS_GOARCH:-}" ] || [[ $trimmed_tools == *" $tool "* ]]; then
		trim=-trimpath
	fi
	if [ -n "$copy_to" ] && [[ $image_tools != *" $tool "* ]]; then
		echo "tools: $tool is not an image's tool; it is not built for linux/$(go env GOHOSTARCH) into $copy_to" >&2
		exit 1
	fi
	# A cross-compiled tool's stamp names its architecture (always trimmed); a native one
	# names -trimpath when it has it.
	variant=${TOOLS_GOARCH:+|$TOOLS_GOARCH}
	[ -n "$variant" ] || variant=${trim:+|$trim}
	stamp=$( {
		echo "$goversion|$CGO_ENABLED|$pkgs|$ldflags|$tags$variant"
		find "$root/$dir" -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 |
			sort -z | xargs -0 sha256sum | sed "s|$root/||"
	} | sha256sum | cut -d' ' -f1)
	missing=0
	for b in $bins; do [ -x "$bin/$b" ] || missing=1; done
	entry=${cache:+$cache/$tool${TOOLS_GOARCH:+-linux-$TOOLS_GOARCH}/$stamp}
	if [ "$missing" = 0 ] && [ "$(cat "$stamps/$tool" 2>/dev/null)" = "$stamp" ]; then
		echo "tools: $tool up to date ($bins)"
	elif [ -n "$entry" ] && [ -f "$entry/done" ]; then
		for b in $bins; do
			rm -f "$bin/$b"
			cp -l "$entry/$b" "$bin/$b" 2>/dev/null || cp "$entry/$b" "$bin/$b"
		done
		echo "$stamp" >"$stamps/$tool"
		echo "tools: $tool ($bins) from $entry"
	else
		start=$(date +%s)
		# The old binaries may be links to a cache entry: never write through them.
		for b in $bins; do rm -f "$bin/$b"; done
		# prepare may set gowork: a workspace to build in instead of the tool's module.
		gowork=""
		prepare "$tool" "$dir"
		# shellcheck disable=SC2086 # pkgs is a list of package paths; trim may be empty
		(cd "$root/$dir" && GOWORK="${gowork:-${GOWORK:-}}" go build $trim -tags "$tags" -ldflags "-s -w $ldflags" -o "$bin/" $pkgs)
		[ -z "$gowork" ] || rm -rf "${gowork%/*}"
		echo "$stamp" >"$stamps/$tool"
		echo "tools: built $tool ($bins) in $(($(date +%s) - start))s"
		if [ -n "$entry" ]; then
			# Only the newest entry of a tool is kept; "done" is written last, so an
			# interrupted copy is never used.
			rm -rf "${entry%/*}"
			mkdir -p "$entry"
			for b in $bins; do cp "$bin/$b" "$entry/$b"; done
			touch "$entry/done"
		fi
	fi
	if [ -n "$copy_to" ]; then
		for b in $bins; do cp -p "$bin/$b" "$copy_to/$b"; done
	fi
done
