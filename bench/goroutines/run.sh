#!/usr/bin/env bash
# run.sh: the target's throughput and latency with no profiler, with wallprof
# and with fgprof, side by side, with 100 and with 10,000 parked goroutines.
# See README.md and RESULTS.md. Run as root (wallprof record needs it) from
# anywhere in the repository:
#
#   bench/goroutines/run.sh
#   ROUNDS=3 NS="10000" bench/goroutines/run.sh
#
# Environment: ROUNDS (5), NS ("100 10000"), CONFIGS ("none wallprof fgprof";
# also wallprof_nogv: wallprof record --goroutines off, no goroutine view),
# DURATION (8s, each load run), CONCURRENCY (16, closed model), OPEN_RATE
# (2000: requests/s of the open-model run, well below saturation on 2 CPUs;
# 0 skips the open model), HZ (99: wallprof's
# rate; fgprof's is fixed at 99 Hz), OUT (results/UTC-DATE beside this file).
#
# Each run is a fresh server process: start it, wait for "ready", 1 s of
# closed-model warm-up (not counted), then [wallprof record starts and
# prints its first line] the closed-model load, then the open-model load,
# then wallprof is sent SIGTERM (it writes its profile and its cost lines)
# and the server is stopped. Configurations are interleaved round by round
# (for each round, for each N: none, wallprof, fgprof). Nothing is pinned:
# the server, the load generator and wallprof share the machine's CPUs.
set -euo pipefail

