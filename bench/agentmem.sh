#!/usr/bin/env bash
# bench/agentmem.sh: the agent's memory over a long system-wide run
# (issue 19: under 100 MB over ten minutes).
#
# Starts the OpenTelemetry Collector of the tests (built by
# internal/agent/testdata/otelcol/build.sh, file exporter), a Go server
# with N parked goroutines under RATE requests/s (wallprof load), a loop
# that starts short-lived processes (CHURN a second: shells, ls, go
# version: each one is a process the agent starts recording, symbolizes,
# and must forget), and `wallprof agent` system-wide at its defaults
# pushing OTLP/HTTP to the Collector. Every 30 s it prints the agent's
# VmRSS and VmHWM; at the end it saves the agent's heap profile (from
# /debug/pprof/heap on its metrics port) and its /proc/PID/smaps_rollup.
#
# As root, from anywhere in the repository:
#   DURATION=600 bench/agentmem.sh
# Variables: DURATION (seconds, 600), N (10000), RATE (1000), CHURN (20),
# WALLPROF (a wallprof binary; default: built from the work tree), OUT.
set -euo pipefail

die() { echo "agentmem.sh: $*" >&2; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
DURATION=${DURATION:-600}
N=${N:-10000}
RATE=${RATE:-1000}
CHURN=${CHURN:-20}
OUT=${OUT:-$(mktemp -d /tmp/agentmem.XXXXXX)}
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

# Short-lived processes, CHURN a second.
(
	while :; do
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

echo "agentmem: agent pid $apid, output in $OUT"
printf '%8s %10s %10s\n' seconds VmRSS_MB VmHWM_MB
t=0
while ((t < DURATION)); do
	sleep 30
	t=$((t + 30))
	kill -0 "$apid" 2>/dev/null || die "the agent exited: $(tail -3 "$OUT/agent.log")"
	rss=$(awk '/^VmRSS/ {print $2}' "/proc/$apid/status")
	hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$apid/status")
	printf '%8d %10.1f %10.1f\n' "$t" "$(echo "$rss/1024" | bc -l)" "$(echo "$hwm/1024" | bc -l)" | tee -a "$OUT/rss.txt"
done
curl -s -o "$OUT/heap.pb.gz" http://127.0.0.1:19464/debug/pprof/heap || true
cat "/proc/$apid/smaps_rollup" >"$OUT/smaps_rollup.txt" || true
cat "/proc/$apid/smaps" >"$OUT/smaps.txt" || true
kill -TERM "$apid"
wait "$apid" || true
echo "agentmem: profiles received: $(wc -l <"$OUT/profiles.jsonl" 2>/dev/null || echo 0) lines; heap profile $OUT/heap.pb.gz"
