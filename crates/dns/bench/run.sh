#!/usr/bin/env bash
# Authoritative DNS benchmark: Vantage's server, Knot DNS (static zone), gdnsd (multifo with
# tcp_connect health checks) and PowerDNS (BIND backend, LUA ifportup record), one after the
# other on 127.0.0.1, all serving bench.test with the same 4 A records.
#
#   crates/dns/bench/run.sh [SECONDS] [REPEATS]      (defaults 15 and 1)
#
# Per server: a saturating dnsperf run (-c 16 -T 2 -q 200 -l SECONDS) for throughput and
# average latency; the same load with -v for the latency distribution (p50/p99 of every
# answer); and a light fixed-rate run (-Q 1000, under every server's capacity) for p99 when
# no server is saturated. The servers take turns, REPEATS rounds, so load from elsewhere on
# the machine spreads over all of them; the summary is the median of the rounds. Only
# loopback addresses are used; every process is bounded in time and killed at exit.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
SECS=${1:-15}
REPEATS=${2:-1}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/root/.cache/vantage-target}
BIN=$CARGO_TARGET_DIR/release/examples/dns_bench_server
if ! (cd "$ROOT" && cargo build --release -q -p vantage-dns --example dns_bench_server); then
    [ -x "$BIN" ] || exit 1
    echo "warning: build failed; using the existing $BIN" >&2
fi
WORK=$(mktemp -d /tmp/vantage-dns-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
EDGEPORT=18099
LIFE=$(( (SECS * 2 + 15) * REPEATS * 5 + 60 ))
python3 "$HERE/edges.py" "$EDGEPORT" "$LIFE" & PIDS+=($!)
Q="$HERE/queries.txt"
fill() { sed -e "s|@DIR@|$2|g; s|@PORT@|$3|g; s|@EDGEPORT@|$EDGEPORT|g" "$1"; }

wait_up() {
    for _ in $(seq 1 100); do
        if [ -n "$(dig -r @127.0.0.1 -p "$1" bench.test A +short +time=1 +tries=1 2>/dev/null)" ]; then return 0; fi
        sleep 0.1
    done
    echo "server on port $1 did not answer" >&2
    return 1
}

start() { # NAME PORT -> starts the server, PID in SERVER
    local name=$1 port=$2 dir="$WORK/$1"
    mkdir -p "$dir"
    case $name in
        vantage) timeout "$LIFE" "$BIN" "127.0.0.1:$port" 2 "$LIFE" >"$dir/log" 2>&1 & ;;
        vantage-lines) timeout "$LIFE" "$BIN" "127.0.0.1:$port" 2 "$LIFE" lines >"$dir/log" 2>&1 & ;;
        knot)
            mkdir -p "$dir/db"; cp "$HERE/bench.test.zone" "$dir/"
            fill "$HERE/knot.conf.in" "$dir" "$port" >"$dir/knot.conf"
            timeout "$LIFE" knotd -c "$dir/knot.conf" >"$dir/log" 2>&1 & ;;
        gdnsd)
            mkdir -p "$dir/zones"; cp "$HERE/gdnsd/zones/bench.test" "$dir/zones/"
            fill "$HERE/gdnsd/config.in" "$dir" "$port" >"$dir/config"
            timeout "$LIFE" gdnsd -c "$dir" start >"$dir/log" 2>&1 & ;;
        pdns)
            for f in pdns.conf named.conf bench.test.zone; do fill "$HERE/pdns/$f.in" "$dir" "$port" >"$dir/$f"; done
            timeout "$LIFE" pdns_server --config-dir="$dir" >"$dir/log" 2>&1 & ;;
    esac
    SERVER=$!
    PIDS+=("$SERVER")
    wait_up "$port"
    # Health checks settle (gdnsd marks edges up after its first intervals).
    sleep 3
}

percentiles() { awk '/^> NOERROR/ {print $NF}' | sort -g | awk '{a[NR]=$1} END {if (NR) printf "%.3f %.3f %d\n", a[int(NR*0.50)+1]*1000, a[int(NR*0.99)+1]*1000, NR; else print "- - 0"}'; }

ROWS="$WORK/rows"
: >"$ROWS"
printf "%-14s %10s %9s %9s %9s %9s %9s\n" server qps avg_ms lost p50_ms p99_ms p99@1k_ms
for r in $(seq 1 "$REPEATS"); do
    port=15400
    for name in vantage knot gdnsd pdns vantage-lines; do
        port=$((port + 1))
        start "$name" "$port"
        out=$(dnsperf -s 127.0.0.1 -p "$port" -d "$Q" -c 16 -T 2 -q 200 -l "$SECS" 2>&1)
        qps=$(awk '/Queries per second/ {print $4}' <<<"$out")
        avg=$(awk '/Average Latency/ {printf "%.3f", $4*1000}' <<<"$out")
        lost=$(awk '/Queries lost/ {print $3}' <<<"$out")
        read -r p50 p99 _ < <(dnsperf -s 127.0.0.1 -p "$port" -d "$Q" -c 16 -T 2 -q 200 -l "$SECS" -v 2>/dev/null | percentiles)
        read -r _ light _ < <(dnsperf -s 127.0.0.1 -p "$port" -d "$Q" -c 4 -T 1 -Q 1000 -l 5 -v 2>/dev/null | percentiles)
        printf "%-14s %10.0f %9s %9s %9s %9s %9s\n" "$name" "$qps" "$avg" "$lost" "$p50" "$p99" "$light" | tee -a "$ROWS"
        kill "$SERVER" 2>/dev/null || true
        wait "$SERVER" 2>/dev/null || true
    done
done

echo
echo "median of $REPEATS rounds (qps ratio to vantage):"
for name in vantage knot gdnsd pdns vantage-lines; do
    med() { awk -v n="$name" -v c="$1" '$1 == n {print $c}' "$ROWS" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    printf "%-14s %10.0f %9s %9s %9s\n" "$name" "$(med 2)" "$(med 6)" "$(med 7)" "$(med 3)"
done | awk 'NR == 1 {base = $2} {printf "%-14s qps %8d  p99 %7s ms  p99@1k %7s ms  avg %7s ms  ratio %.2f\n", $1, $2, $3, $4, $5, $2 / base}'
