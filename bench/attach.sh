#!/bin/sh
# attach.sh: run a workload with a wallprof command attached to it by PID
# (-p), as a user attaches to a running program, but before the workload's
# first instruction: the workload is started stopped (SIGSTOP), the tool
# attaches, and the workload is continued a second later. Used by
# bench/cmd/overhead's attached configurations (top-99, attach-99, agent-99).
#
#   attach.sh WALLPROF top|record|agent OUT -- WORKLOAD [ARGS...]
#
# The workload's stderr (its report line) passes through; the tool's output
# goes to OUT.log.
set -u
tool=$1 mode=$2 out=$3
shift 4
sh -c 'kill -STOP $$; exec "$@"' sh "$@" &
w=$!
while [ "$(cut -d' ' -f3 /proc/$w/stat 2>/dev/null)" != T ]; do sleep 0.01; done
case $mode in
top) "$tool" top -p "$w" --plain >"$out.log" 2>&1 & ;;
record) "$tool" record -q -p "$w" -o "$out.pb.gz" >"$out.log" 2>&1 & ;;
# The agent closes a window every second (ten times its default) and pushes
# it to a port where nothing listens: the windows are built and spooled, the
# pushes refused at once.
agent) "$tool" agent -p "$w" --period 1s --otlp http://127.0.0.1:9 --flush-timeout 1s --metrics off >"$out.log" 2>&1 & ;;
*) echo "attach.sh: unknown mode $mode" >&2; kill -KILL $w; exit 2 ;;
esac
t=$!
sleep 1
kill -CONT "$w"
wait "$w"
st=$?
wait "$t"
exit $st
