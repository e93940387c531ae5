#!/usr/bin/env bash
# Installs the Debian packages the one-node cluster (make cluster) runs with: runc (built
# with seccomp, which a proxy-built runc lacks), the CNI plugins, iptables for kube-proxy
# and the CNI portmap plugin, and conntrack. Only what is missing is installed.
set -euo pipefail

need=()
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v conntrack >/dev/null || need+=(conntrack)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "cluster: missing Debian packages ${need[*]}; run as root or install them first" >&2
	exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