die() { echo "run.sh: $*" >&2; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
ROUNDS=${ROUNDS:-5}
NS=${NS:-"100 10000"}
CONFIGS=${CONFIGS:-"none wallprof fgprof"}
DURATION=${DURATION:-8s}
CONCURRENCY=${CONCURRENCY:-16}
OPEN_RATE=${OPEN_RATE:-2000}
HZ=${HZ:-99}
OUT=${OUT:-$here/results/$(date -u +%Y%m%dT%H%M%SZ)}

[[ $(id -u) == 0 ]] || die "run as root: wallprof record needs it"
command -v go >/dev/null || die "go not found in PATH"
command -v python3 >/dev/null || die "python3 not found"

bin=$(mktemp -d /tmp/goroutinebench.XXXXXX)
scratch=$bin/scratch
mkdir -p "$OUT" "$scratch"
trap 'cleanup' EXIT
spid="" wpid=""
cleanup() {
	[[ -n $wpid ]] && kill -TERM "$wpid" 2>/dev/null || true
	[[ -n $spid ]] && kill -TERM "$spid" 2>/dev/null || true
	rm -rf "$bin"
}

# wallprof is built from the committed tree (HEAD, or WALLPROF_REV), not from
# the work tree, which may hold others' uncommitted edits.
rev=$(git -C "$root" rev-parse --short "${WALLPROF_REV:-HEAD}")
mkdir -p "$bin/src"
git -C "$root" archive "$rev" | tar -x -C "$bin/src"
(cd "$bin/src" && go build -o "$bin/wallprof" ./cmd/wallprof)
(cd "$here/server" && go build -o "$bin/server-plain" . && go build -tags fgprof -o "$bin/server-fgprof" .)
go tool nm "$bin/server-plain" >"$bin/plain.nm"
go tool nm "$bin/server-fgprof" >"$bin/fgprof.nm"
grep -q fgprof "$bin/plain.nm" && die "the plain server has fgprof code in it"
grep -q 'felixge/fgprof.Start' "$bin/fgprof.nm" || die "the fgprof server has no fgprof.Start"

wp=$bin/wallprof
{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "wallprof commit: $rev (built from git archive, without work-tree changes)"
	echo "go: $(go version)"
	echo "kernel: $(uname -r)"
	echo "cpus: $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'))"
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "ROUNDS=$ROUNDS NS=\"$NS\" CONFIGS=\"$CONFIGS\" DURATION=$DURATION CONCURRENCY=$CONCURRENCY OPEN_RATE=$OPEN_RATE HZ=$HZ"
} | tee "$OUT/meta.txt"

# start_server BUILD N TAG: starts the server, sets spid and port.
start_server() {
	local build=$1 n=$2 tag=$3 extra=()
	[[ $build == fgprof ]] && extra=(--fgprof-out "$scratch/$tag.fgprof.pprof")
	: >"$scratch/$tag.server.out"
	"$bin/server-$build" --goroutines "$n" "${extra[@]}" >"$scratch/$tag.server.out" 2>&1 &
	spid=$!
	for _ in $(seq 300); do
		grep -q '^ready' "$scratch/$tag.server.out" && break
		kill -0 "$spid" 2>/dev/null || die "server exited: $(cat "$scratch/$tag.server.out")"
		sleep 0.1
	done
	grep -q '^ready' "$scratch/$tag.server.out" || die "server not ready in 30s"
	port=$(awk '/^listening/{n=split($2,a,":"); print a[n]}' "$scratch/$tag.server.out")
}

stop_server() {
	kill -TERM "$spid"
	wait "$spid" || true
	spid=""
}

# secs DURATION: a Go duration like 8s as whole seconds.
secs() { local d=${1%s}; echo "${d%.*}"; }

# one_run CONFIG N ROUND RATE: one fresh server, the closed and (if RATE>0)
# the open load; appends to runs.tsv.
one_run() {
	local cfg=$1 n=$2 r=$3 rate=$4 tag="$1-$2-r$3" build=plain
	[[ $cfg == fgprof ]] && build=fgprof
	start_server "$build" "$n" "$tag"
	local url="http://127.0.0.1:$port/order"
	"$wp" load --concurrency "$CONCURRENCY" --duration 1s --json "$url" >/dev/null
	if [[ $cfg == wallprof* ]]; then
		local gv=auto
		[[ $cfg == wallprof_nogv ]] && gv=off
		local wdur=$(( 2 * $(secs "$DURATION") + 30 ))
		"$wp" record -F "$HZ" --goroutines "$gv" -p "$spid" --duration "${wdur}s" -o "$scratch/$tag.pb.gz" >"$OUT/$tag.wallprof.out" 2>&1 &
		wpid=$!
		for _ in $(seq 100); do
			grep -q 'recording process' "$OUT/$tag.wallprof.out" && break
			sleep 0.1
		done
		grep -q 'recording process' "$OUT/$tag.wallprof.out" || die "wallprof did not start: $(cat "$OUT/$tag.wallprof.out")"
		sleep 0.5
	fi
	"$wp" load --concurrency "$CONCURRENCY" --duration "$DURATION" --json "$url" >"$OUT/$tag.closed.json"
	if [[ $rate != 0 ]]; then
		"$wp" load --rate "$rate/s" --duration "$DURATION" --json "$url" >"$OUT/$tag.open.json"
	fi
	if [[ $cfg == wallprof* ]]; then
		kill -TERM "$wpid"
		wait "$wpid" || die "wallprof record failed: $(cat "$OUT/$tag.wallprof.out")"
		wpid=""
		[[ $cfg == wallprof_nogv ]] || grep -q 'goroutines (' "$OUT/$tag.wallprof.out" || die "wallprof recorded no goroutine view: $(cat "$OUT/$tag.wallprof.out")"
	fi
	stop_server
	cp "$scratch/$tag.server.out" "$OUT/$tag.server.out"
	if [[ $cfg == fgprof ]]; then
		local sz
		sz=$(stat -c %s "$scratch/$tag.fgprof.pprof" 2>/dev/null || echo 0)
		[[ $sz -gt 0 ]] || die "fgprof wrote an empty profile"
		echo "$sz" >"$OUT/$tag.fgprof-bytes"
	fi
	rm -f "$scratch/$tag".*
	printf '%s N=%s round %s: %s\n' "$cfg" "$n" "$r" \
		"$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); l=d["latency"]; print("%.0f/s p50 %.2fms p99 %.2fms max %.1fms" % (d["throughput"], l["p50_ns"]/1e6, l["p99_ns"]/1e6, l["max_ns"]/1e6))' "$OUT/$tag.closed.json")"
}

# The open model's rate is fixed (OPEN_RATE): 'wallprof load --rate' (vegeta's
# attacker) spends about 130 us of CPU per request on this 2-CPU machine, so a
# rate of 60% of the closed model's throughput would saturate the machine with
# the generator alone.
for r in $(seq "$ROUNDS"); do
	for n in $NS; do
		for cfg in $CONFIGS; do
			one_run "$cfg" "$n" "$r" "$OPEN_RATE"
		done
	done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"

python3 "$here/summarize.py" "$OUT" | tee "$OUT/summary.md"
