#!/bin/sh
# Per-probe-hit cost of wallprof latency: a tight loop calling main.trivial
# (internal/latency/testdata/target -bench N), without probes and under
# 'wallprof latency', the target pinned to CPU 1 and wallprof to CPU 0.
# Each round runs both, alternating the order; the cost per hit is
# (ns per call with probes - ns per call without) / 2 (entry + RET).
# Usage (root): bench/latency/run.sh [ROUNDS] [CALLS]
set -eu
rounds=${1:-5}
calls=${2:-100000}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/wallprof" ./cmd/wallprof && cd internal/latency/testdata/target && GOWORK=off go build -o "$tmp/target" .)
without() { taskset -c 1 "$tmp/target" -nowait -bench "$calls" | sed 's/.*"bench_ns_per_call":\([0-9.]*\).*/\1/'; }
with() {
	taskset -c 1 "$tmp/target" -bench "$calls" -out "$tmp/with.json" 2>/dev/null &
	pid=$!
	sleep 0.3
	taskset -c 0 "$tmp/wallprof" latency -p "$pid" --json main.trivial >"$tmp/lat.json" 2>"$tmp/lat.err" &
	wp=$!
	until grep -q probes "$tmp/lat.err" 2>/dev/null; do sleep 0.05; done
	kill -USR1 "$pid"
	wait "$pid"
	wait "$wp"
	sed 's/.*"bench_ns_per_call":\([0-9.]*\).*/\1/' "$tmp/with.json"
}
echo "round without_ns_per_call with_ns_per_call per_hit_ns"
for r in $(seq "$rounds"); do
	if [ $((r % 2)) = 1 ]; then a=$(without); b=$(with); else b=$(with); a=$(without); fi
	echo "$r $a $b $(echo "($b - $a) / 2" | bc -l | xargs printf '%.0f')"
done
