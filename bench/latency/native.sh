#!/bin/bash
# native.sh: what timing a native function costs per call, wallprof latency
# beside bpftrace and bcc's funclatency (issue 16, BENCHMARKS.md).
#
#   sudo bench/latency/native.sh [ROUNDS] [CALLS]
#
# bench/latency/native/trivial.c calls trivial() (x + 1) CALLS times in a
# tight loop and prints ns per call; the target runs on CPU 1, the tracer on
# CPU 0. Each round runs, in a rotating order: no tracer; 'wallprof latency
# -p PID BIN:trivial' (a uprobe and a uretprobe); a bpftrace script with the
# same probes keeping a log2 histogram; funclatency-bpfcc (bpfcc-tools) when
# installed and able to run (bcc compiles its programs against the kernel's
# headers: "n/a" where there are none). Prints ns per call per round and
# the medians; the cost per call is (with - without).
set -euo pipefail
rounds=${1:-5}
calls=${2:-200000}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ $(id -u) == 0 ]] || { echo "native.sh: run as root" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/wallprof" ./cmd/wallprof)
cc -O2 -rdynamic -o "$tmp/trivial" "$root/bench/latency/native/trivial.c"
tools=(none wallprof bpftrace)
command -v bpftrace >/dev/null || tools=(none wallprof)
command -v funclatency-bpfcc >/dev/null && tools+=(funclatency)

# run TOOL: ns per call of the target under TOOL.
run() {
	local tool=$1
	if [[ $tool == none ]]; then
		taskset -c 1 "$tmp/trivial" "-$calls"
		return
	fi
	taskset -c 1 "$tmp/trivial" "$calls" >"$tmp/out" 2>"$tmp/target.err" &
	local pid=$! tr
	until grep -q ready "$tmp/target.err" 2>/dev/null; do sleep 0.02; done
	case $tool in
	wallprof) taskset -c 0 "$tmp/wallprof" latency -p "$pid" --json "$tmp/trivial:trivial" >"$tmp/tool.out" 2>"$tmp/tool.err" & ;;
	bpftrace) taskset -c 0 bpftrace -p "$pid" -e "uprobe:$tmp/trivial:trivial { @s[tid] = nsecs; } uretprobe:$tmp/trivial:trivial /@s[tid]/ { @h = hist(nsecs - @s[tid]); delete(@s[tid]); }" >"$tmp/tool.out" 2>"$tmp/tool.err" & ;;
	funclatency) taskset -c 0 funclatency-bpfcc -p "$pid" "$tmp/trivial:trivial" >"$tmp/tool.out" 2>"$tmp/tool.err" & ;;
	esac
	tr=$!
	# Attached: wallprof says "probes on", bpftrace "Attaching", bcc "Tracing".
	local attached=""
	for _ in $(seq 1200); do
		grep -qE "probes on|Attaching|Tracing" "$tmp/tool.out" "$tmp/tool.err" 2>/dev/null && { attached=1; break; }
		kill -0 "$tr" 2>/dev/null || break
		sleep 0.05
	done
	if [[ -z $attached ]]; then
		# It cannot run here (bcc without kernel headers): no figure.
		kill "$pid" "$tr" 2>/dev/null || true
		wait "$pid" "$tr" 2>/dev/null || true
		echo "$tool: did not attach: $(tail -1 "$tmp/tool.err")" >&2
		echo "n/a"
		return
	fi
	sleep 0.5
	kill -USR1 "$pid"
	wait "$pid"
	kill -INT "$tr" 2>/dev/null || true
	wait "$tr" 2>/dev/null || true
	cat "$tmp/out"
}

declare -A all
echo "round ${tools[*]}"
for r in $(seq "$rounds"); do
	line="$r"
	n=${#tools[@]}
	for k in $(seq 0 $((n - 1))); do
		t=${tools[$(((k + r) % n))]}
		v=$(run "$t")
		all[$t]+="$v "
	done
	for t in "${tools[@]}"; do line+=" $(echo ${all[$t]} | awk '{print $NF}')"; done
	echo "$line"
done
median() { printf '%s\n' $@ | grep -v n/a | sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "n/a")}'; }
echo -n "median"
for t in "${tools[@]}"; do echo -n " $t=$(median ${all[$t]})"; done
echo " (ns per call; $calls calls)"
