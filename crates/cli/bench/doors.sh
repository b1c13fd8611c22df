#!/usr/bin/env bash
# Door redirect benchmark: `GET /go/{tenant}/{path}` of `vantage serve` (release build, on its
# public listener) under
# wrk with keep-alive, beside nginx answering `return 302` on the same machine in the same run.
#
#   crates/cli/bench/doors.sh [SECONDS] [REPEATS]      (defaults 10 and 3)
#   VANTAGE_BIN=/path/to/vantage crates/cli/bench/doors.sh …   (a binary built elsewhere)
#
# Set-up: `vantage serve` on a temporary data directory; one region, one `vantage probe`, a
# check probing every second, tenant `t1` and two mirrors pinned to a local nginx that
# answers 200 — so both are `live` and every redirect goes through the whole filter stack and
# a weighted choice. nginx (2 workers, as many as the machine's cores) answers
# `return 302 https://mirror.example.net$request_uri` on another port. Per round, each gets
# `wrk -t2 -c64 -d SECONDS --latency` (keep-alive), Vantage first then nginx; the summary is
# the median of the rounds (requests/s, ratio to nginx, p99). Loopback only; every process is
# bounded in time and killed at exit.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
SECS=${1:-10}
REPEATS=${2:-3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/root/.cache/vantage-target}
# VANTAGE_BIN measures a binary built elsewhere (another commit, to compare two builds).
if [ -n "${VANTAGE_BIN:-}" ]; then
    BIN=$VANTAGE_BIN
else
    (cd "$ROOT" && cargo build --release -q -p vantage --bin vantage)
    BIN=$CARGO_TARGET_DIR/release/vantage
fi
for tool in wrk nginx curl jq; do
    command -v "$tool" >/dev/null || { echo "$tool is needed (apt-get install $tool)" >&2; exit 1; }
done
WORK=$(mktemp -d /tmp/vantage-doors-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    kill "$(cat "$WORK/nginx/nginx.pid" 2>/dev/null)" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
LIFE=$(( (SECS + 5) * REPEATS * 2 + 120 ))

# nginx: the mirrors' health endpoint (200) and the peer's redirect (302).
MIRROR_PORT=18301
PEER_PORT=18302
mkdir -p "$WORK/nginx"
cat >"$WORK/nginx/nginx.conf" <<EOF
worker_processes 2;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
daemon off;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/body;
    proxy_temp_path $WORK/nginx/proxy;
    fastcgi_temp_path $WORK/nginx/fastcgi;
    uwsgi_temp_path $WORK/nginx/uwsgi;
    scgi_temp_path $WORK/nginx/scgi;
    keepalive_requests 1000000;
    server { listen 127.0.0.1:$MIRROR_PORT; location / { return 200 "ok\n"; } }
    server { listen 127.0.0.1:$PEER_PORT; location / { return 302 https://mirror.example.net\$request_uri; } }
}
EOF
timeout "$LIFE" nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" & PIDS+=($!)

# The mirrors are on loopback (the fetch policy allows it only when told), and doors are
# measured on the public face's own listener, as they are deployed.
timeout "$LIFE" "$BIN" serve --data-dir "$WORK/server" --api-listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 \
    --dns-listen 127.0.0.1:0 --public-listen 127.0.0.1:0 --allow-loopback-addresses --log-level warn \
    >"$WORK/server.log" 2>&1 & PIDS+=($!)
for _ in $(seq 1 200); do [ -f "$WORK/server/serve.json" ] && break; sleep 0.05; done
API=$(jq -r .api "$WORK/server/serve.json")
PUBLIC=$(jq -r .public "$WORK/server/serve.json")
AGENT=$(jq -r .agent "$WORK/server/serve.json")
CA=$(jq -r .ca_sha256 "$WORK/server/serve.json")
TOKEN=$(cat "$WORK/server/admin-token")
call() { curl -sf -X "$1" -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' "$API$2" ${3:+-d "$3"}; }
REGION=$(call POST /v1/regions '{"code":"local","name":"Local"}' | jq .id)
call POST /v1/checks '{"name":"default","method":"http","path":"/","interval_s":1}' >/dev/null
call PUT /v1/settings/mirrors '{"scheme":"https"}' >/dev/null
call PUT /v1/tenants/t1 '{}' >/dev/null
for m in m1 m2; do
    call PUT "/v1/mirrors/$m.example.net" "{\"tenants\":[\"t1\"],\"address\":\"127.0.0.1:$MIRROR_PORT\"}" >/dev/null
done
PROBER_TOKEN=$(call POST /v1/probers/tokens "{\"name\":\"bench\",\"region\":$REGION}" | jq -r .token)
timeout "$LIFE" "$BIN" probe --server "$AGENT" --token "$PROBER_TOKEN" --ca-sha256 "$CA" \
    --state-dir "$WORK/prober" --log-level warn >"$WORK/prober.log" 2>&1 & PIDS+=($!)
for _ in $(seq 1 300); do
    [ "$(call GET /v1/mirrors | jq '[.mirrors[] | select(.verdict == "live")] | length')" = 2 ] && break
    sleep 0.1
done
[ "$(call GET /v1/mirrors | jq '[.mirrors[] | select(.verdict == "live")] | length')" = 2 ] \
    || { echo "the mirrors did not become live" >&2; cat "$WORK/server.log" "$WORK/prober.log" >&2; exit 1; }
LOCATION=$(curl -s -o /dev/null -w '%{redirect_url}' "$PUBLIC/go/t1/pool/main/x.deb")
echo "vantage /go answers: $LOCATION" >&2
case $LOCATION in https://m[12].example.net/pool/main/x.deb) ;; *) echo "unexpected redirect" >&2; exit 1 ;; esac

# wrk's requests/s and p99 (ms) of one run.
run() {
    local out rps p99
    out=$(wrk -t2 -c64 -d"${SECS}s" --latency "$1")
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us$/, "", v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/, "", v)} else if (v ~ /s$/) {sub(/s$/, "", v); v*=1000}; print v}' <<<"$out")
    non2xx=$(awk '/Non-2xx or 3xx/ {print $NF}' <<<"$out")
    [ -z "$non2xx" ] || { echo "non-redirect answers: $non2xx" >&2; exit 1; }
    echo "$rps $p99"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: >"$WORK/vantage.txt"; : >"$WORK/nginx.txt"
for r in $(seq 1 "$REPEATS"); do
    v=$(run "$PUBLIC/go/t1/pool/main/x.deb"); echo "$v" >>"$WORK/vantage.txt"
    n=$(run "http://127.0.0.1:$PEER_PORT/pool/main/x.deb"); echo "$n" >>"$WORK/nginx.txt"
    echo "round $r: vantage $v | nginx $n  (requests/s, p99 ms)" >&2
done
V_RPS=$(cut -d' ' -f1 "$WORK/vantage.txt" | median); V_P99=$(cut -d' ' -f2 "$WORK/vantage.txt" | median)
N_RPS=$(cut -d' ' -f1 "$WORK/nginx.txt" | median); N_P99=$(cut -d' ' -f2 "$WORK/nginx.txt" | median)
RATIO=$(awk -v v="$V_RPS" -v n="$N_RPS" 'BEGIN {printf "%.2f", v / n}')
echo "| server | requests/s (median of $REPEATS) | ratio to nginx | p99 |"
echo "|---|---|---|---|"
echo "| Vantage /go (2 live mirrors, weighted) | $V_RPS | $RATIO | $V_P99 ms |"
echo "| nginx return 302 | $N_RPS | 1.00 | $N_P99 ms |"
