#!/usr/bin/env bash
# Brings up a single-host Berth cluster on this Debian 12 machine from source — containerd,
# the controller with its embedded store, one agent — imports a demo web image built locally
# from busybox-static (no registry or internet needed), runs an example Deployment and fetches
# a replica's page at its pod IP. Rerunning restarts the components. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
state=${BERTH_STATE:-/var/lib/berth}
export DEBIAN_FRONTEND=noninteractive

need=()
for p in protobuf-compiler libprotobuf-dev make gcc libc6-dev containerd runc containernetworking-plugins busybox-static iptables iproute2 curl ca-certificates; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
# A kubectl: Debian's own (kubernetes-client, 1.20) where none is installed; any kubectl
# from 1.20 to 1.33, 1.36 and 1.37 works (README, kubectl compatibility).
command -v kubectl >/dev/null || need+=(kubernetes-client)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

echo "== building the controller and the agent (the first build takes several minutes)"
# Only the two binaries a cluster runs, not the fuzz targets, the hollow-node tool or the
# tests, in the quickstart profile (Cargo.toml: opt-level 1, for a short first build).
cargo build --profile quickstart -p berth-controller -p berth-agent --bin berth-controller --bin berth-agent --quiet
bin=${CARGO_TARGET_DIR:-target}/quickstart

stop() { [ -f "$1" ] && kill "$(cat "$1")" 2>/dev/null && while kill -0 "$(cat "$1")" 2>/dev/null; do sleep 0.2; done; rm -f "$1"; true; }
mkdir -p "$state/controller" "$state/agent" "$state/containerd"

# containerd: the system service where systemd runs, else a background process of our own.
sock=/run/containerd/containerd.sock
if [ -d /run/systemd/system ]; then
  systemctl start containerd
else
  sock="$state/containerd/containerd.sock"
  stop "$state/containerd/pid"
  cat >"$state/containerd/config.toml" <<TOML
version = 2
root = "$state/containerd/root"
state = "/run/berth-containerd"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$sock"
TOML
  nohup containerd --config "$state/containerd/config.toml" >"$state/containerd/containerd.log" 2>&1 &
  echo $! >"$state/containerd/pid"
fi
for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done

echo "== starting the controller"
stop "$state/controller/pid"
rm -f "$state/controller/listen-address"
nohup "$bin/berth-controller" serve --data-dir "$state/controller" --listen 127.0.0.1:6443 \
  >"$state/controller/controller.log" 2>&1 &
echo $! >"$state/controller/pid"
for _ in $(seq 1 100); do [ -s "$state/controller/listen-address" ] && break; sleep 0.1; done
[ -s "$state/controller/listen-address" ] || { cat "$state/controller/controller.log"; exit 1; }
export KUBECONFIG="$state/controller/admin.kubeconfig"

echo "== building and importing the demo image (busybox httpd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
scripts/demo-image.sh "$work/demo.tar"
"$bin/berth-agent" image import "$work/demo.tar" --containerd-socket "$sock" --containerd-namespace berth

echo "== starting the agent"
stop "$state/agent/pid"
node=$(hostname | tr '[:upper:]' '[:lower:]')
nohup "$bin/berth-agent" --server "$(cat "$state/controller/listen-address")" \
  --token "$("$bin/berth-controller" token --data-dir "$state/controller")" \
  --node-name "$node" --root-dir "$state/agent" --containerd-socket "$sock" \
  --listen 127.0.0.1:10250 --node-ip 127.0.0.1 >"$state/agent/agent.log" 2>&1 &
echo $! >"$state/agent/pid"
kubectl wait --for=condition=Ready "node/$node" --timeout=60s

echo "== running the example"
kubectl apply -f examples/hello-deployment.yaml
kubectl rollout status deployment/hello --timeout=120s || {
  # Pods that stay Pending on a fresh host are most often a pressure taint (a nearly full
  # disk trips the kubelet's default imagefs.available<15%): show why.
  kubectl get pods -l app=hello -o wide
  kubectl describe node "$node" | sed -n '/^Taints:/p;/^Conditions:/,/^Addresses:/p'
  exit 1
}
kubectl get nodes -o wide
kubectl get deployments,replicasets,pods -o wide
ip=$(kubectl get pods -l app=hello -o jsonpath='{.items[0].status.podIP}')
echo "== the pod's page at http://$ip/:"
curl -s "http://$ip/"
cat <<TXT

Berth is up. Point kubectl at it with:
  export KUBECONFIG=$KUBECONFIG
Stop it with:
  kill \$(cat $state/agent/pid) \$(cat $state/controller/pid)
TXT
