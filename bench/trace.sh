#!/bin/sh
# bench/trace.sh: how fast and in how much memory 'wallprof trace' reads a
# large Go execution trace, beside 'go tool trace -pprof=sched' (which
# parses the whole trace and exits) on the same file.
#
#   bench/trace.sh                 # a 1024 MB trace, 1 round
#   MB=300 ROUNDS=3 bench/trace.sh # medians of 3
#   BASE=/tmp/wallprof-old GOTOOL=0 ROUNDS=5 bench/trace.sh
#                                  # before/after: the binary BASE too,
#                                  # interleaved with this tree's, each round
#   TRACE=some.trace bench/trace.sh  # an existing trace instead
#
# go tool trace holds the whole trace in memory (about 30 times its size:
# 23.6 GB for a 778 MB trace), so it runs under ulimit -v GOTOOL_MAX_MB
# (default 8192) and is skipped with GOTOOL=0. tracegen stops when its
# trace reaches MB, but the last flush can overshoot (the script prints the
# real size).
#
# Prints, per tool and round: seconds, MB/s, CPU seconds (user+system:
# wallprof parses on one goroutine and analyses on another) and peak RSS
# (from /usr/bin/time -v), then the medians.
set -eu
cd "$(dirname "$0")/.."
MB=${MB:-1024}
ROUNDS=${ROUNDS:-1}
DIR=${DIR:-bench/.bin}
mkdir -p "$DIR"
go build -o "$DIR/wallprof" ./cmd/wallprof
go build -o "$DIR/tracegen" ./bench/cmd/tracegen
TRACE=${TRACE:-$DIR/big-$MB.trace}
if [ ! -s "$TRACE" ]; then
	"$DIR/tracegen" -o "$TRACE" -mb "$MB"
fi
size=$(stat -c %s "$TRACE")
sizemb=$(echo "$size / 1048576" | bc -l)
printf 'trace: %s, %.0f MB\n' "$TRACE" "$sizemb"

measure() { # name command...
	name=$1; shift
	/usr/bin/time -v "$@" >/dev/null 2>"$DIR/time.$name" || { echo "$name failed:"; tail -25 "$DIR/time.$name" | grep -v '^\s' | tail -3; return 1; }
	secs=$(awk -F': ' '/Elapsed \(wall clock\)/{n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$DIR/time.$name")
	rss=$(awk -F': ' '/Maximum resident set size/{print $2}' "$DIR/time.$name")
	cpu=$(awk -F': ' '/(User|System) time \(seconds\)/{s+=$2} END{print s}' "$DIR/time.$name")
	printf '%-28s %8.2f s %8.1f MB/s %8.2f s CPU %8.0f MB RSS\n' "$name" "$secs" "$(echo "$sizemb / $secs" | bc -l)" "$cpu" "$(echo "$rss / 1024" | bc -l)"
	echo "$name $secs $cpu $rss" >>"$DIR/trace.results"
}

: >"$DIR/trace.results"
for r in $(seq "$ROUNDS"); do
	echo "round $r"
	if [ -n "${BASE:-}" ] && [ $((r % 2)) = 1 ]; then
		measure "wallprof trace (BASE)" "$BASE" trace "$TRACE"
	fi
	measure "wallprof trace" "$DIR/wallprof" trace "$TRACE"
	if [ -n "${BASE:-}" ] && [ $((r % 2)) = 0 ]; then
		measure "wallprof trace (BASE)" "$BASE" trace "$TRACE"
	fi
	if [ "${GOTOOL:-1}" = 1 ]; then
		measure "go tool trace -pprof=sched" sh -c 'ulimit -v $(('"${GOTOOL_MAX_MB:-8192}"' * 1024)); exec timeout 900 go tool trace -pprof=sched "$0"' "$TRACE" ||
			echo "go tool trace did not finish within ${GOTOOL_MAX_MB:-8192} MB of address space and 900 s"
	fi
done
echo "medians over $ROUNDS round(s):"
for name in "wallprof trace (BASE)" "wallprof trace" "go tool trace -pprof=sched"; do
	lines=$(awk -v n="$name" 'substr($0, 1, length(n) + 1) == n " " && substr($0, length(n) + 2) ~ /^[0-9]/' "$DIR/trace.results" | wc -l)
	[ "$lines" -gt 0 ] || continue
	k=$(( (lines + 1) / 2 ))
	col() { awk -v n="$name" -v c="$1" 'substr($0, 1, length(n) + 1) == n " " && substr($0, length(n) + 2) ~ /^[0-9]/ {print $(NF-c)}' "$DIR/trace.results" | sort -n | sed -n "${k}p"; }
	secs=$(col 2); cpu=$(col 1); rss=$(col 0)
	printf '%-28s %8.2f s %8.1f MB/s %8.2f s CPU %8.0f MB RSS\n' "$name" "$secs" "$(echo "$sizemb / $secs" | bc -l)" "$cpu" "$(echo "$rss / 1024" | bc -l)"
done
