#!/usr/bin/env bash
# bench/goroutines/pinned.sh: what the goroutine view costs the server
# itself (issue 20, point 3), apart from what sharing a CPU with the load
# generator costs it.
#
# The server (server/, --goroutines N parked goroutines) runs on CPU 0; the
# load generator (wallprof load: vegeta's attacker, a constant RATE) and
# the profiler run on CPU 1. Each round runs every configuration on a fresh
# server, in an order that rotates from round to round:
#   none            nothing but the load
#   wallprof        wallprof record -F HZ -p PID (goroutine view on: the default)
#   wallprof_nogv   the same with --goroutines off
#   wallprof_base   the same as wallprof with another build, WALLPROF_BASE
#   burner          a plain CPU burner on CPU 1 at BURN (0.02: 2%) in 0.5 ms bursts
# and measures, over DURATION of load after a warm-up:
#   - the client's p50/p99 (wallprof load's HDR histogram of every request);
#   - the server's own handler time per request (server/ /stats: from the
#     handler's first line to its response written), p50/p99;
#   - the server's CPU time per request (getrusage, user + system).
# summarize-pinned.py then gives, per configuration, the median of the
# per-round ratios to the same round's none run, a bootstrap 95% interval
# and the rounds above 1.
#
# As root, from anywhere in the repository:
#   ROUNDS=18 bench/goroutines/pinned.sh
# Variables: ROUNDS (18), N (10000), RATE (1000), DURATION (10s), HZ (99),
# CONFIGS ("none wallprof wallprof_nogv burner"), BURN (0.02), OUT,
# WALLPROF_BASE (for wallprof_base).
set -euo pipefail

