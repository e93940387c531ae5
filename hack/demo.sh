#!/usr/bin/env bash
# The local demo: a real control plane, the operator (local executor, real pulumi engine)
# and a sample Program + Stack reconciled to Ready, all driven with plain kubectl.
#
#   make demo               leaves everything running until Ctrl-C
#   DEMO_ONCE=1 make demo   also deletes the Stack (destroying its resources) and exits 0
set -euo pipefail
cd "$(dirname "$0")/.."

demo=.demo
files=/tmp/stackwright-demo/files # set by config/samples/pulumi_v1_stack_files.yaml
export KUBECONFIG=$PWD/$demo/kubeconfig
kubectl() { bin/kubectl "$@"; }
say() { printf '\n== %s\n' "$*"; }

rm -rf "$demo" "$files"
mkdir -p "$demo"
# The local executor runs engines in the manager's process, so it serves one namespace
# (docs/operations.md, Tenancy and security): the samples' namespace.
say "Starting control plane and operator, reconciling namespace default (log: $demo/dev.log)"
bin/stackwright dev --watch-namespaces=default --data-dir "$demo/data" --kubeconfig-out "$KUBECONFIG" >"$demo/dev.log" 2>&1 &
dev=$!
stop() {
	kill "$dev" 2>/dev/null || true
	wait "$dev" 2>/dev/null || true
}
trap stop EXIT
for _ in $(seq 120); do
	[ -s "$KUBECONFIG" ] && kubectl get --raw /readyz >/dev/null 2>&1 && break
	kill -0 "$dev" 2>/dev/null || { cat "$demo/dev.log"; echo "stackwright dev exited" >&2; exit 1; }
	sleep 0.5
done
kubectl get --raw /readyz >/dev/null

say "Applying the sample Programs and Stacks"
# The "kubernetes" sample reaches this control plane with the demo's own kubeconfig.
kubectl create secret generic demo-kubeconfig --from-file=kubeconfig="$KUBECONFIG"
kubectl apply -f config/samples/pulumi_v1_program_files.yaml -f config/samples/pulumi_v1_stack_files.yaml \
	-f config/samples/pulumi_v1_stack_kubernetes.yaml
start=$(date +%s)
kubectl wait --for=condition=Ready stack/files stack/kubernetes --timeout=5m
say "Stacks Ready after $(($(date +%s) - start))s"
kubectl get stacks,programs,updates.stackwright.dev -o wide
say "Stack status"
kubectl get stack files -o jsonpath='{.status}' | head -c 4000
echo
say "Files the stack created under $files"
find "$files" -type f | sort
cat "$files/greeting.txt"
echo
say "The ConfigMap the kubernetes Stack created through the Kubernetes provider"
kubectl get configmap stackwright-demo -o jsonpath='{.data.greeting}'
echo

if [ "${DEMO_ONCE:-}" = 1 ]; then
	say "Deleting the Stacks (destroyOnFinalize: true destroys their resources first)"
	kubectl delete stack files kubernetes --timeout=5m
	if [ -n "$(find "$files" -type f 2>/dev/null)" ]; then
		echo "files left behind after destroy:" >&2
		find "$files" -type f >&2
		exit 1
	fi
	if kubectl get configmap stackwright-demo >/dev/null 2>&1; then
		echo "ConfigMap stackwright-demo left behind after destroy" >&2
		exit 1
	fi
	say "Destroyed; demo finished"
	exit 0
fi
say "Running. In another shell: export KUBECONFIG=$KUBECONFIG; bin/kubectl get stacks. Ctrl-C stops everything."
echo "The web console, in another shell: KUBECONFIG=$KUBECONFIG bin/kubectl-stackwright ui (open the address it prints)"
wait "$dev"
