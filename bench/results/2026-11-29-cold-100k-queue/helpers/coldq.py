#!/usr/bin/env python3
"""Cold 100 KiB: how many reads each server keeps at the disk. Per run: a server started pinned to
CPU 0, sync + drop_caches, then bench/loadgen on CPU 1 (100 keep-alive connections) fetching at
least 20,000 distinct files of the 100 KiB pool in order from a rotated start, 5 s; the disk's
/proc/diskstats read before and after: reads/s, KiB per read, and the average queue (the weighted
I/O time over the run's time, iostat's aqu-sz). Rounds interleave the servers.
usage: coldq.py ROUNDS NAME=nginx-aio|seekless[@BUILD][:KEY=VALUE;...] ...
(BUILD: a meson build directory, default /work/main/build)
env: POOL=4k for the 4 KiB pool's deep tree instead (200,000 files), POOL=10m for the 10 MiB
pool (each of its 1,000 files once, at most, in 5 s; MB/s instead of requests); CLIENT=wrk for wrk -t1
(bench/wrk-urls.lua, sequential, 5 s) instead of loadgen.
"""
import os, statistics, sys, time
sys.path.insert(0, "/work/main/bench")
import benchlib as bl
rounds, specs = int(sys.argv[1]), [a.split("=", 1) for a in sys.argv[2:]]
kind = os.environ.get("POOL") if os.environ.get("POOL") in ("4k", "10m") else "100k"
root = f"/var/tmp/seekless-bench/pool-{kind}-1"
src = open(f"{root}/urls.{kind}").read().split()
disk = bl.pool_disk(root)
def dstat():
    for line in open("/proc/diskstats"):
        x = line.split()
        if x[2] == disk:
            return int(x[3]), int(x[5]), int(x[13])
res = {n: [] for n, _ in specs}
for rnd in range(rounds):
    for name, what in specs:
        build = what.partition(":")[0].partition("@")[2] or "/work/main/build"
        ctx = bl.Context(build, "0", "1", 1, 100)
        ctx.pick_ports()
        if what == "nginx-aio":
            cfg = bl.Config("nginx-aio-threads", "nginx", aio=True)
        else:
            _, _, more = what.partition(":")
            keys = dict(kv.split("=", 1) for kv in more.split(";") if kv)
            cfg = bl.Config("seekless-hybrid", "seekless", keys={"server.network-backend": '"hybrid"', **keys})
        urls = bl.rotated(src, f"{name}-{rnd}")
        bl.drop_caches()
        out, ulist, procs = bl.start_pinned_probe(cfg, ctx, urls, root, f"coldq-{name}-")
        try:
            r0, s0, w0 = dstat(); t0 = time.monotonic()
            c0 = bl.tree_cpu({"s": procs["server"].pid})
            if os.environ.get("CLIENT") == "wrk":
                r = bl.run_wrk(ctx, ulist, os.path.join(out, "c.json"), 5, sequential=True)
            else:
                r = bl.run_loadgen(ctx, ulist, os.path.join(out, "c.json"), 5,
                                   min_fetches=None if kind == "10m" else 20000,
                                   max_fetches=len(src) if kind == "10m" else None, sequential=True)
            c1 = bl.tree_cpu({"s": procs["server"].pid})
            r1, s1, w1 = dstat(); t1 = time.monotonic()
        finally:
            bl.stop_all(procs)
        dt = t1 - t0
        row = (r["req_s"], (r1 - r0) / dt, (s1 - s0) * 512 / 1024 / max(1, r1 - r0), (w1 - w0) / 1000 / dt,
               1e6 * (c1["s"] - c0["s"]) / r["fetches"], r["p99_ms"])
        res[name].append(row)
        print(f"r{rnd + 1} {name:12s} {r['fetches']} req {row[0]:7.0f} req/s disk {row[1]:7.0f} reads/s {row[2]:5.1f} KiB/read queue {row[3]:5.1f} {row[4]:5.1f} us/req p99 {row[5]:.1f} ms non200={r['non_200']}", flush=True)
ref = specs[-1][0]
for name, _ in specs:
    v = res[name]
    ratios = [a[0] / b[0] for a, b in zip(v, res[ref])]
    if kind == "10m":
        mbs = [x[1] * x[2] * 1024 / 1e6 for x in v]
        print(f"median {name:12s} disk {statistics.median(mbs):7.0f} MB/s (reads/s x KiB/read)")
    print(f"median {name:12s} {statistics.median(x[0] for x in v):7.0f} req/s disk {statistics.median(x[1] for x in v):7.0f} reads/s {statistics.median(x[2] for x in v):5.1f} KiB/read queue {statistics.median(x[3] for x in v):5.1f} {statistics.median(x[4] for x in v):5.1f} us/req p99 {statistics.median(x[5] for x in v):.1f} ratio to {ref} {statistics.median(ratios):.2f}x")
