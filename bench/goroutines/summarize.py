#!/usr/bin/env python3
"""summarize.py OUTDIR [OUTDIR...]: medians per N and configuration from
run.sh's files; with several directories, their runs are pooled (rounds are
named DIR:ROUND)."""
import glob, json, os, re, statistics, sys
from collections import defaultdict

outs = sys.argv[1:]
multi = len(outs) > 1


def files(pattern):
    for o in outs:
        for p in sorted(glob.glob(os.path.join(o, pattern))):
            yield o, p


runs = defaultdict(list)  # (model, n, cfg) -> [(round, json)]
for o, p in files("*-r*.*.json"):
    m = re.match(r"(\w+)-(\d+)-r(\d+)\.(closed|open)\.json$", os.path.basename(p))
    if not m:
        continue
    cfg, n, r, model = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
    if multi:
        r = "%s:%d" % (os.path.basename(os.path.normpath(o)), r)
    try:
        d = json.load(open(p))
    except ValueError:  # a run still under way, or cut short
        continue
    runs[(model, n, cfg)].append((r, d))

ns = sorted({k[1] for k in runs})
order = ["none", "wallprof", "wallprof_nogv", "fgprof"]
cfgs = [c for c in order if any(k[2] == c for k in runs)]
med = statistics.median


def ms(ns_):
    return "%.2f ms" % (ns_ / 1e6)


def stats(model, n, cfg):
    rs = runs.get((model, n, cfg), [])
    if not rs:
        return None
    ds = [d for _, d in rs]
    return {
        "runs": len(ds),
        "tput": med([d["throughput"] for d in ds]),
        "p50": med([d["latency"]["p50_ns"] for d in ds]),
        "p99": med([d["latency"]["p99_ns"] for d in ds]),
        "p99lo": min(d["latency"]["p99_ns"] for d in ds),
        "p99hi": max(d["latency"]["p99_ns"] for d in ds),
        "p999": med([d["latency"]["p999_ns"] for d in ds]),
        "max": med([d["latency"]["max_ns"] for d in ds]),
        "ok": min(d["success_ratio"] for d in ds),
    }


