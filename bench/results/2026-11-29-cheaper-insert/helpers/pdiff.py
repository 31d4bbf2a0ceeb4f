#!/usr/bin/env python3
"""Microseconds per request by symbol from two perf.data folders (fresh50k.py PERF=1 runs).
usage: pdiff.py DIR_A DIR_B [REQUESTS (50000)] [ROWS (40)]; cpu-clock at perf's default 4000 Hz."""
import subprocess, sys, collections
def load(d):
    out = subprocess.run(["perf", "report", "-i", d + "/perf.data", "--no-children", "-g", "none", "--sort", "dso,sym", "-F", "sample,dso,sym", "-q", "-t", "\t"], capture_output=True, text=True).stdout
    c = collections.Counter()
    for l in out.splitlines():
        p = [x.strip() for x in l.split("\t")]
        if len(p) >= 3 and p[0].isdigit():
            c[p[1] + " " + p[2]] += int(p[0])
    return c
a, b = load(sys.argv[1]), load(sys.argv[2]); n = float(sys.argv[3]) if len(sys.argv) > 3 else 50000
k = 1e6 / 4000 / n
idle = "[kernel.kallsyms] [k] pv_native_safe_halt"
print("total us/req (no idle) A %.2f B %.2f" % (k * (sum(a.values()) - a[idle]), k * (sum(b.values()) - b[idle])))
dsoA = collections.Counter(); dsoB = collections.Counter()
for s, v in a.items(): 
    if s != idle: dsoA[s.split()[0]] += v * k
for s, v in b.items():
    if s != idle: dsoB[s.split()[0]] += v * k
print("A", {d: round(v, 2) for d, v in dsoA.most_common(6)}); print("B", {d: round(v, 2) for d, v in dsoB.most_common(6)})
rows = sorted(set(a) | set(b), key=lambda s: -abs(b[s] - a[s]))
for s in rows[:int(sys.argv[4]) if len(sys.argv) > 4 else 40]:
    print("%-60s %6.2f %6.2f %+6.2f" % (s[:60], a[s] * k, b[s] * k, (b[s] - a[s]) * k))
