#!/usr/bin/env python3
"""Cold 4 KiB with server.network-backend = "io-uring" pinned to CPU 0: samples every thread's CPU and
allowed CPUs (the kernel's io-wq workers iou-wrk-* included) every 0.1 s. usage: uringaff.py"""
import os, sys, time, subprocess, threading, collections
sys.path.insert(0, "/work/main/bench")
import benchlib as bl
root = "/var/tmp/seekless-bench/pool-4k-1"
src = open(f"{root}/urls.4k").read().split()
ctx = bl.Context("/work/main/build", "0", "1", 1, 100); ctx.pick_ports()
cfg = bl.Config("seekless-hybrid", "seekless", keys={"server.network-backend": '"io-uring"'})
urls = bl.rotated(src, "aff")
bl.drop_caches()
out, ulist, procs = bl.start_pinned_probe(cfg, ctx, urls, root, "aff-")
pid = procs["server"].pid
res = collections.Counter()
def sample():
    for k in range(40):
        time.sleep(0.1)
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                comm = open(f"/proc/{pid}/task/{t}/comm").read().strip()
                f = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
                allowed = [l for l in open(f"/proc/{pid}/task/{t}/status").read().splitlines() if l.startswith("Cpus_allowed_list")][0].split()[1]
            except OSError: continue
            res[(comm[:7], "cpu" + f[36], "allowed " + allowed)] += 1
th = threading.Thread(target=sample); th.start()
r = bl.run_loadgen(ctx, ulist, os.path.join(out, "c.json"), 5, sequential=True)
th.join()
bl.stop_all(procs)
print(r["req_s"]); print(sorted(res.items()))
