import subprocess, sys, collections
# usage: symavg.py "dirA1:us,dirA2:us,..." "dirB1:us,..." [N]
def load(d, us):
    out = subprocess.run(["perf","report","-i",d+"/perf.data","--no-children","-g","none","--sort","dso,sym","-q","--percent-limit","0.02"],capture_output=True,text=True).stdout
    m = collections.Counter()
    for ln in out.splitlines():
        p = ln.split()
        if len(p) < 4 or not p[0].endswith("%"): continue
        m[p[1]+" "+p[-1]] += float(p[0][:-1]) * us / 100
    return m
def avg(spec):
    parts = [x.rsplit(":",1) for x in spec.split(",")]
    tot = collections.Counter()
    for d, us in parts:
        for k, v in load(d, float(us)).items(): tot[k] += v / len(parts)
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
