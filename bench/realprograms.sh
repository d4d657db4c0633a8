#!/usr/bin/env bash
# realprograms.sh: programs nobody here wrote, under steady load, recorded
# by `perf record -g -F 99` and then by wallprof (TOGETHER=1: at the same
# time, as before session 13: each tool's samples then catch the waits the
# other's sampling program causes on another CPU); prints, for each,
# the share of on-CPU time whose leaf is a kernel waiting function (sleep,
# poll, futex, disk, interrupt exit, scheduler) and the top leaves. perf
# credits each timer period to where the CPU was; wallprof must not show
# more on-CPU time on waiting functions than perf, plus a point.
#
#   sudo bench/realprograms.sh              # redis-server + redis-benchmark, caddy + hey, ripgrep on a cold cache
#   sudo F=999 PROGRAMS=redis bench/realprograms.sh
#   sudo WALLPROF=/path/to/an/older/wallprof bench/realprograms.sh   # the same with another build
#
# Installs redis-server, redis-tools, caddy, hey and ripgrep from Debian if
# they are missing. Load goes to 127.0.0.1 only and stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
F=${F:-99}
SECONDS_REC=${SECONDS_REC:-5}
TOGETHER=${TOGETHER:-0}
PROGRAMS=${PROGRAMS:-redis,caddy,ripgrep}
OUT=${OUT:-$(mktemp -d /tmp/realprograms.XXXXXX)}

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-benchmark >/dev/null || need+=(redis-tools)
command -v caddy >/dev/null || need+=(caddy)
command -v hey >/dev/null || need+=(hey)
command -v rg >/dev/null || need+=(ripgrep)
command -v perf >/dev/null || need+=(linux-perf)
if [ "${#need[@]}" -gt 0 ]; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
mkdir -p bench/.bin
go build -o bench/.bin/waitleaf ./bench/cmd/waitleaf
# WALLPROF=path records with another build (an older commit, to compare).
WP=${WALLPROF:-bench/.bin/wallprof}
if [ -z "${WALLPROF:-}" ]; then
	CGO_ENABLED=0 go build -o bench/.bin/wallprof ./cmd/wallprof
fi

# PERF_SCOPE=cpu (the default) has perf sample every CPU (-a, kept to the
# target's samples by wallprof convert --pid), with per-CPU timers as
# wallprof does; PERF_SCOPE=task attaches perf to the process (-p), whose
# per-task timers restart when a thread is switched in, so their samples
# crowd where threads resume (finish_task_switch).
PERF_SCOPE=${PERF_SCOPE:-cpu}

# record NAME PID: perf, then wallprof (TOGETHER=1: both at once), on PID for
# SECONDS_REC each.
record() {
	local name=$1 pid=$2 scope=(-a)
	[ "$PERF_SCOPE" = task ] && scope=(-p "$pid")
	perf record -q -F "$F" -g "${scope[@]}" -o "$OUT/$name.perf" -- sleep "$SECONDS_REC" >/dev/null 2>&1 &
	local perfpid=$!
	[ "$TOGETHER" = 1 ] || wait "$perfpid" || true
	$WP record -q -F "$F" -p "$pid" --duration "${SECONDS_REC}s" -o "$OUT/$name.pb.gz"
	wait "$perfpid" || true
	perf script -F comm,pid,tid,time,period,event,ip,sym,dso -i "$OUT/$name.perf" >"$OUT/$name.perf.txt" 2>/dev/null
	$WP convert -q --pid "$pid" "$OUT/$name.perf.txt" -o "$OUT/$name.perf.pb.gz"
	local when="one after the other"
	[ "$TOGETHER" = 1 ] && when="at once"
	echo "== $name (pid $pid, -F $F, ${SECONDS_REC}s, perf scope $PERF_SCOPE, $when)"
	bench/.bin/waitleaf -pid "$pid" "wallprof=$OUT/$name.pb.gz" "perf=$OUT/$name.perf.pb.gz"
}

if [[ ,$PROGRAMS, == *,redis,* ]]; then
	redis-server --port 6399 --bind 127.0.0.1 --save '' --appendonly no --daemonize no >/dev/null &
	rpid=$!
	sleep 0.5
	redis-benchmark -h 127.0.0.1 -p 6399 -n 100000000 -c 16 -q >/dev/null 2>&1 &
	bpid=$!
	sleep 1
	record redis "$rpid"
	kill "$bpid" "$rpid" 2>/dev/null || true
	wait "$bpid" "$rpid" 2>/dev/null || true
fi

if [[ ,$PROGRAMS, == *,caddy,* ]]; then
	mkdir -p "$OUT/www"
	head -c 4096 /dev/urandom | base64 >"$OUT/www/index.html"
	caddy file-server --listen 127.0.0.1:8089 --root "$OUT/www" >/dev/null 2>&1 &
	cpid=$!
	sleep 1
	hey -z $((SECONDS_REC * (2 - TOGETHER) + 3))s -c 8 http://127.0.0.1:8089/index.html >/dev/null 2>&1 &
	hpid=$!
	sleep 1
	record caddy "$cpid"
	wait "$hpid" || true
	kill "$cpid" 2>/dev/null || true
	wait "$cpid" 2>/dev/null || true
fi

if [[ ,$PROGRAMS, == *,ripgrep,* ]]; then
	sync
	echo 3 >/proc/sys/vm/drop_caches
	# A launched command: both tools record it from its start.
	perf record -q -F "$F" -g -o "$OUT/rg.perf" -- rg -c --no-messages zzzqqq /usr >/dev/null 2>&1 || true
	perf script -F comm,pid,tid,time,period,event,ip,sym,dso -i "$OUT/rg.perf" >"$OUT/rg.perf.txt" 2>/dev/null
	$WP convert -q "$OUT/rg.perf.txt" -o "$OUT/rg.perf.pb.gz"
	sync
	echo 3 >/proc/sys/vm/drop_caches
	$WP record -q -F "$F" -o "$OUT/rg.pb.gz" -- rg -c --no-messages zzzqqq /usr >/dev/null || true
	echo "== ripgrep on a cold cache (-F $F; two runs, one per tool)"
	bench/.bin/waitleaf "wallprof=$OUT/rg.pb.gz" "perf=$OUT/rg.perf.pb.gz"
fi
echo "profiles in $OUT"
