#!/usr/bin/env bash
# Lines of each workload controller outside its planner (issue 33's measure): the files under
# controllers/src/<controller>/ that are not tests (*tests.rs, fixtures.rs) and not tagged
# `//! Planner: pure, no I/O.` in their first 30 lines, counted up to an inline `mod tests {`.
#
#   scripts/workload-size.sh      prints "<controller> <total>: <file>=<lines> ..."
set -euo pipefail
cd "$(dirname "$0")/../controllers/src"
for c in replicaset deployment daemonset statefulset job cronjob; do
  total=0
  detail=""
  while IFS= read -r f; do
    case $f in *tests.rs | *fixtures.rs) continue ;; esac
    head -30 "$f" | grep -q 'Planner: pure' && continue
    n=$(awk '/^mod tests \{/{n--; exit} {n++} END{print n+0}' "$f")
    total=$((total + n))
    detail="$detail $(basename "$f")=$n"
  done < <(find "$c" -name '*.rs' | sort)
  echo "$c $total:$detail"
done