for model, title in (("closed", "Closed model (%s workers back to back)"), ("open", "Open model (constant rate, see meta.txt)")):
    if not any(k[0] == model for k in runs):
        continue
    some = next(d for k, v in runs.items() if k[0] == model for _, d in v)
    if model == "closed":
        title = title % some.get("concurrency", "?")
    print("### " + title + "\n")
    print("| N | config | runs | throughput (req/s) | p50 | p99 | p99 range over runs | p99.9 | max | throughput / none | p99 / none | max / none |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in ns:
        base = stats(model, n, "none")
        for cfg in cfgs:
            s = stats(model, n, cfg)
            if s is None:
                continue
            ratio = lambda k: ("%.2f" % (s[k] / base[k])) if base else "-"
            print("| %d | %s | %d | %.0f | %s | %s | %.1f-%.1f ms | %s | %s | %s | %s | %s |" % (
                n, cfg, s["runs"], s["tput"], ms(s["p50"]), ms(s["p99"]), s["p99lo"] / 1e6, s["p99hi"] / 1e6, ms(s["p999"]), ms(s["max"]),
                ratio("tput"), ratio("p99"), ratio("max")))
            if s["ok"] < 1:
                print("|  | (%s: lowest success ratio %.4f) |||||||||" % (cfg, s["ok"]))
    print()

# Paired by round: each configuration against the none run of the same round
# (run a few seconds apart, so sharing most of the machine's other load).
print("### Paired by round: ratio to the none run of the same round (median over rounds; how many rounds > 1)\n")
print("| N | config | rounds | closed throughput | closed p99 | open p99 | open max |")
print("|---:|---|---:|---:|---:|---:|---:|")
for n in ns:
    for cfg in cfgs:
        if cfg == "none":
            continue
        cells = []
        rounds = 0
        for model, key in (("closed", "tput"), ("closed", "p99"), ("open", "p99"), ("open", "max")):
            base = dict(runs.get((model, n, "none"), []))
            xs = []
            for r, d in runs.get((model, n, cfg), []):
                if r in base:
                    get = (lambda x: x["throughput"]) if key == "tput" else (lambda x, k=key: x["latency"][k + "_ns"])
                    xs.append(get(d) / get(base[r]))
            rounds = max(rounds, len(xs))
            cells.append("%.2f (%d > 1)" % (med(xs), sum(x > 1 for x in xs)) if xs else "-")
        print("| %d | %s | %d | %s |" % (n, cfg, rounds, " | ".join(cells)))
print()

# wallprof's own report: goroutine view and cost.
wp = defaultdict(list)
for _, p in files("wallprof*-r*.wallprof.out"):
    mm = re.match(r"(wallprof\w*)-(\d+)-r", os.path.basename(p))
    n = (int(mm.group(2)), mm.group(1))
    t = open(p).read()
    g = re.search(r"goroutines \((go[\d.]+)\): up to (\d+), goroutine table read (\d+) times every ([\d.]+)(ms|s|µs)", t)
    c = re.search(r"cost: profiler CPU ([\d.]+)(ms|s) \(([\d.]+)% of target CPU\), BPF ([\d.]+)(ms|s) \(([\d.]+)%\)", t)
    rec = re.search(r"recorded ([\d.]+)s", t)
    unit = {"s": 1000.0, "ms": 1.0, "µs": 0.001}
    wp[n].append({
        "gor": int(g.group(2)) if g else None,
        "reads": int(g.group(3)) if g else None,
        "every_ms": float(g.group(4)) * unit[g.group(5)] if g else None,
        "cpu_ms": float(c.group(1)) * unit[c.group(2)] if c else None,
        "cpu_pct": float(c.group(3)) if c else None,
        "bpf_ms": float(c.group(4)) * unit[c.group(5)] if c else None,
        "bpf_pct": float(c.group(6)) if c else None,
        "secs": float(rec.group(1)) if rec else None,
    })
if wp:
    print("### wallprof's own report (medians over its runs; one recording spans both loads)\n")
    print("| N | config | runs | goroutines (up to) | table reads | snapshot interval | recorded | profiler CPU | % of target CPU | BPF | BPF % of target CPU |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sorted(wp):
        xs = wp[n]
        def m(k, fmt):
            v = [x[k] for x in xs if x[k] is not None]
            return fmt % med(v) if v else "-"
        print("| %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            n[0], n[1], len(xs), m("gor", "%d"), m("reads", "%d"), m("every_ms", "%.0f ms"), m("secs", "%.1f s"),
            m("cpu_ms", "%.0f ms"), m("cpu_pct", "%.1f%%"), m("bpf_ms", "%.0f ms"), m("bpf_pct", "%.1f%%")))
    print()

# The server's own count of stop-the-world pauses (runtime/metrics), over its
# whole life: warm-up, both loads, and the seconds around them.
pz = defaultdict(list)
for _, p in files("*-r*.server.out"):
    m = re.match(r"(\w+)-(\d+)-r(\d+)\.server\.out$", os.path.basename(p))
    t = open(p).read()
    o = re.search(r"stw-pauses other: count=(\d+)(?: p50<=([\d.]+)ms p99<=([\d.]+)ms max<=([\d.]+)ms total>=([\d.]+)ms)?", t)
    g = re.search(r"stw-pauses gc: count=(\d+)(?: p50<=([\d.]+)ms p99<=([\d.]+)ms max<=([\d.]+)ms total>=([\d.]+)ms)?", t)
    u = re.search(r"cpu: user=([\d.]+)s sys=([\d.]+)s requests=(\d+)", t)
    cpu_us = (float(u.group(1)) + float(u.group(2))) * 1e6 / int(u.group(3)) if u and int(u.group(3)) else None
    if o and g:
        f = lambda x: float(x) if x else 0.0
        pz[(int(m.group(2)), m.group(1))].append((int(o.group(1)), f(o.group(3)), f(o.group(4)), f(o.group(5)),
                                                  int(g.group(1)), f(g.group(3)), f(g.group(4)), cpu_us))
if pz:
    print("### Stop-the-world pauses in the server (runtime/metrics /sched/pauses/total/*, whole process life, medians over runs)\n")
    print("Durations are histogram bucket upper bounds; total is a lower bound.\n")
    print("Server CPU per request is the server process's user+system time over its whole life divided by the requests it served (warm-up and both loads).\n")
    print("| N | config | runs | non-GC pauses | their p99 | their max | their total | GC pauses | GC p99 | GC max | server CPU per request |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in ns:
        for cfg in cfgs:
            xs = pz.get((n, cfg))
            if not xs:
                continue
            c = lambda i: med([x[i] for x in xs])
            cpus = [x[7] for x in xs if x[7] is not None]
            print("| %d | %s | %d | %d | %.3f ms | %.3f ms | %.1f ms | %d | %.3f ms | %.3f ms | %s |" % (
                n, cfg, len(xs), c(0), c(1), c(2), c(3), c(4), c(5), c(6),
                ("%.0f µs" % med(cpus)) if cpus else "-"))
    print()

fg = [p for _, p in files("fgprof-*-r*.fgprof-bytes")]
if fg:
    sizes = [int(open(p).read()) for p in fg]
    print("fgprof wrote a non-empty profile in each of its %d runs (%d to %d bytes).\n" % (len(sizes), min(sizes), max(sizes)))

print("### Every run (closed model: throughput, p99, max; open model: p99, max)\n")
print("| N | config | round | closed req/s | closed p99 | closed max | open p99 | open max |")
print("|---:|---|---:|---:|---:|---:|---:|---:|")
for n in ns:
    for cfg in cfgs:
        opens = dict(runs.get(("open", n, cfg), []))
        for r, d in sorted(runs.get(("closed", n, cfg), []), key=lambda x: x[0]):
            o = opens.get(r)
            print("| %d | %s | %s | %.0f | %s | %s | %s | %s |" % (
                n, cfg, r, d["throughput"], ms(d["latency"]["p99_ns"]), ms(d["latency"]["max_ns"]),
                ms(o["latency"]["p99_ns"]) if o else "-", ms(o["latency"]["max_ns"]) if o else "-"))
