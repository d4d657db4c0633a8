#!/usr/bin/env bash
# bench/agentmem.sh: the agent's memory over a long system-wide run
# (issue 19: under 100 MB over ten minutes).
#
# Starts the OpenTelemetry Collector of the tests (built by
# internal/agent/testdata/otelcol/build.sh, file exporter), a Go server
# with N parked goroutines under RATE requests/s (wallprof load), a loop
# that starts short-lived processes (CHURN a second: shells, ls, go
# version, and a gcc compilation every 5 s: each one is a process the
# agent starts recording, symbolizes, and must forget), and `wallprof agent` system-wide at its defaults
# pushing OTLP/HTTP to the Collector. Every 30 s it prints the agent's
# VmRSS and VmHWM; at the end it saves the agent's heap profile (from
# /debug/pprof/heap on its metrics port) and its /proc/PID/smaps_rollup.
#
# As root, from anywhere in the repository:
#   DURATION=600 bench/agentmem.sh
# Variables: DURATION (seconds, 600), N (10000), RATE (1000), CHURN (20),
# WALLPROF (a wallprof binary; default: built from the work tree), OUT,
# WALLPROF_BASE (another wallprof binary: a second agent runs beside the
# first, from the same start, under the same load and churn, and its RSS
# is printed beside; each agent records the other as one more process).
set -euo pipefail

die() { echo "agentmem.sh: $*" >&2; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
DURATION=${DURATION:-600}
N=${N:-10000}
RATE=${RATE:-1000}
CHURN=${CHURN:-20}
OUT=${OUT:-$(mktemp -d /tmp/agentmem.XXXXXX)}
mkdir -p "$OUT"
[[ $(id -u) == 0 ]] || die "run as root: the agent needs it"

tmp=$(mktemp -d /tmp/agentmem-bin.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

if [[ -z ${WALLPROF:-} ]]; then
	(cd "$root" && CGO_ENABLED=0 go build -o "$tmp/wallprof" ./cmd/wallprof)
	WALLPROF=$tmp/wallprof
fi
(cd "$here/goroutines/server" && go build -o "$tmp/server" .)
otelcol=$("$root/internal/agent/testdata/otelcol/build.sh")

cat >"$tmp/otelcol.yaml" <<EOF
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:14318
exporters:
  file:
    path: $OUT/profiles.jsonl
    append: true
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [file]
EOF
"$otelcol" --config "$tmp/otelcol.yaml" --feature-gates=+service.profilesSupport >"$OUT/collector.log" 2>&1 &
pids+=($!)

"$tmp/server" --goroutines "$N" --addr 127.0.0.1:18080 >"$OUT/server.log" 2>&1 &
pids+=($!)
sleep 2
"$WALLPROF" load --rate "$RATE/s" --duration "$((DURATION + 60))s" http://127.0.0.1:18080/ >"$OUT/load.log" 2>&1 &
pids+=($!)

# Short-lived processes, CHURN a second, and a C compilation every 5 s
# (gcc, cc1, as, ld: native programs with unwind tables).
printf 'int f(int x) { return x * 3; }\nint main(void) { return f(1) - 3; }\n' >"$tmp/c.c"
(
	n=0
	while :; do
		if ((n++ % 5 == 0)) && command -v gcc >/dev/null; then
			gcc -O2 -o "$tmp/c.out" "$tmp/c.c" || true
		fi
		for _ in $(seq "$CHURN"); do
			case $((RANDOM % 3)) in
			0) sh -c 'true' ;;
			1) ls / >/dev/null ;;
			2) go version >/dev/null ;;
			esac
		done
		sleep 1
	done
) &
pids+=($!)

"$WALLPROF" agent --otlp http://127.0.0.1:14318 --metrics 127.0.0.1:19464 >"$OUT/agent.log" 2>&1 &
apid=$!
pids+=($apid)

bpid=""
if [[ -n ${WALLPROF_BASE:-} ]]; then
	"$WALLPROF_BASE" agent --otlp http://127.0.0.1:14318 --metrics 127.0.0.1:19465 >"$OUT/agent-base.log" 2>&1 &
	bpid=$!
	pids+=($bpid)
fi

mb() { awk -v k="$2:" '$1 == k {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
echo "agentmem: agent pid $apid${bpid:+, base agent pid $bpid}, output in $OUT"
printf '%8s %10s %10s %14s %14s\n' seconds VmRSS_MB VmHWM_MB base_VmRSS_MB base_VmHWM_MB
t=0
while ((t < DURATION)); do
	sleep 30
	t=$((t + 30))
	kill -0 "$apid" 2>/dev/null || die "the agent exited: $(tail -3 "$OUT/agent.log")"
	base=("-" "-")
	if [[ -n $bpid ]]; then
		kill -0 "$bpid" 2>/dev/null || die "the base agent exited: $(tail -3 "$OUT/agent-base.log")"
		base=("$(mb "$bpid" VmRSS)" "$(mb "$bpid" VmHWM)")
	fi
	printf '%8d %10s %10s %14s %14s\n' "$t" "$(mb "$apid" VmRSS)" "$(mb "$apid" VmHWM)" "${base[@]}" | tee -a "$OUT/rss.txt"
done
curl -s -o "$OUT/heap.pb.gz" http://127.0.0.1:19464/debug/pprof/heap || true
cat "/proc/$apid/smaps_rollup" >"$OUT/smaps_rollup.txt" || true
cat "/proc/$apid/smaps" >"$OUT/smaps.txt" || true
kill -TERM "$apid" $bpid
wait "$apid" || true
echo "agentmem: profiles received: $(wc -l <"$OUT/profiles.jsonl" 2>/dev/null || echo 0) lines; heap profile $OUT/heap.pb.gz"
