#!/usr/bin/env bash
# bench/walkcost.sh: what recording costs wallprof's own CPU, and how often
# the Go runtime's sysmon thread wakes inside it, for two wallprof binaries
# side by side (issue 20: the walker's wake-ups were most of wallprof's CPU
# on a busy Go server).
#
# Each round records, with BASE and then NEW (their order alternating from
# round to round):
#   - bursts: cgt --bursts (8 threads whose phases are shorter than the
#     sampling period, 2.6 CPUs wanted on 2) at the default rate; over
#     5 s in the middle of the recording, wallprof's CPU (utime + stime of
#     all its threads, /proc) and its sysmon thread's voluntary switches
#     (the process's second thread);
#   - server: bench/goroutines/server with N parked goroutines under RATE
#     requests/s (wallprof load), `wallprof record -p` for 20 s: the
#     profiler CPU of wallprof's own cost line.
# It prints each round and the median of each column.
#
# As root, from anywhere in the repository:
#   BASE=/path/to/old/wallprof bench/walkcost.sh
# Variables: BASE (required), NEW (default: built from the work tree),
# ROUNDS (3), N (10000), RATE (1000), OUT (a directory for logs).
set -euo pipefail

die() { echo "walkcost.sh: $*" >&2; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
ROUNDS=${ROUNDS:-3}
N=${N:-10000}
RATE=${RATE:-1000}
OUT=${OUT:-$(mktemp -d /tmp/walkcost.XXXXXX)}
mkdir -p "$OUT"
[[ $(id -u) == 0 ]] || die "run as root: recording needs it"
[[ -n ${BASE:-} && -x $BASE ]] || die "set BASE to the wallprof binary to compare with"
command -v gcc >/dev/null || die "needs gcc (to build the bursts workload)"

tmp=$(mktemp -d /tmp/walkcost-bin.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

if [[ -z ${NEW:-} ]]; then
	(cd "$root" && CGO_ENABLED=0 go build -o "$tmp/wallprof" ./cmd/wallprof)
	NEW=$tmp/wallprof
fi
(cd "$here/goroutines/server" && go build -o "$tmp/server" .)
gcc -O1 -g -fno-omit-frame-pointer -pthread -o "$tmp/cgt" "$root/testdata/workloads/cgt/cgt.c"

# ticks: the utime + stime, in clock ticks, of every thread of pid; and the
# voluntary switches of its second thread (Go's sysmon).
ticks() { { cat /proc/"$1"/task/*/stat 2>/dev/null || true; } | awk '{t += $14 + $15} END {print t + 0}'; }
sysmon() {
	local t
	t=$(ls /proc/"$1"/task | sort -n | sed -n 2p)
	awk '/^voluntary_ctxt_switches/ {print $2}' "/proc/$1/task/$t/status"
}
hz=$(getconf CLK_TCK)

bursts() { # bursts BIN: prints "cpu_ms_per_s sysmon_wakeups_per_s"
	"$1" record -o "$OUT/bursts.pb.gz" -- "$tmp/cgt" --truth "$OUT/truth.json" --bursts 12 >"$OUT/bursts.log" 2>&1 &
	local w=$!
	pids+=($w)
	sleep 4
	local t0 s0 t1 s1
	t0=$(ticks "$w")
	s0=$(sysmon "$w")
	sleep 5
	t1=$(ticks "$w")
	s1=$(sysmon "$w")
	wait "$w" || die "recording the bursts failed: $(tail -2 "$OUT/bursts.log")"
	awk -v a="$t0" -v b="$t1" -v c="$s0" -v d="$s1" -v hz="$hz" 'BEGIN {printf "%.0f %.0f\n", (b - a) * 1000 / hz / 5, (d - c) / 5}'
}

"$tmp/server" --goroutines "$N" --addr 127.0.0.1:18082 >"$OUT/server.log" 2>&1 &
spid=$!
pids+=($spid)
sleep 2
"$NEW" load --rate "$RATE/s" --duration "$((ROUNDS * 2 * 23 + 10))s" http://127.0.0.1:18082/order >"$OUT/load.log" 2>&1 &
pids+=($!)
sleep 3

server() { # server BIN: prints the profiler CPU of the cost line, seconds
	"$1" record -p "$spid" --duration 20s -o "$OUT/server.pb.gz" 2>"$OUT/server-record.log" ||
		die "recording the server failed: $(tail -2 "$OUT/server-record.log")"
	sed -n 's/.*profiler CPU \([0-9.]*\)\(m*s\).*/\1 \2/p' "$OUT/server-record.log" |
		awk '{print ($2 == "ms") ? $1 / 1000 : $1}'
}

echo "walkcost: BASE $BASE, NEW $NEW, $ROUNDS rounds; output in $OUT"
printf '%-5s %-4s %18s %20s %18s\n' round bin bursts_cpu_ms/s bursts_sysmon_wake/s server_cpu_s_in_20s | tee "$OUT/runs.txt"
for r in $(seq "$ROUNDS"); do
	order="BASE NEW"
	((r % 2 == 0)) && order="NEW BASE"
	for which in $order; do
		bin=$BASE
		[[ $which == NEW ]] && bin=$NEW
		read -r cpu wakes < <(bursts "$bin") || die "recording the bursts with $which failed: $(tail -2 "$OUT/bursts.log")"
		s=$(server "$bin")
		printf '%-5s %-4s %18s %20s %18s\n' "$r" "$which" "$cpu" "$wakes" "$s" | tee -a "$OUT/runs.txt"
	done
done
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for which in BASE NEW; do
	printf 'median %-4s %18s %20s %18s\n' "$which" \
		"$(awk -v w=$which '$2 == w {print $3}' "$OUT/runs.txt" | median)" \
		"$(awk -v w=$which '$2 == w {print $4}' "$OUT/runs.txt" | median)" \
		"$(awk -v w=$which '$2 == w {print $5}' "$OUT/runs.txt" | median)"
done
