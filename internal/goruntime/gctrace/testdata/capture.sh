#!/bin/sh
# Regenerates the real gctrace logs go<version>.log from prog/ with each Go
# toolchain, through the module proxy's toolchain switching (GOENV=off: a
# user's GOFLAGS may hold flags that old toolchains reject). The program's own
# output (stdout and stderr) is interleaved with the gctrace lines on purpose.
# After a capture, rerun the golden tests with -update and review the diff.
set -e
cd "$(dirname "$0")/prog"
for v in 1.16.15 1.20.14 1.22.12 1.26.8; do
	GOENV=off GOFLAGS= GOTOOLCHAIN=go$v go build -o /tmp/gctraceprog-$v .
	GODEBUG=gctrace=1 /tmp/gctraceprog-$v >../go$v.log 2>&1
	rm -f /tmp/gctraceprog-$v
done
