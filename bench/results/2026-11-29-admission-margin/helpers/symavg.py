import collections, os, sys
# The per-symbol loader of symdiff.py (the floor folder's helper), averaged over several runs.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "2026-11-29-floor", "helpers"))
from symdiff import load
def avg(spec):
    parts = [x.rsplit(":",1) for x in spec.split(",")]
    tot = collections.Counter()
    for d, us in parts:
        for k, v in load(d, float(us), "0.02").items(): tot[k] += v / len(parts)
    return tot
a = avg(sys.argv[1]); b = avg(sys.argv[2])
keys = sorted(set(a)|set(b), key=lambda k: -abs(b[k]-a[k]))
print(f"{'sym':60s}      A      B    B-A (us/req)")
for k in keys[:int(sys.argv[3]) if len(sys.argv)>3 else 40]:
    print(f"{k:60s} {a[k]:6.2f} {b[k]:6.2f} {b[k]-a[k]:+6.2f}")
for name, m in (("A", a), ("B", b)):
    d = collections.Counter()
    for k, v in m.items(): d[k.split()[0]] += v
    print(name, {k: round(v, 2) for k, v in d.most_common(6)})
