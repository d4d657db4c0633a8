#!/bin/sh
# benchcheck.sh: the noise floor of 'wallprof bench check' on this machine
# and how many rounds it needs to find a small regression.
#
# A throwaway module has one benchmark, BenchmarkWork: WORK steps of a
# xorshift loop per operation. Commit A has WORK=1000; commit B has
# WORK=1000*(100+SLOWER)/100 (SLOWER=5: 5% more work, and ~5% more time).
# For each of REPS repetitions and each round count R of ROUNDS, it runs,
# interleaved,
#   A/A: wallprof bench check --base A --count R   (at commit A)
#   A/B: wallprof bench check --base A --count R   (at commit B)
# with --benchtime BENCHTIME and --explain=false, and prints one line per
# check: kind, rounds, the sec/op medians and their change, the U-test's p,
# whether the change is significant, and the check's regression verdict
# (significant, worse, and above --threshold). Two more columns are not
# wallprof's: they pair each round's base and new sample (read from the
# database) and give the median of the per-round ratios new/base - 1 and
# the one-sided p of the exact Wilcoxon signed-rank test on them (is new
# slower?), to show what the interleaving would give a paired test. A
# summary follows.
#
#   bench/benchcheck.sh                                # defaults below
#   REPS=4 ROUNDS="6 10" SLOWER=10 bench/benchcheck.sh
set -eu
REPS=${REPS:-6}
ROUNDS=${ROUNDS:-6 10 20 40}
SLOWER=${SLOWER:-5}
BASEWORK=${BASEWORK:-5000}
BENCHTIME=${BENCHTIME:-10000x}
THRESHOLD=${THRESHOLD:-0.05}
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/wallprof-benchcheck-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$top/bench/.bin"
(cd "$top" && go build -o "$top/bench/.bin/wallprof" ./cmd/wallprof)
wp=$top/bench/.bin/wallprof

repo=$tmp/repo
mkdir -p "$repo"
cd "$repo"
cat >go.mod <<'M'
module example.com/work

go 1.24
M
work() {
	cat >work.go <<W
// Package work is a benchmark whose cost is one constant.
package work

// Work is the xorshift steps of one operation.
const Work = $1

// Run runs Work steps from x.
func Run(x uint64) uint64 {
	for range Work {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}
W
}
cat >work_test.go <<'T'
package work

import "testing"

var sink uint64

func BenchmarkWork(b *testing.B) {
	x := uint64(1)
	for b.Loop() {
		x = Run(x)
	}
	sink = x
}
T
work "$BASEWORK"
g() { git -c user.name=b -c user.email=b@b -c commit.gpgsign=false "$@"; }
g init -q -b main
g add .
g commit -q -m A
a=$(git rev-parse HEAD)
work $((BASEWORK * (100 + SLOWER) / 100))
g commit -q -am B
b=$(git rev-parse HEAD)

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); WORK $BASEWORK -> $((BASEWORK * (100 + SLOWER) / 100)) (+$SLOWER%), benchtime $BENCHTIME, threshold $THRESHOLD"
printf 'kind\trounds\tbase\tnew\tchange\tp\tsignificant\tregression\tpaired_change\tpaired_p\n'
out=$tmp/results.tsv
# paired: the per-round ratios of the last check's two runs.
paired() {
	sqlite3 "$tmp/bench.db" "SELECT ru.label, s.value FROM runs ru JOIN results r ON r.run_id = ru.id
		JOIN samples s ON s.result_id = r.id WHERE s.unit = 'sec/op'
		AND ru.id IN (SELECT id FROM runs ORDER BY id DESC LIMIT 2) ORDER BY r.id" | python3 -c '
import sys, statistics
v = {"base": [], "head": []}
for line in sys.stdin:
    label, x = line.strip().split("|")
    v[label].append(float(x))
d = [h / b - 1 for b, h in zip(v["base"], v["head"])]
n = len(d)
ranks = sorted(range(n), key=lambda i: abs(d[i]))
w = sum(r + 1 for r, i in enumerate(ranks) if d[i] > 0)
ways = [1] + [0] * (n * (n + 1) // 2)  # ways[s]: subsets of ranks 1..n summing to s
for k in range(1, n + 1):
    for s in range(len(ways) - 1, k - 1, -1):
        ways[s] += ways[s - k]
print("%.4f\t%.4f" % (statistics.median(d), sum(ways[w:]) / 2 ** n))'
}
check() { # kind rev rounds
	git checkout -q "$2"
	"$wp" bench check --base "$a" --db "$tmp/bench.db" --json --explain=false \
		--count "$3" --benchtime "$BENCHTIME" --threshold "$THRESHOLD" >"$tmp/out.json" 2>"$tmp/err" || true
	jq -r --arg k "$1" --arg r "$3" '.deltas[] | select(.unit == "sec/op") |
		[$k, $r, .base.center, .new.center, .change, .p, .significant, .regression] | @tsv' "$tmp/out.json" >"$tmp/line"
	test -s "$tmp/line" || { cat "$tmp/err" >&2; exit 1; }
	printf '%s\t%s\n' "$(cat "$tmp/line")" "$(paired)" | tee -a "$out"
}
for rep in $(seq "$REPS"); do
	for r in $ROUNDS; do
		check AA "$a" "$r"
		check AB "$b" "$r"
	done
done
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "# summary: per kind and rounds: checks; significant and worse (p < 0.05, change > 0); flagged (also above the threshold); median and max |change|; median change; paired test significant and worse (p < 0.05); median paired change"
jq -R -s -r '
	split("\n") | map(select(length > 0) | split("\t")) |
	map({k: .[0], r: (.[1] | tonumber), c: (.[4] | tonumber), s: (.[6] == "true"), g: (.[7] == "true"),
		pc: (.[8] | tonumber), pp: (.[9] | tonumber)}) |
	group_by([.k, .r])[] |
	(map(.c | fabs) | sort) as $abs | (map(.c) | sort) as $cs |
	[.[0].k, .[0].r, length,
	 (map(select(.s and .c > 0)) | length), (map(select(.g)) | length),
	 ($abs[(length / 2 | floor)] * 1000 | round / 10 | tostring + "%"), ($abs[-1] * 1000 | round / 10 | tostring + "%"),
	 ($cs[(length / 2 | floor)] * 1000 | round / 10 | tostring + "%"),
	 (map(select(.pp < 0.05 and .pc > 0)) | length),
	 ((map(.pc) | sort)[(length / 2 | floor)] * 1000 | round / 10 | tostring + "%")] | @tsv' "$out"
