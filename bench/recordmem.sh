#!/usr/bin/env bash
# bench/recordmem.sh: `wallprof record`'s memory over a long recording of a
# busy Go server, and how long `report` and `flame` take on what it wrote
# (issue 20, point 4: at most 100 MB of RSS after ten minutes on a server
# with 10,000 goroutines; report and flame of a 60-second recording in
# under 1 s).
#
# Starts bench/goroutines/server with N parked goroutines under RATE
# requests/s (wallprof load), records it attached for DURATION seconds at
# FREQ Hz (the goroutine view on, as by default), prints wallprof's VmRSS
# and VmHWM (and the anonymous and file-backed parts of VmRSS) every STEP seconds, its own summary lines at the end, then
# runs `wallprof report` and `wallprof flame` on the profile ROUNDS times
# each and prints the median wall time and peak RSS of each.
#
# As root, from anywhere in the repository:
#   DURATION=600 bench/recordmem.sh            # the ten-minute RSS goal
#   DURATION=60 STEP=10 bench/recordmem.sh     # report and flame of 60 s
# Variables: DURATION (seconds, 60), FREQ (99), N (10000), RATE (1000),
# STEP (30), ROUNDS (5), WALLPROF (a wallprof binary; default: built from
# the work tree), OUT (a directory for the profile and logs).
set -euo pipefail

die() { echo "recordmem.sh: $*" >&2; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
DURATION=${DURATION:-60}
FREQ=${FREQ:-99}
N=${N:-10000}
RATE=${RATE:-1000}
STEP=${STEP:-30}
ROUNDS=${ROUNDS:-5}
OUT=${OUT:-$(mktemp -d /tmp/recordmem.XXXXXX)}
mkdir -p "$OUT"
[[ $(id -u) == 0 ]] || die "run as root: recording needs it"
[[ -x /usr/bin/time ]] || die "needs /usr/bin/time (apt-get install time)"

tmp=$(mktemp -d /tmp/recordmem-bin.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

if [[ -z ${WALLPROF:-} ]]; then
	(cd "$root" && CGO_ENABLED=0 go build -o "$tmp/wallprof" ./cmd/wallprof)
	WALLPROF=$tmp/wallprof
fi
(cd "$here/goroutines/server" && go build -o "$tmp/server" .)

"$tmp/server" --goroutines "$N" --addr 127.0.0.1:18081 >"$OUT/server.log" 2>&1 &
spid=$!
pids+=($spid)
sleep 2
"$WALLPROF" load --rate "$RATE/s" --duration "$((DURATION + 30))s" http://127.0.0.1:18081/order >"$OUT/load.log" 2>&1 &
pids+=($!)
sleep 3

profile=$OUT/server.pb.gz
"$WALLPROF" record -p "$spid" -F "$FREQ" --duration "${DURATION}s" -o "$profile" 2>"$OUT/record.log" &
wpid=$!
pids+=($wpid)

mb() { awk -v k="$2:" '$1 == k {printf "%.1f", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo -; }
echo "recordmem: server pid $spid ($N goroutines, $RATE requests/s), wallprof pid $wpid at $FREQ Hz for ${DURATION}s; output in $OUT"
printf '%8s %10s %10s %10s %10s\n' seconds VmRSS_MB VmHWM_MB RssAnon_MB RssFile_MB
t=0
while ((t + STEP <= DURATION)); do
	sleep "$STEP"
	t=$((t + STEP))
	kill -0 "$wpid" 2>/dev/null || break
	printf '%8d %10s %10s %10s %10s\n' "$t" "$(mb "$wpid" VmRSS)" "$(mb "$wpid" VmHWM)" "$(mb "$wpid" RssAnon)" "$(mb "$wpid" RssFile)" | tee -a "$OUT/rss.txt"
done
wait "$wpid" || die "wallprof record failed: $(tail -3 "$OUT/record.log")"
grep -E 'wrote|peak memory|wallprof cost' "$OUT/record.log" || true
"$WALLPROF" report "$profile" 2>/dev/null | grep -E '^(duration|samples|wallprof cost|goroutines):' || true

# report and flame, ROUNDS times each, interleaved; the medians.
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
: >"$OUT/times.txt"
for _ in $(seq "$ROUNDS"); do
	/usr/bin/time -f "report %e %M" -a -o "$OUT/times.txt" "$WALLPROF" report "$profile" >/dev/null
	/usr/bin/time -f "flame %e %M" -a -o "$OUT/times.txt" "$WALLPROF" flame "$profile" -o "$OUT/flame.html" 2>/dev/null
done
for cmd in report flame; do
	s=$(awk -v c=$cmd '$1 == c {print $2}' "$OUT/times.txt" | median)
	m=$(awk -v c=$cmd '$1 == c {print $3 / 1024}' "$OUT/times.txt" | median)
	printf 'wallprof %-6s median of %d: %s s, peak RSS %.0f MiB\n' "$cmd" "$ROUNDS" "$s" "$m"
done
echo "profile: $(stat -c %s "$profile") bytes"
