#!/usr/bin/env bash
# bench/samplecost.sh: what one on-CPU timer sample costs in BPF, build
# against build, paired in the same seconds (issue 20: at -F 999 a sample's
# BPF time is the target's slowdown over the bare timers; wall time cannot
# resolve 0.3 point on this shared 2-CPU VM, and one build's run time moves
# by +-25% from one recording to the next as the host's caches do).
#
# Both builds record the same CPU-bound loop (pinned to CPU 0, five frames
# unwound in the kernel) at once, at FREQ Hz, with the kernel's BPF
# statistics on; each build's on_cpu_sample is told apart by its program
# tag, and its run time over its run count is read with bpftool over the
# same SECONDS of every round. Rounds alternate which build starts first.
# Prints each round's us per run and B/A, then the median ratio and how
# many rounds B was cheaper.
#
# As root, from anywhere in the repository:
#   bench/samplecost.sh OLD_WALLPROF NEW_WALLPROF
#   git stash; go build -o /tmp/a ./cmd/wallprof; git stash pop
#   go build -o /tmp/b ./cmd/wallprof; bench/samplecost.sh /tmp/a /tmp/b
# Variables: ROUNDS (6), FREQ (999), SECONDS_ (5). Needs bpftool (Debian's
# bpftool package) and gcc.
set -euo pipefail

die() { echo "samplecost.sh: $*" >&2; exit 1; }

[ $# = 2 ] || die "usage: samplecost.sh WALLPROF_A WALLPROF_B"
A=$(readlink -f "$1")
B=$(readlink -f "$2")
[ -x "$A" ] && [ -x "$B" ] || die "both arguments must be wallprof binaries"
[ "$(id -u)" = 0 ] || die "run as root (BPF and the kernel's BPF statistics)"
command -v bpftool > /dev/null || die "bpftool is not installed (apt-get install bpftool)"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
ROUNDS=${ROUNDS:-6}
FREQ=${FREQ:-999}
SECS=${SECONDS_:-5}
work=$(mktemp -d)
trap 'pkill -P $$ 2> /dev/null || true; rm -rf "$work"' EXIT
gcc -O2 -g -fno-omit-frame-pointer -o "$work/loop" "$root/testdata/workloads/cpubound/cpubound.c"

# stats prints "tag run_time_ns run_cnt" for each on_cpu_sample loaded.
stats() {
	bpftool prog show 2> /dev/null | awk '/name on_cpu_sample/ {
		for (i = 1; i <= NF; i++) { if ($i == "tag") t = $(i+1); if ($i == "run_time_ns") r = $(i+1); if ($i == "run_cnt") c = $(i+1) }
		print t, r, c }'
}

# tag_of records the loop briefly with build $1 and prints its program's tag.
tag_of() {
	taskset -c 0 "$work/loop" --iters 4000000000 > /dev/null 2>&1 &
	local w=$!
	"$1" record -F "$FREQ" -p "$w" --duration 2s -o "$work/t.pb.gz" > "$work/t.log" 2>&1 &
	local r=$!
	sleep 1.5
	stats | awk '{print $1}' | head -1
	wait "$r" || true
	kill "$w" 2> /dev/null || true
	wait "$w" 2> /dev/null || true
}
ta=$(tag_of "$A")
tb=$(tag_of "$B")
[ -n "$ta" ] && [ -n "$tb" ] || die "could not read the programs' tags (is the kernel's BPF available?)"
[ "$ta" != "$tb" ] || die "both builds load the same program (tag $ta): nothing to compare"
echo "A $A (tag $ta)"
echo "B $B (tag $tb)"

ratios=()
for round in $(seq "$ROUNDS"); do
	first=$A second=$B
	if [ $((round % 2)) = 0 ]; then first=$B second=$A; fi
	taskset -c 0 "$work/loop" --iters 40000000000 > /dev/null 2>&1 &
	w=$!
	sleep 0.3
	taskset -c 1 "$first" record -F "$FREQ" --bpf-stats full -p "$w" --duration $((SECS + 3))s -o "$work/1.pb.gz" > "$work/1.log" 2>&1 &
	r1=$!
	taskset -c 1 "$second" record -F "$FREQ" --bpf-stats full -p "$w" --duration $((SECS + 3))s -o "$work/2.pb.gz" > "$work/2.log" 2>&1 &
	r2=$!
	sleep 1.5
	s0=$(stats)
	sleep "$SECS"
	s1=$(stats)
	wait "$r1" "$r2" || die "a recording failed: $(tail -2 "$work/1.log" "$work/2.log")"
	kill "$w" 2> /dev/null || true
	wait "$w" 2> /dev/null || true
	line=$(printf '%s\n--\n%s\n' "$s0" "$s1" | awk -v ta="$ta" -v tb="$tb" '
		$1 == "--" { second = 1; next }
		!second { r0[$1] = $2; c0[$1] = $3; next }
		{ us[$1] = ($2 - r0[$1]) / ($3 - c0[$1]) / 1000; n[$1] = $3 - c0[$1] }
		END { printf "%.3f %.3f %.4f %d %d", us[ta], us[tb], us[tb] / us[ta], n[ta], n[tb] }')
	read -r ua ub ratio na nb <<< "$line"
	echo "round $round: A ${ua} us/run ($na runs), B ${ub} us/run ($nb runs), B/A $ratio"
	ratios+=("$ratio")
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1; if ($1 < 1) below++ }
	END { m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
	      printf "median B/A %.3f over %d rounds; B cheaper in %d\n", m, NR, below }'
