#!/bin/sh
# Regenerates the samples of other tools' output that the importers are
# tested on, by running the real tools on workload.c (one thread computes,
# one naps, the main thread joins them). Run as root from this directory,
# with perf, elfutils (eu-stack), gdb, percona-toolkit (pt-pmp) and gcc
# installed, then refresh the goldens:
#
#	sh generate.sh && go test ./internal/convert -run TestGolden -update
#
# Stacks, addresses and timings differ on every run.
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O1 -g -fno-omit-frame-pointer -pthread -o "$tmp/w" workload.c

# perf: on-CPU samples of one process (cpu-clock, 99 Hz).
perf record -q -F 99 -g -o "$tmp/cpu.data" -- "$tmp/w" 0.5
perf script -i "$tmp/cpu.data" >perf-cpu.txt

# perf: context switches recorded per process. perf records an event only in
# the context of a traced thread, so switch-ins from other processes are
# missing: the importer counts them as lost.
perf record -q -e sched:sched_switch -g -o "$tmp/sched.data" -- "$tmp/w" 0.1
perf script -i "$tmp/sched.data" >perf-sched.txt

# perf: system-wide on-CPU samples and context switches (the wall-clock
# recipe), kept to the events of the workload's threads: their own events
# and the switches into them. Other processes' threads thus show their
# switch-outs into the workload but not their switch-ins; the test converts
# this sample with the workload's PID as filter.
perf record -q -a -e cpu-clock/period=10000000/ -e sched:sched_switch -g -o "$tmp/wall.data" -- "$tmp/w" 0.3
perf script -i "$tmp/wall.data" -F comm,pid,tid,cpu,time,period,event,trace,ip,sym,dso >"$tmp/wall.txt" 2>/dev/null
awk -v RS= -v ORS='\n\n' '
	NR == FNR { split($2, id, "/"); if ($1 == "w") pids[id[1]] = 1; if (id[1] in pids) tids[id[2]] = 1; next }
	{ split($2, id, "/"); keep = id[1] in pids
	  if (match($0, /next_pid=[0-9]+/) && (substr($0, RSTART + 9, RLENGTH - 9) in tids)) keep = 1
	  if (keep) print }' "$tmp/wall.txt" "$tmp/wall.txt" >perf-wall.txt

# Snapshot tools on a running workload.
"$tmp/w" 20 &
pid=$!
sleep 0.5
{ eu-stack -p $pid; sleep 0.1; eu-stack -p $pid; sleep 0.1; eu-stack -p $pid; } >eustack.txt
{ eu-stack -i -s -m -v -p $pid; } >eustack-verbose.txt
{ gdb -p $pid -batch -ex 'thread apply all bt'; gdb -p $pid -batch -ex 'thread apply all bt'; } >gdb.txt 2>/dev/null
pt-pmp -p $pid -i 3 -s 0.1 >ptpmp.txt 2>/dev/null
kill $pid
wait $pid 2>/dev/null || true

# Collapsed stacks, as wallprof record writes them (nanoseconds).
if (cd ../../.. && go run ./cmd/wallprof record -q --format collapsed -o "$tmp/w.folded" -- "$tmp/w" 0.3); then
	cp "$tmp/w.folded" wallprof.folded
else
	echo "generate.sh: wallprof did not build or record: wallprof.folded is left as it was" >&2
fi
