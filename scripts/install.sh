#!/usr/bin/env bash
# Installs Berth on a host: the binaries, the systemd units and their configuration, then
# enables containerd and the service where systemd runs (and says how to start them where
# it does not). Running it again converges to the same files.
#
#   scripts/install.sh agent --server URL[,URL...] --token-file FILE [--node-name NAME]
#                            [--registries FILE] [--agent-args "ARGS"] [options]
#   scripts/install.sh controller [--controller-args "ARGS"] [options]
#   scripts/install.sh uninstall agent|controller|all [options]
#
# options:
#   --server URL    repeatable (or a comma-separated list): several controllers of one
#                   cluster, kept in BERTH_SERVER as one comma-separated list
#   --bin-dir DIR   where berth-agent / berth-controller are (default: target/release of this
#                   checkout, else the directory of this script)
#   --root DIR      install under DIR instead of / and touch no service (a dry run whose files
#                   can be inspected)
#
# Files written (under --root):
#   /usr/local/bin/berth-agent | berth-controller          0755
#   /etc/systemd/system/berth-agent.service | berth-controller.service   0644
#   /etc/berth/agent.env       BERTH_SERVER, BERTH_AGENT_ARGS                0600
#   /etc/berth/token           the join token                                0600
#   /etc/berth/registries.yaml given with --registries, else an empty one    0600 (kept if present)
#   /etc/berth/controller.env  BERTH_CONTROLLER_ARGS                         0600
# uninstall removes exactly these (and stops and disables the service first); state in
# /var/lib/berth is left for `berth-agent uninstall` / an administrator.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")

die() {
  echo "install.sh: $*" >&2
  exit 2
}

usage() {
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

[ $# -ge 1 ] || usage
command=$1
shift
what=""
if [ "$command" = uninstall ]; then
  [ $# -ge 1 ] || usage
  what=$1
  shift
  case $what in agent | controller | all) ;; *) die "uninstall agent|controller|all" ;; esac
fi

server="" token_file="" node_name="" registries="" agent_args="" controller_args=""
root="" bin_dir=""
while [ $# -gt 0 ]; do
  case $1 in
    --server) server=${server:+$server,}${2:?}; shift 2 ;;
    --token-file) token_file=${2:?}; shift 2 ;;
    --node-name) node_name=${2:?}; shift 2 ;;
    --registries) registries=${2:?}; shift 2 ;;
    --agent-args) agent_args=${2?}; shift 2 ;;
    --controller-args) controller_args=${2?}; shift 2 ;;
    --root) root=${2:?}; shift 2 ;;
    --bin-dir) bin_dir=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    *) die "unknown argument $1" ;;
  esac
done

if [ -n "$root" ]; then
  mkdir -p "$root"
  root=$(cd "$root" && pwd)
fi
if [ -z "$bin_dir" ]; then
  if [ -x "$repo/target/release/berth-agent" ] || [ -x "$repo/target/release/berth-controller" ]; then
    bin_dir=$repo/target/release
  else
    bin_dir=$here
  fi
fi

# systemd manages services here only on the real root of a host booted with it.
has_systemd() {
  [ -z "$root" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null
}

put() { # put MODE SOURCE DEST: install SOURCE at DEST (under --root) with MODE
  install -D -m "$1" "$2" "$root$3"
}

write() { # write MODE DEST: stdin to DEST (under --root) with MODE
  local dest=$root$2
  mkdir -p "$(dirname "$dest")"
  local tmp
  tmp=$(mktemp "$dest.XXXXXX")
  cat >"$tmp"
  chmod "$1" "$tmp"
  mv -f "$tmp" "$dest"
}

quote() { # an env-file value: double-quoted, with \ " $ ` escaped
  printf '"%s"' "$(printf '%s' "$1" | sed 's/[\\"$`]/\\&/g')"
}

unit_source() {
  local unit=$repo/systemd/$1.service
  [ -f "$unit" ] || unit=$here/$1.service
  [ -f "$unit" ] || die "no $1.service beside this script or in systemd/"
  echo "$unit"
}

binary() {
  local bin=$bin_dir/$1
  [ -x "$bin" ] || die "$bin not found: build with 'cargo build --release' or pass --bin-dir"
  echo "$bin"
}

enable() { # enable SERVICE...
  if has_systemd; then
    systemctl daemon-reload
    systemctl enable --now "$@"
    echo "enabled and started: $*"
  elif [ -n "$root" ]; then
    echo "installed under $root; no service touched"
  else
    echo "systemd is not running on this host: start containerd, then run the ExecStart line of"
    echo "  /etc/systemd/system/$1.service with the variables of its EnvironmentFile, e.g."
    echo "  set -a; . /etc/berth/${1#berth-}.env; set +a; /usr/local/bin/$1 ..."
  fi
}

install_agent() {
  [ -n "$server" ] || die "agent needs --server URL"
  [ -n "$token_file" ] || die "agent needs --token-file FILE"
  [ -s "$token_file" ] || die "$token_file is empty or missing"
  local args=$agent_args
  [ -z "$node_name" ] || args="--node-name $node_name${args:+ $args}"
  put 0755 "$(binary berth-agent)" /usr/local/bin/berth-agent
  put 0644 "$(unit_source berth-agent)" /etc/systemd/system/berth-agent.service
  put 0600 "$token_file" /etc/berth/token
  {
    echo "# Written by scripts/install.sh: the agent's --server, and further flags."
    echo "BERTH_SERVER=$(quote "$server")"
    echo "BERTH_AGENT_ARGS=$(quote "$args")"
  } | write 0600 /etc/berth/agent.env
  if [ -n "$registries" ]; then
    put 0600 "$registries" /etc/berth/registries.yaml
  elif [ ! -e "$root/etc/berth/registries.yaml" ]; then
    {
      echo "# Registry mirrors, credentials and TLS (k3s's registries.yaml format), e.g.:"
      echo "# mirrors:"
      echo "#   docker.io:"
      echo "#     endpoint: [\"http://registry.internal:5000\"]"
      echo "mirrors: {}"
    } | write 0600 /etc/berth/registries.yaml
  fi
  chmod 0700 "$root/etc/berth"
  if has_systemd; then
    enable containerd berth-agent
  else
    enable berth-agent
  fi
}

install_controller() {
  put 0755 "$(binary berth-controller)" /usr/local/bin/berth-controller
  put 0644 "$(unit_source berth-controller)" /etc/systemd/system/berth-controller.service
  {
    echo "# Written by scripts/install.sh: further flags of berth-controller serve."
    echo "BERTH_CONTROLLER_ARGS=$(quote "$controller_args")"
  } | write 0600 /etc/berth/controller.env
  chmod 0700 "$root/etc/berth"
  enable berth-controller
}

uninstall_one() { # uninstall_one agent|controller
  local service=berth-$1
  if has_systemd; then
    systemctl disable --now "$service" 2>/dev/null || true
  fi
  rm -f "$root/usr/local/bin/$service" "$root/etc/systemd/system/$service.service"
  if [ "$1" = agent ]; then
    rm -f "$root/etc/berth/agent.env" "$root/etc/berth/token" "$root/etc/berth/registries.yaml"
  else
    rm -f "$root/etc/berth/controller.env"
  fi
  rmdir "$root/etc/berth" 2>/dev/null || true
  if has_systemd; then systemctl daemon-reload; fi
  echo "removed $service"
}

case $command in
  agent) install_agent ;;
  controller) install_controller ;;
  uninstall)
    case $what in
      all) uninstall_one agent; uninstall_one controller ;;
      *) uninstall_one "$what" ;;
    esac
    ;;
  *) usage ;;
esac
