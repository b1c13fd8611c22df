#!/usr/bin/env bash
# Authoritative DNS benchmark: Vantage's server, Knot DNS (static zone), gdnsd (multifo with
# tcp_connect health checks) and PowerDNS (BIND backend, LUA ifportup record), one after the
# other on 127.0.0.1, all serving bench.test with the same 4 A records. Then the line choice:
# Vantage with 3 lines over 200 client networks, asked plainly (`vantage-lines`) and with an
# ECS option a line's network holds (`vantage-ecs`), and with 3 more lines claiming an AS, a
# country and a continent from geo databases made here (mmdb-writer, as the tests make them),
# asked with an ECS option only the databases place (`vantage-geo`); gdnsd gets the same ECS
# queries (`gdnsd-ecs`: it answers them as any other, the cost of reading the option).
#
#   crates/dns/bench/run.sh [SECONDS] [REPEATS]      (defaults 15 and 1)
#
# PIN=1 runs every server on CPU 0 and dnsperf on CPU 1 (taskset): on a 2-core machine the
# servers then never compete with the load generator, and the rounds vary far less.
#
# BASE=NAME (default: the first of SERVERS) is the server the last summary divides by, round
# by round: the median of each round's ratio, which a machine whose speed drifts between
# rounds moves less than the ratio of the medians.
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
SRV=()
CLI=()
if [ "${PIN:-0}" = 1 ]; then
    SRV=(taskset -c 0)
    CLI=(taskset -c 1)
fi
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
LIFE=$(( (SECS * 2 + 15) * REPEATS * 8 + 60 ))
python3 "$HERE/edges.py" "$EDGEPORT" "$LIFE" & PIDS+=($!)
Q="$HERE/queries.txt"
# ECS options (dnsperf -E code:hex): family 1, source /24, scope 0, the network's 3 octets.
ECS_LINE="8:000118000a0105"     # 10.1.5.0/24: a network of line1
ECS_GEO="8:00011800c63364"      # 198.51.100.0/24: no line's network; the databases place it in DE
VENV=${VANTAGE_VENV:-$HOME/.cache/vantage-venv}
# The geo databases: 4,096 networks over 16 countries (so a lookup walks a tree of some size),
# the client's /24 in Germany, and an ASN database without it (both files are asked).
"$VENV/bin/python3" - "$WORK/country.mmdb" "$WORK/asn.mmdb" <<'PY'
import sys
from mmdb_writer import MMDBWriter, MmdbU32
from netaddr import IPSet
countries = [("DE", "EU"), ("FR", "EU"), ("JP", "AS"), ("US", "NA"), ("BR", "SA"), ("AU", "OC"), ("ZA", "AF"), ("SG", "AS"),
             ("GB", "EU"), ("IN", "AS"), ("CA", "NA"), ("MX", "NA"), ("NG", "AF"), ("NZ", "OC"), ("AR", "SA"), ("KR", "AS")]
country = MMDBWriter(ip_version=6, database_type="GeoLite2-Country", ipv4_compatible=True)
asn = MMDBWriter(ip_version=6, database_type="GeoLite2-ASN", ipv4_compatible=True)
for i in range(4096):
    net = "%d.%d.0.0/16" % (20 + i // 256, i % 256)
    c, k = countries[i % len(countries)]
    country.insert_network(IPSet([net]), {"country": {"iso_code": c}, "continent": {"code": k}})
    asn.insert_network(IPSet([net]), {"autonomous_system_number": MmdbU32(64512 + i % 1000)})
country.insert_network(IPSet(["198.51.100.0/24"]), {"country": {"iso_code": "DE"}, "continent": {"code": "EU"}})
country.to_db_file(sys.argv[1])
asn.to_db_file(sys.argv[2])
PY
# Query options per server: the ECS rows send an option with every query.
qopts() {
    case $1 in
        vantage-ecs|gdnsd-ecs) echo "-E $ECS_LINE" ;;
        vantage-geo) echo "-E $ECS_GEO" ;;
    esac
}
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
        vantage) timeout "$LIFE" "${SRV[@]}" "$BIN" "127.0.0.1:$port" 2 "$LIFE" >"$dir/log" 2>&1 & ;;
        vantage-lines|vantage-ecs) timeout "$LIFE" "${SRV[@]}" "$BIN" "127.0.0.1:$port" 2 "$LIFE" lines >"$dir/log" 2>&1 & ;;
        vantage-geo) timeout "$LIFE" "${SRV[@]}" "$BIN" "127.0.0.1:$port" 2 "$LIFE" geo "$WORK/country.mmdb" "$WORK/asn.mmdb" >"$dir/log" 2>&1 & ;;
        knot)
            mkdir -p "$dir/db"; cp "$HERE/bench.test.zone" "$dir/"
            fill "$HERE/knot.conf.in" "$dir" "$port" >"$dir/knot.conf"
            timeout "$LIFE" "${SRV[@]}" knotd -c "$dir/knot.conf" >"$dir/log" 2>&1 & ;;
        gdnsd|gdnsd-ecs)
            mkdir -p "$dir/zones"; cp "$HERE/gdnsd/zones/bench.test" "$dir/zones/"
            fill "$HERE/gdnsd/config.in" "$dir" "$port" >"$dir/config"
            timeout "$LIFE" "${SRV[@]}" gdnsd -c "$dir" start >"$dir/log" 2>&1 & ;;
        pdns)
            for f in pdns.conf named.conf bench.test.zone; do fill "$HERE/pdns/$f.in" "$dir" "$port" >"$dir/$f"; done
            timeout "$LIFE" "${SRV[@]}" pdns_server --config-dir="$dir" >"$dir/log" 2>&1 & ;;
    esac
    SERVER=$!
    PIDS+=("$SERVER")
    wait_up "$port"
    # Health checks settle (gdnsd marks edges up after its first intervals).
    sleep 3
}

