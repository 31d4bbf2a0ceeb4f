#!/usr/bin/env python3
"""Medians per client and server from fresh50k.py outputs: req/s, server CPU us per request, p99,
the median per-round ratio to the last server of each round (nginx where it ran), answers other
than 200. usage: summary.py OUTPUT..."""
import sys, re, statistics as st, collections
for fn in sys.argv[1:]:
    rows = collections.defaultdict(list)
    for l in open(fn):
        m = re.match(r"r(\d+) (\w+)\s+(\w+)\s+(\d+) req\s+(\d+) req/s\s+([\d.]+) us/req non200=(\d+) p99=([\d.]+)", l)
        if m: rows[(m[2], m[3])].append((int(m[1]), float(m[5]), float(m[6]), float(m[8]), int(m[7])))
    print("==", fn)
    for (cl, sv), v in rows.items():
        last = [k for k in rows if k[0] == cl][-1]
        ref = {r[0]: r[1] for r in rows[last]}
        ratios = [r[1] / ref[r[0]] for r in v if r[0] in ref]
        print(f"{cl:8s} {sv:9s} n={len(v)} req/s {st.median([r[1] for r in v]):8.0f} us/req {st.median([r[2] for r in v]):5.1f} p99 {st.median([r[3] for r in v]):5.2f} ratio to {last[1]} {st.median(ratios):.2f}x non200={sum(r[4] for r in v)}")
