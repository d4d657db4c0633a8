#!/usr/bin/env bash
# bench/irqcost/run.sh: what a sample costs the interrupted program, tool
# against tool, measured by the kernel in the same seconds (issue 20: at
# -F 999 wall time on this shared 2-CPU VM cannot resolve 0.3 point).
#
# A CPU-bound loop runs pinned to CPU 0 (cpubound, five frames). On CPU 1,
# at once and for the same seconds: timerfloor (the cpu-clock timers alone,
# nothing attached: the floor), timerfloor -bpf (an empty program on them),
# wallprof record -F FREQ -p LOOP and perf record -F FREQ -g -p LOOP. irqcost
# times every cpu-clock hrtimer callback on CPU 0 (hrtimer_expire_entry to
# _exit) by the comm of the process that opened its event, every INTERVAL,
# and prints each tool's callbacks a second, its ns per callback and its
# cost above the floor in % of the CPU (rate x (ns - floor's ns)), each a
# median of the intervals' paired values. The interrupt's entry and exit
# (the same for every tool) and what a sample leaves in the caches are not
# in these figures; see BENCHMARKS.md.
#
# As root, from anywhere in the repository:
#   bench/irqcost/run.sh
#   WALLPROF=/tmp/old-wallprof WALLPROF_B=/tmp/new-wallprof N=20 bench/irqcost/run.sh
# Variables: WALLPROF (go build ./cmd/wallprof), WALLPROF_B (a second
# build, recorded at the same time as "wallprof-b": build against build),
# MORE (more builds, space-separated: wallprof-c, -d, ...), FREQ (999), N (12
# intervals), INTERVAL (2s), PERF_ARGS (extra arguments for perf record,
# e.g. "-a" to sample the CPU rather than the process), DEPTH (0: the
# loop's own five frames; N: the loop under N more frames, loop/deep.c).
# Needs clang, bpftool and libbpf-dev (to build the probe), gcc and perf.
set -euo pipefail

die() { echo "irqcost/run.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (BPF and perf events on every task)"
for t in clang bpftool gcc perf go; do
	command -v $t > /dev/null || die "$t is not installed (apt-get install clang bpftool libbpf-dev gcc linux-perf)"
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
FREQ=${FREQ:-999}
N=${N:-12}
INTERVAL=${INTERVAL:-2s}
work=$(mktemp -d)
trap 'pkill -P $$ 2> /dev/null || true; rm -rf "$work"' EXIT

bpftool btf dump file /sys/kernel/btf/vmlinux format c > "$work/vmlinux.h"
clang -O2 -g -target bpf -mcpu=v3 -I"$work" -I/usr/include/x86_64-linux-gnu -c "$here/bpf/irqcost.bpf.c" -o "$work/irqcost.bpf.o"
(cd "$root" && go build -o "$work/irqcost" ./bench/irqcost && go build -o "$work/timerfloor" ./bench/cmd/timerfloor)
# The second floor under its own name: irqcost tells tools apart by comm.
cp "$work/timerfloor" "$work/floor-bpf"
if [ -n "${WALLPROF:-}" ]; then
	cp "$(readlink -f "$WALLPROF")" "$work/wallprof"
else
	(cd "$root" && go build -o "$work/wallprof" ./cmd/wallprof)
fi
# More builds, each under its own name (irqcost tells tools apart by comm).
extra=()
letters=(b c d e f g h)
i=0
for b in ${WALLPROF_B:-} ${MORE:-}; do
	[ $i -lt ${#letters[@]} ] || die "at most ${#letters[@]} builds beside WALLPROF"
	name=wallprof-${letters[i]}
	cp "$(readlink -f "$b")" "$work/$name"
	extra+=("$name")
	i=$((i + 1))
done
gcc -O2 -g -fno-omit-frame-pointer -o "$work/loop" "$here/loop/deep.c"

secs=$(( $(echo "$INTERVAL" | tr -dc 0-9) * (N + 3) ))
taskset -c 0 "$work/loop" "${DEPTH:-0}" &
loop=$!
sleep 0.3
taskset -c 1 "$work/timerfloor" -F "$FREQ" -cpus 0 -- sleep "$((secs + 2))" &
taskset -c 1 "$work/floor-bpf" -F "$FREQ" -bpf -cpus 0 -- sleep "$((secs + 2))" &
taskset -c 1 "$work/wallprof" record -F "$FREQ" -p "$loop" --duration "${secs}s" -o "$work/w.wprof" > "$work/wallprof.log" 2>&1 &
for name in "${extra[@]}"; do
	taskset -c 1 "$work/$name" record -F "$FREQ" -p "$loop" --duration "${secs}s" -o "$work/$name.wprof" > "$work/$name.log" 2>&1 &
done
taskset -c 1 perf record -F "$FREQ" -g ${PERF_ARGS:--p "$loop"} -o "$work/perf.data" -- sleep "$secs" > "$work/perf.log" 2>&1 &
sleep 3
echo "# loop pid $loop on CPU 0, depth ${DEPTH:-0}; FREQ=$FREQ; perf record -F $FREQ -g ${PERF_ARGS:--p PID}"
taskset -c 1 "$work/irqcost" -cpu 0 -n "$N" -interval "$INTERVAL" -floor timerfloor "$work/irqcost.bpf.o"
wait "$(jobs -p | tail -1)" 2> /dev/null || true
