#!/usr/bin/env python3
"""Hot A/B of seekless settings against nginx `sendfile on`, pinned (server CPU 0, client CPU 1).
Per run: a server started, the set warmed right before (residency checked with fincore), then
bench/loadgen (100 keep-alive connections, random URLs from the set, SECS seconds, at least 50,000
requests) and, with CLIENT=both, wrk -t1 with bench/wrk-urls.lua in the same server's life.
Rounds interleave the servers; medians and per-round ratios to the last spec.
usage: hotab.py ROUNDS SET NAME=nginx|seekless[@BUILD][:KEY=VALUE;...] ...
  SET: 2g (20,000 files of 100 KiB), 100k (the whole 100 KiB pool), 4k (the whole 4 KiB pool),
       popular (15,000 of the 4 KiB pool)
env: SECS (default 8), CLIENT=lg|both (default both)
"""
import os, statistics, sys
sys.path.insert(0, "/work/main/bench")
import benchlib as bl
rounds, kind, specs = int(sys.argv[1]), sys.argv[2], [a.split("=", 1) for a in sys.argv[3:]]
secs = float(os.environ.get("SECS", "8"))
both = os.environ.get("CLIENT", "both") == "both"
pool = "4k" if kind in ("4k", "popular") else "100k"
root = f"/var/tmp/seekless-bench/pool-{pool}-1"
src = open(f"{root}/urls.{pool}").read().split()
src = src[:20000] if kind == "2g" else src[:15000] if kind == "popular" else src
files = [root + "/" + u.split("/", 3)[3] for u in src]
res = {n: {"lg": [], "wrk": []} for n, _ in specs}
for rnd in range(rounds):
    for name, what in specs:
        build = what.partition(":")[0].partition("@")[2] or "/work/main/build"
        ctx = bl.Context(build, "0", "1", 1, 100)
        ctx.pick_ports()
        if what == "nginx":
            cfg = bl.Config("nginx-sendfile", "nginx")
        else:
            _, _, more = what.partition(":")
            keys = dict(kv.split("=", 1) for kv in more.split(";") if kv)
            cfg = bl.Config("seekless-hybrid", "seekless",
                            keys={"server.network-backend": '"hybrid"', **keys})
        out, ulist, procs = bl.start_pinned_probe(cfg, ctx, src, root, f"hotab-{name}-")
        try:
            for client in ("lg", "wrk") if both else ("lg",):
                bl.warm(files)
                resid = bl.residency(files)
                c0 = bl.tree_cpu({"s": procs["server"].pid})
                if client == "lg":
                    r = bl.run_loadgen(ctx, ulist, os.path.join(out, "lg.json"), secs,
                                       min_fetches=50000)
                else:
                    r = bl.run_wrk(ctx, ulist, os.path.join(out, "wrk.json"), secs, seed=rnd + 1)
                c1 = bl.tree_cpu({"s": procs["server"].pid})
                n = r["fetches"]
                row = (r["req_s"], 1e6 * (c1["s"] - c0["s"]) / n, r["p99_ms"])
                res[name][client].append(row)
                print(f"r{rnd + 1} {name:10s} {client:3s} {n:7d} req {row[0]:8.0f} req/s "
                      f"{row[1]:5.1f} us/req p99 {row[2]:.2f} ms resident {100 * resid:.0f}% "
                      f"non200={r['non_200']}", flush=True)
        finally:
            bl.stop_all(procs)
ref = specs[-1][0]
for client in ("lg", "wrk") if both else ("lg",):
    for name, _ in specs:
        v = res[name][client]
        ratios = [a[0] / b[0] for a, b in zip(v, res[ref][client])]
        print(f"median {client:3s} {name:10s} {statistics.median(x[0] for x in v):8.0f} req/s "
              f"{statistics.median(x[1] for x in v):5.1f} us/req p99 "
              f"{statistics.median(x[2] for x in v):.2f} ms ratio to {ref} "
              f"{statistics.median(ratios):.2f}x (rounds {' '.join(f'{x:.2f}' for x in ratios)})")
