#!/usr/bin/env bash
# Brings up a single-host Berth control plane on this machine from source and applies an
# example workload with the stock kubectl. Idempotent: rerunning restarts the controller.
#
# Today this starts the controller (API server, embedded store, garbage collector). The node
# agent that runs pods as containers is the next milestone; until it lands the example's
# Deployment is stored and served but no pods run.
set -euo pipefail
cd "$(dirname "$0")/.."
state=${BERTH_STATE:-/var/lib/berth}
export DEBIAN_FRONTEND=noninteractive

need=()
for p in protobuf-compiler curl ca-certificates; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

echo "== building release binaries (first build takes a few minutes)"
cargo build --release --bins --quiet

mkdir -p "$state/controller"
pidfile="$state/controller/berth-controller.pid"
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  kill "$(cat "$pidfile")"
  while kill -0 "$(cat "$pidfile")" 2>/dev/null; do sleep 0.2; done
fi
rm -f "$state/controller/listen-address"
nohup target/release/berth-controller serve --data-dir "$state/controller" --listen 127.0.0.1:6443 \
  >"$state/controller/controller.log" 2>&1 &
echo $! >"$pidfile"
for _ in $(seq 1 100); do
  [ -s "$state/controller/listen-address" ] && break
  sleep 0.1
done
[ -s "$state/controller/listen-address" ] || { cat "$state/controller/controller.log"; exit 1; }

export KUBECONFIG="$state/controller/admin.kubeconfig"
echo "== controller at $(cat "$state/controller/listen-address") (pid $(cat "$pidfile"))"
kubectl version
kubectl get namespaces
kubectl apply -f examples/nginx-deployment.yaml
kubectl get deployments,replicasets,pods -o wide
cat <<TXT

The control plane is up. Point kubectl at it with:
  export KUBECONFIG=$KUBECONFIG
Stop it with:
  kill \$(cat $pidfile)
TXT
