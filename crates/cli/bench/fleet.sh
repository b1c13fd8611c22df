#!/usr/bin/env bash
# Fleet-as-code benchmark: `vantage ctl plan` and `apply` of one fleet file of NODES nodes
# (one cluster, 100 node groups, one line, one address each) against `vantage serve` (release
# build, SQLite) on a temporary data directory: the plan of the whole fleet, its apply as one
# change, and the plan again (no change). Loopback only; the server is bounded in time and
# killed at exit.
#
#   crates/cli/bench/fleet.sh [NODES]      (default 10000)
#   VANTAGE_BIN=/path/to/vantage crates/cli/bench/fleet.sh …   (a binary built elsewhere)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
NODES=${1:-10000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/root/.cache/vantage-target}
if [ -n "${VANTAGE_BIN:-}" ]; then
    BIN=$VANTAGE_BIN
else
    (cd "$ROOT" && cargo build --release -q -p vantage --bin vantage)
    BIN=$CARGO_TARGET_DIR/release/vantage
fi
WORK=$(mktemp -d /tmp/vantage-fleet-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

timeout 600 "$BIN" serve --data-dir "$WORK/server" --api-listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 \
    --dns-listen 127.0.0.1:0 >"$WORK/serve.log" 2>&1 & PIDS+=($!)
for _ in $(seq 100); do [ -s "$WORK/server/serve.json" ] && break; sleep 0.1; done
export VANTAGE_DATA_DIR=$WORK/server

{
    printf 'regions:\n  - code: eu\n    name: Europe\nclusters:\n  - name: big\n    domain: big.fleet.test\n    groups:\n'
    for g in $(seq 0 99); do printf '      - name: g%d\n        region: eu\n' "$g"; done
    printf '    lines:\n      - name: default\n        group: g0\n    nodes:\n'
    awk -v n="$NODES" 'BEGIN { for (i = 0; i < n; i++) printf "      - name: n%d\n        group: g%d\n        addresses: [{ip: 198.51.%d.%d, trusted: true}]\n", i, i % 100, int(i / 250), i % 250 + 1 }'
} >"$WORK/fleet.yaml"

# Milliseconds `ctl` takes (a plan with changes exits 2).
ms() { local t0; t0=$(date +%s%N); "$@" >/dev/null || [ $? -eq 2 ]; echo $(( ($(date +%s%N) - t0) / 1000000 )); }
PLAN=$(ms "$BIN" ctl plan -f "$WORK/fleet.yaml")
APPLY=$(ms "$BIN" ctl apply -f "$WORK/fleet.yaml")
AGAIN=$(ms "$BIN" ctl plan -f "$WORK/fleet.yaml")
echo "nodes=$NODES objects=$((NODES + 103)) plan_ms=$PLAN apply_ms=$APPLY plan_again_ms=$AGAIN"