die() { echo "pinned.sh: $*" >&2; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
ROUNDS=${ROUNDS:-18}
N=${N:-10000}
RATE=${RATE:-1000}
DURATION=${DURATION:-10s}
HZ=${HZ:-99}
CONFIGS=${CONFIGS:-"none wallprof wallprof_nogv burner"}
BURN=${BURN:-0.02}
OUT=${OUT:-$here/results/pinned-$(date -u +%Y%m%dT%H%M%SZ)}

[[ $(id -u) == 0 ]] || die "run as root: wallprof record needs it"
[[ $(nproc) -ge 2 ]] || die "needs two CPUs (server on 0, load and profiler on 1)"
command -v taskset >/dev/null || die "taskset not found (util-linux)"

bin=$(mktemp -d /tmp/pinnedbench.XXXXXX)
mkdir -p "$OUT"
spid="" xpid=""
cleanup() {
	[[ -n $xpid ]] && kill -TERM "$xpid" 2>/dev/null || true
	[[ -n $spid ]] && kill -TERM "$spid" 2>/dev/null || true
	rm -rf "$bin"
}
trap cleanup EXIT

rev=$(git -C "$root" rev-parse --short HEAD)
mkdir -p "$bin/src"
git -C "$root" archive "$rev" | tar -x -C "$bin/src"
(cd "$bin/src" && go build -o "$bin/wallprof" ./cmd/wallprof)
if [[ $CONFIGS == *wallprof_base* ]]; then
	[[ -x ${WALLPROF_BASE:-} ]] || die "wallprof_base needs WALLPROF_BASE, another wallprof build"
	cp "$WALLPROF_BASE" "$bin/wallprof-base"
fi
(cd "$here/server" && go build -o "$bin/server" . && go build -o "$bin/burner" ./burner)
wp=$bin/wallprof
{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "wallprof commit: $rev"
	echo "kernel: $(uname -r); cpus: $(nproc)"
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "ROUNDS=$ROUNDS N=$N RATE=$RATE DURATION=$DURATION HZ=$HZ CONFIGS=\"$CONFIGS\" BURN=$BURN"
} | tee "$OUT/meta.txt"

stats() { curl -sf "http://127.0.0.1:$port/stats$1"; }

one_run() {
	local cfg=$1 r=$2 tag="$1-r$2"
	: >"$bin/server.out"
	taskset -c 0 "$bin/server" --goroutines "$N" >"$bin/server.out" 2>&1 &
	spid=$!
	for _ in $(seq 300); do
		grep -q '^ready' "$bin/server.out" && break
		sleep 0.1
	done
	grep -q '^ready' "$bin/server.out" || die "server not ready: $(cat "$bin/server.out")"
	port=$(awk '/^listening/{n=split($2,a,":"); print a[n]}' "$bin/server.out")
	local url="http://127.0.0.1:$port/order"
	taskset -c 1 "$wp" load --rate "$RATE/s" --duration 2s --json "$url" >/dev/null
	case $cfg in
	wallprof | wallprof_nogv | wallprof_base)
		local gv=auto rec=$wp
		[[ $cfg == wallprof_nogv ]] && gv=off
		[[ $cfg == wallprof_base ]] && rec=$bin/wallprof-base
		taskset -c 1 "$rec" record -F "$HZ" --goroutines "$gv" -p "$spid" -o "$bin/$tag.pb.gz" >"$OUT/$tag.wallprof.out" 2>&1 &
		xpid=$!
		for _ in $(seq 100); do
			grep -q 'recording process' "$OUT/$tag.wallprof.out" && break
			sleep 0.1
		done
		grep -q 'recording process' "$OUT/$tag.wallprof.out" || die "wallprof did not start: $(cat "$OUT/$tag.wallprof.out")"
		sleep 1 # the goroutine view's first reads
		;;
	burner)
		taskset -c 1 "$bin/burner" --share "$BURN" &
		xpid=$!
		sleep 1
		;;
	none) sleep 1 ;;
	*) die "unknown configuration $cfg" ;;
	esac
	local before after
	before=$(stats '?reset=1')
	taskset -c 1 "$wp" load --rate "$RATE/s" --duration "$DURATION" --json "$url" >"$OUT/$tag.load.json"
	after=$(stats '?reset=1')
	if [[ -n $xpid ]]; then
		kill -TERM "$xpid"
		wait "$xpid" || die "$cfg failed: $(cat "$OUT/$tag.wallprof.out" 2>/dev/null)"
		xpid=""
		[[ $cfg == wallprof ]] && { grep -q 'goroutines (' "$OUT/$tag.wallprof.out" || die "no goroutine view: $(cat "$OUT/$tag.wallprof.out")"; }
	fi
	kill -TERM "$spid"
	wait "$spid" || true
	spid=""
	python3 - "$cfg" "$r" "$OUT/$tag.load.json" "$before" "$after" >>"$OUT/runs.tsv" <<'PY'
import json, sys
cfg, r, load, before, after = sys.argv[1:6]
d = json.load(open(load)); b = json.loads(before); a = json.loads(after)
l = d["latency"]
n = a["count"]
print("\t".join(str(x) for x in [cfg, r, l["p50_ns"], l["p99_ns"], a["p50_ns"], a["p99_ns"], n,
      (a["cpu_ns"] - b["cpu_ns"]) / max(n, 1), d.get("success", d.get("success_ratio", ""))]))
PY
	tail -1 "$OUT/runs.tsv"
}

printf 'config\tround\tclient_p50_ns\tclient_p99_ns\tserver_p50_ns\tserver_p99_ns\trequests\tserver_cpu_ns_per_req\tsuccess\n' >"$OUT/runs.tsv"
read -r -a cfgs <<<"$CONFIGS"
for r in $(seq "$ROUNDS"); do
	k=${#cfgs[@]}
	for i in $(seq 0 $((k - 1))); do
		one_run "${cfgs[$(((i + r) % k))]}" "$r"
	done
done
python3 "$here/summarize-pinned.py" "$OUT/runs.tsv" | tee "$OUT/summary.md"
