#!/bin/bash
# bench/walktimer/run.sh: the probe of doc/walk-timer.md. Builds the BPF
# object (clang, bpftool, libbpf-dev), starts bench/idlethreads.py with
# THREADS idle threads (200), and walks its threads from a BPF timer every
# 1.26 ms for 4 s: prints the timer's firings, the threads visited per firing
# and the callback's mean time. Needs root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bpftool btf dump file /sys/kernel/btf/vmlinux format c > "$work/vmlinux.h"
clang -O2 -g -target bpf -mcpu=v3 -I"$work" -I/usr/include/x86_64-linux-gnu -c "$here/bpf/walktimer.bpf.c" -o "$work/walktimer.bpf.o"
(cd "$root" && go build -o "$work/walktimer" ./bench/walktimer)
THREADS=${THREADS:-200} SECONDS=8 python3 "$root/bench/idlethreads.py" &
target=$!
sleep 1
"$work/walktimer" "$work/walktimer.bpf.o" "$target"
wait "$target"
