#!/usr/bin/env python3
"""Cold 4 KiB deep tree, seekless (build/, hybrid) pinned to CPU 0, loadgen on CPU 1 for 9 s after drop_caches;
perf record -e cpu-clock -C 0 -g for 5 s in the middle (/tmp/cp/perf.data). usage: profcold4k.py"""
import os, sys, time, subprocess, threading
sys.path.insert(0, "/work/main/bench")
import benchlib as bl
root = "/var/tmp/seekless-bench/pool-4k-1"
src = open(f"{root}/urls.4k").read().split()
ctx = bl.Context("/work/main/build", "0", "1", 1, 100); ctx.pick_ports()
cfg = bl.Config("seekless-hybrid", "seekless", keys={"server.network-backend": '"hybrid"'})
urls = bl.rotated(src, "profcold")
bl.drop_caches()
out, ulist, procs = bl.start_pinned_probe(cfg, ctx, urls, root, "profcold-")
def prof():
    time.sleep(2)
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-C", "0", "-g", "-o", "/tmp/cp/perf.data", "--", "sleep", "5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
t = threading.Thread(target=prof); t.start()
c0 = bl.tree_cpu({"s": procs["server"].pid})
r = bl.run_loadgen(ctx, ulist, os.path.join(out, "c.json"), 9, sequential=True)
c1 = bl.tree_cpu({"s": procs["server"].pid})
t.join()
bl.stop_all(procs)
print("req/s", r["req_s"], "us/req", 1e6 * (c1["s"] - c0["s"]) / r["fetches"], "p99", r["p99_ms"])
