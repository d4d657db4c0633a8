#!/usr/bin/env python3
"""Summarize bench/goroutines/pinned.sh's runs.tsv: per configuration, the
median of the per-round ratios to the same round's `none` run, a bootstrap
95% interval of that median (2,000 resamples, fixed seed), and how many
rounds lay above 1; beside it the pooled medians of the raw values."""
import csv
import random
import statistics
import sys

METRICS = [
    ("client_p99_ns", "client p99"),
    ("server_p99_ns", "server handler p99"),
    ("server_p50_ns", "server handler p50"),
    ("server_cpu_ns_per_req", "server CPU per request"),
]


def boot(ratios, rng, n=2000):
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def main(path):
    rows = list(csv.DictReader(open(path), delimiter="\t"))
    by = {}
    for r in rows:
        by.setdefault(r["config"], {})[r["round"]] = r
    none = by.get("none", {})
    rng = random.Random(20)
    print("| configuration | rounds | " + " | ".join(f"{m[1]}: paired ratio (95% CI), rounds > 1" for m in METRICS) + " |")
    print("|---|---:|" + "---|" * len(METRICS))
    for cfg, runs in by.items():
        cells = []
        rounds = sorted(set(runs) & set(none), key=int)
        for key, _ in METRICS:
            if cfg == "none":
                vals = [float(runs[k][key]) for k in rounds]
                unit = 1e3 if key != "server_cpu_ns_per_req" else 1e3
                cells.append(f"{statistics.median(vals) / unit:.1f} µs (median)")
                continue
            ratios = [float(runs[k][key]) / float(none[k][key]) for k in rounds if float(none[k][key]) > 0]
            if not ratios:
                cells.append("-")
                continue
            lo, hi = boot(ratios, rng)
            above = sum(1 for x in ratios if x > 1)
            cells.append(f"×{statistics.median(ratios):.3f} ({lo:.3f}–{hi:.3f}), {above} of {len(ratios)}")
        print(f"| {cfg} | {len(rounds)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
