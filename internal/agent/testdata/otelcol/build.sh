#!/usr/bin/env bash
# Builds the OpenTelemetry Collector of builder-config.yaml with the
# collector builder (pinned, from the Go module proxy) and prints the
# binary's path. Idempotent: an existing binary is kept (the directory is
# named after the release and the manifest's hash, so a changed manifest
# builds anew).
#
#   build.sh [CACHE_DIR]   default: $WALLPROF_OTELCOL_CACHE, else
#                          /var/cache/wallprof-test (root) or ~/.cache/wallprof-test
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
release=v0.161.0
cache=${1:-${WALLPROF_OTELCOL_CACHE:-}}
if [ -z "$cache" ]; then
	if [ "$(id -u)" = 0 ]; then cache=/var/cache/wallprof-test; else cache=${XDG_CACHE_HOME:-$HOME/.cache}/wallprof-test; fi
fi
sum=$(sha256sum "$here/builder-config.yaml" | cut -c1-12)
dir=$cache/otelcol-$release-$sum
bin=$dir/otelcol-wallprof
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$dir"
work=$(mktemp -d "$dir/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
sed "s|^  output_path: .*|  output_path: $work/src|" "$here/builder-config.yaml" >"$work/builder-config.yaml"
# The builder and the collector it generates are Go modules of their own;
# no CGO, like wallprof. Its output goes to stderr: stdout is the path.
(
	cd "$work"
	export GOWORK=off CGO_ENABLED=0 GOFLAGS=-buildvcs=false
	go run "go.opentelemetry.io/collector/cmd/builder@$release" --config "$work/builder-config.yaml"
) >&2
mv "$work/src/otelcol-wallprof" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
