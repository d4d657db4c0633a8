#!/usr/bin/env bash
# unwind.sh: what the in-kernel unwinder costs (issue 15, BENCHMARKS.md).
#
#   sudo bench/unwind.sh
#
# 1. BPF time per timer sample: Debian's stockfish bench (stripped, no frame
#    pointers) recorded at -F 999, with the .eh_frame tables (the default) and
#    with WALLPROF_UNWIND=fp (bpf_get_stack's frame-pointer walk), ROUNDS
#    rounds each, interleaved; kernel.bpf_stats_enabled gives the run time
#    and run count of the timer's program (on_cpu_sample).
# 2. Table memory for a process that maps LIBS (50) shared libraries: the
#    rows wallprof loads (8 bytes each) and its peak RSS, beside the bytes
#    perf --call-graph dwarf writes per second at the same rate.
#
# PARTS=time or PARTS=memory runs one part alone.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[[ $(id -u) == 0 ]] || { echo "unwind.sh: run as root" >&2; exit 1; }
ROUNDS=${ROUNDS:-5}
LIBS=${LIBS:-50}
PARTS=${PARTS:-time,memory}
bin=bench/.bin
mkdir -p "$bin"
go build -o "$bin/wallprof" ./cmd/wallprof
gcc -O2 -o "$bin/libs" bench/unwind/libs.c -ldl
out=$(mktemp -d)
sf=(/usr/games/stockfish bench 16 1 13)
[[ -x ${sf[0]} ]] || { echo "unwind.sh: apt-get install stockfish" >&2; exit 1; }

old_stats=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled=$old_stats' EXIT
sysctl -qw kernel.bpf_stats_enabled=1

# prog_stats NAME: "run_time_ns run_cnt" of the loaded program NAME, summed.
prog_stats() {
	bpftool prog show --json | python3 -c '
import json, sys
t = c = 0
for p in json.load(sys.stdin):
    if p.get("name") == sys.argv[1]:
        t += p.get("run_time_ns", 0); c += p.get("run_cnt", 0)
print(t, c)' "$1"
}

# record_once MODE: records stockfish, samples the timer program's counters
# until wallprof exits, prints "ns_per_run runs".
record_once() {
	local env=()
	[[ $1 == fp ]] && env=(WALLPROF_UNWIND=fp)
	env "${env[@]}" "$bin/wallprof" record -F 999 --bpf-stats off -o "$out/sf-$1.pb.gz" -- "${sf[@]}" >/dev/null 2>"$out/sf-$1.err" &
	local pid=$! last="0 0" s
	while kill -0 $pid 2>/dev/null; do
		s=$(prog_stats on_cpu_sample)
		[[ $s != "0 0" ]] && last=$s
		sleep 0.1
	done
	wait $pid
	read -r t c <<<"$last"
	echo "$(( c > 0 ? t / c : 0 )) $c"
}

if [[ $PARTS == *time* ]]; then
echo "== BPF time per timer sample, stockfish at -F 999 ($ROUNDS rounds)"
dw=() fp=()
for r in $(seq "$ROUNDS"); do
	a=$(record_once dwarf); b=$(record_once fp)
	dw+=("${a%% *}"); fp+=("${b%% *}")
	echo "round $r: .eh_frame ${a%% *} ns/sample (${a##* } samples), frame pointers ${b%% *} ns/sample (${b##* } samples)"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median: .eh_frame $(median "${dw[@]}") ns, frame pointers $(median "${fp[@]}") ns per timer sample"
grep -h 'unwound' "$out/sf-dwarf.err" | head -1
fi

if [[ $PARTS == *memory* ]]; then
echo "== table memory, a process with $LIBS shared libraries"
# Distinct files (a soname and its full name are one file), in name order.
mapfile -t libs < <(ls /usr/lib/x86_64-linux-gnu/lib*.so.[0-9]* 2>/dev/null | grep -v -E 'libc\.so|ld-linux|libpthread|libdl|libasan|libtsan|liblsan|libubsan|libhwasan|libmemusage|libSegFault|libpcprofile' | xargs -r realpath | awk '!seen[$0]++' | head -n $((LIBS * 3)))
"$bin/libs" 0 "${libs[@]}" 2>"$out/probe.err" || true
/usr/bin/time -f "wallprof peak RSS %M KB" "$bin/wallprof" record -F 999 -o "$out/libs.pb.gz" -- "$bin/libs" 3 "${libs[@]:0:$LIBS}" 2>&1 >/dev/null | grep -E 'libs: loaded|unwound|peak RSS' || true
perf record -q --call-graph dwarf -F 999 -o "$out/perf.data" -- "$bin/libs" 3 "${libs[@]:0:$LIBS}" 2>/dev/null >/dev/null || true
echo "perf --call-graph dwarf -F 999: $(stat -c %s "$out/perf.data") bytes written for 3 s"
fi
rm -rf "$out"
