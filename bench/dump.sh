#!/bin/sh
# dump.sh: what `wallprof dump` costs a Go server with 10,000 parked
# goroutines: its HTTP latency under a constant request rate, with and
# without a dump started every 100 ms, and how long each dump takes.
#
#   sudo bench/dump.sh                      # 5 rounds of 10 s per configuration
#   sudo ROUNDS=9 SECONDS_PER_RUN=15 RATE=500 bench/dump.sh
#
# The server is testdata/workloads/godump (5,000 goroutines on a channel,
# 3,000 in time.Sleep, 2,000 on a sync.Mutex, and a handler that writes
# "ok"), on 127.0.0.1 only. Load: hey at a constant rate (RATE requests/s
# from 4 workers). Configurations, alternated in each round (the order
# rotates from round to round):
#   none    no dump
#   dump    `wallprof dump -p PID --json` started every 100 ms (right after
#           the previous one when a dump takes longer than that)
# It prints each run's p50 and p99, the medians per configuration, and the
# dumps' count and wall times. Root is required (the dump loads BPF).
set -eu
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
SECS=${SECONDS_PER_RUN:-10}
RATE=${RATE:-400}
BIN=bench/.bin
mkdir -p "$BIN"
go build -o "$BIN/wallprof" ./cmd/wallprof
(cd testdata/workloads/godump && GOWORK=off CGO_ENABLED=0 go build -o "../../../$BIN/godump" .)

OUT=$(mktemp -d)
"$BIN/godump" >"$OUT/ready" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; rm -rf "$OUT"' EXIT
i=0
while ! grep -q '^ready' "$OUT/ready"; do
	i=$((i + 1)); [ $i -gt 600 ] && { echo "godump did not start"; exit 1; }
	sleep 0.1
done
ADDR=$(sed -n 's/^ready //p' "$OUT/ready")
echo "server pid $SERVER at $ADDR; $ROUNDS rounds of ${SECS}s per configuration at $RATE requests/s"

# dumps DURATION_S FILE: start a dump every 100 ms for DURATION_S seconds,
# writing each one's wall time in ms to FILE.
dumps() {
	end=$(($(date +%s) + $1))
	while [ "$(date +%s)" -lt "$end" ]; do
		t0=$(date +%s%N)
		"$BIN/wallprof" dump -p "$SERVER" --json >/dev/null
		t1=$(date +%s%N)
		echo $(((t1 - t0) / 1000000)) >>"$2"
		left=$((100 - (t1 - t0) / 1000000))
		if [ $left -gt 0 ]; then sleep "0.$(printf %03d $left)"; fi
	done
	return 0
}

# load CONFIG ROUND: one run; prints "CONFIG p50 p99" in ms.
load() {
	if [ "$1" = dump ]; then
		dumps "$SECS" "$OUT/dumptimes" &
		DUMPER=$!
	fi
	hey -z "${SECS}s" -c 4 -q $((RATE / 4)) "http://$ADDR/" >"$OUT/hey"
	if [ "$1" = dump ]; then wait $DUMPER; fi
	p50=$(awk '/ 50% in/ {print $3 * 1000}' "$OUT/hey")
	p99=$(awk '/ 99% in/ {print $3 * 1000}' "$OUT/hey")
	echo "$1 $p50 $p99" | tee -a "$OUT/results"
}

r=0
while [ $r -lt "$ROUNDS" ]; do
	if [ $((r % 2)) -eq 0 ]; then load none; load dump; else load dump; load none; fi
	r=$((r + 1))
done

median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
for c in none dump; do
	p50=$(awk -v c=$c '$1 == c {print $2}' "$OUT/results" | median)
	p99=$(awk -v c=$c '$1 == c {print $3}' "$OUT/results" | median)
	echo "median over $ROUNDS runs: $c p50 ${p50}ms p99 ${p99}ms"
done
n=$(wc -l <"$OUT/dumptimes")
echo "dumps: $n in $((ROUNDS * SECS))s; wall time per dump (ms): median $(median <"$OUT/dumptimes"), max $(sort -n "$OUT/dumptimes" | tail -1)"