percentiles() { awk '/^> NOERROR/ {print $NF}' | sort -g | awk '{a[NR]=$1} END {if (NR) printf "%.3f %.3f %d\n", a[int(NR*0.50)+1]*1000, a[int(NR*0.99)+1]*1000, NR; else print "- - 0"}'; }

SERVERS=${SERVERS:-vantage knot gdnsd pdns vantage-lines vantage-ecs gdnsd-ecs vantage-geo}
ROWS="$WORK/rows"
: >"$ROWS"
printf "%-14s %10s %9s %9s %9s %9s %9s\n" server qps avg_ms lost p50_ms p99_ms p99@1k_ms
for r in $(seq 1 "$REPEATS"); do
    port=15400
    for name in $SERVERS; do
        port=$((port + 1))
        start "$name" "$port"
        # shellcheck disable=SC2046 # the options are words
        set -- $(qopts "$name")
        out=$("${CLI[@]}" dnsperf -s 127.0.0.1 -p "$port" -d "$Q" "$@" -c 16 -T 2 -q 200 -l "$SECS" 2>&1)
        qps=$(awk '/Queries per second/ {print $4}' <<<"$out")
        avg=$(awk '/Average Latency/ {printf "%.3f", $4*1000}' <<<"$out")
        lost=$(awk '/Queries lost/ {print $3}' <<<"$out")
        read -r p50 p99 _ < <("${CLI[@]}" dnsperf -s 127.0.0.1 -p "$port" -d "$Q" "$@" -c 16 -T 2 -q 200 -l "$SECS" -v 2>/dev/null | percentiles)
        read -r _ light _ < <("${CLI[@]}" dnsperf -s 127.0.0.1 -p "$port" -d "$Q" "$@" -c 4 -T 1 -Q 1000 -l 5 -v 2>/dev/null | percentiles)
        printf "%-14s %10.0f %9s %9s %9s %9s %9s\n" "$name" "$qps" "$avg" "$lost" "$p50" "$p99" "$light" | tee -a "$ROWS"
        kill "$SERVER" 2>/dev/null || true
        wait "$SERVER" 2>/dev/null || true
    done
done

echo
echo "median of $REPEATS rounds (qps ratio to vantage):"
for name in $SERVERS; do
    med() { awk -v n="$name" -v c="$1" '$1 == n {print $c}' "$ROWS" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    printf "%-14s %10.0f %9s %9s %9s\n" "$name" "$(med 2)" "$(med 6)" "$(med 7)" "$(med 3)"
done | awk 'NR == 1 {base = $2} {printf "%-14s qps %8d  p99 %7s ms  p99@1k %7s ms  avg %7s ms  ratio %.2f\n", $1, $2, $3, $4, $5, $2 / base}'

# Each round's rows are one per server, in the order of SERVERS.
BASE=${BASE:-${SERVERS%% *}}
RATIOS="$WORK/ratios"
awk -v base="$BASE" -v n="$(wc -w <<<"$SERVERS")" '{q[int((NR - 1) / n), $1] = $2}
    END {for (k in q) {split(k, p, SUBSEP); b = q[p[1], base]; if (b > 0) printf "%s %.4f\n", p[2], q[k] / b}}' \
    "$ROWS" >"$RATIOS"
echo
echo "median of each round's qps ratio to $BASE (the two in the same round):"
for name in $SERVERS; do
    awk -v n="$name" '$1 == n {print $2}' "$RATIOS" | sort -g |
        awk -v n="$name" '{a[NR] = $1} END {if (NR) printf "%-14s ratio %.2f  (%d rounds)\n", n, (a[int((NR + 1) / 2)] + a[int(NR / 2) + 1]) / 2, NR}'
done
