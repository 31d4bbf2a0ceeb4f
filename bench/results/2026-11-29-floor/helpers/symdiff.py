import subprocess, sys, collections
def load(d, us, limit="0.05"):
    out = subprocess.run(["perf","report","-i",d+"/perf.data","--no-children","-g","none","--sort","dso,sym","-q","--percent-limit",limit],capture_output=True,text=True).stdout
    m = collections.Counter()
    for ln in out.splitlines():
        p = ln.split()
        if len(p) < 4 or not p[0].endswith("%"): continue
        m[p[1]+" "+p[-1]] += float(p[0][:-1]) * us / 100
    return m
if __name__ == "__main__":
    a = load(sys.argv[1], float(sys.argv[2])); b = load(sys.argv[3], float(sys.argv[4]))
    keys = sorted(set(a)|set(b), key=lambda k: -(b[k]-a[k]))
    print("sym  A  B  B-A (us/req)")
    for k in keys[:int(sys.argv[5]) if len(sys.argv)>5 else 40]:
        print(f"{k:60s} {a[k]:6.2f} {b[k]:6.2f} {b[k]-a[k]:+6.2f}")
    dso = collections.Counter(); 
    for k,v in b.items(): dso[k.split()[0]] += v
    dsa = collections.Counter()
    for k,v in a.items(): dsa[k.split()[0]] += v
    print({k: (round(dsa[k],2), round(v,2)) for k,v in dso.items()})
