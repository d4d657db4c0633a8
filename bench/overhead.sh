#!/usr/bin/env bash
# overhead.sh: what does recording cost the workload? See bench/README.md.
#
# Builds the bench workloads and wallprof into bench/.bin, then runs
# bench/cmd/overhead, which interleaves the configurations round by round and
# prints a table of medians. Run as root from anywhere in the repository:
#
#   sudo bench/overhead.sh                       # the default configurations, 5 rounds
#   ROUNDS=2 CONFIGS=none,perf-99,perf-sched,bpftrace bench/overhead.sh
#
# Environment: ROUNDS (5), CONFIGS (default: none,wallprof-99,wallprof-999,
# wallprof-99-nostats,perf-99,perf-999,timer-999,perf-sched,bpftrace, and the
# wallprof-base-99 and -nostats when WALLPROF_BASE is set; the others run when named),
# WORKLOADS
# (pingpong-pinned,pingpong,cpubound; also flood (two ping-pong pairs and a
# thread spawner: ~1M switches/s, tens of thousands of threads/s), stockfish, Debian's, timed by
# bench/cmd/timeit; NAME-pin2 runs the workload on CPU 0 and the profiler
# on CPU 1; NAME-pinned runs the whole command
# under taskset -c 0, NAME-pinw only the workload), PINGPONG_ITERS (100000),
# PINGPONG_PINNED_ITERS (1000000), PINGPONG150K_ITERS (200000), CPUBOUND_ITERS (1000000000), FLOOD_ITERS
# (400000), COUNT (a perf
# event, e.g. instructions, counted over every run with perf stat), OUT (a new
# temp dir).
set -euo pipefail

die() { echo "overhead.sh: $*" >&2; exit 1; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bin=bench/.bin
[[ $(id -u) == 0 ]] || die "run as root: perf, bpftrace and wallprof need it"
command -v gcc >/dev/null || die "gcc not found: apt-get install -y gcc"
command -v go >/dev/null || die "go not found in PATH"

# perf's and bpftrace's tracepoints need tracefs.
if ! mountpoint -q /sys/kernel/tracing; then
	mount -t tracefs nodev /sys/kernel/tracing || die "cannot mount tracefs on /sys/kernel/tracing"
fi

mkdir -p "$bin"
cflags=(-O2 -g -fno-omit-frame-pointer)
gcc "${cflags[@]}" -pthread -o "$bin/pingpong" testdata/workloads/pingpong/pingpong.c
gcc "${cflags[@]}" -o "$bin/cpubound" testdata/workloads/cpubound/cpubound.c
gcc "${cflags[@]}" -pthread -o "$bin/flood" testdata/workloads/flood/flood.c

# wallprof is needed only by the wallprof-* configurations.
configs=${CONFIGS:-default}
if [[ $configs == default || $configs == *wallprof* || $configs == *attach* || $configs == *top* || $configs == *agent* ]]; then
	if ! go build -o "$bin/wallprof" ./cmd/wallprof 2>"$bin/wallprof-build.log"; then
		cat "$bin/wallprof-build.log" >&2
		die "wallprof does not build (see above; cmd/wallprof may not exist yet).
Run without it: CONFIGS=none,perf-99,perf-sched,bpftrace $0"
	fi
fi

go build -o "$bin/overhead" ./bench/cmd/overhead
go build -o "$bin/timerfloor" ./bench/cmd/timerfloor
go build -o "$bin/timeit" ./bench/cmd/timeit
exec "$bin/overhead" -bin "$bin" -offcpu bench/offcpu.bt ${OUT:+-out "$OUT"} "$@"
