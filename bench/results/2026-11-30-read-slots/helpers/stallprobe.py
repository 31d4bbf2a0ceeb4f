#!/usr/bin/env python3
"""Cold 10 MiB with few read threads: seekless (build/) pinned to CPU 0 with server.max-read-threads =
THREADS, drop_caches, loadgen over the 10 MiB pool once (100 connections); every 2 s each thread's
state and wait channel, the read threads' kernel stacks once, and the disk's /proc/diskstats line.
usage: stallprobe.py THREADS"""
import os, sys, time, subprocess, threading, collections
sys.path.insert(0, "/work/main/bench")
import benchlib as bl
threads = sys.argv[1]
root = "/var/tmp/seekless-bench/pool-10m-1"
src = open(f"{root}/urls.10m").read().split()
ctx = bl.Context("/work/main/build", "0", "1", 1, 100); ctx.pick_ports()
cfg = bl.Config("seekless-hybrid", "seekless", keys={"server.network-backend": '"hybrid"', "server.max-read-threads": threads})
urls = bl.rotated(src, "stall")
bl.drop_caches()
out, ulist, procs = bl.start_pinned_probe(cfg, ctx, urls, root, "stall-")
pid = procs["server"].pid
def sample():
    for k in range(6):
        time.sleep(2)
        c = collections.Counter()
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                comm = open(f"/proc/{pid}/task/{t}/comm").read().strip()
                st = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[0]
                wc = open(f"/proc/{pid}/task/{t}/wchan").read().strip()
            except OSError: continue
            c[(comm[:7], st, wc)] += 1
        print(f"t={2*(k+1)}s", sorted(c.items()), flush=True)
        if k == 1:
            for t in os.listdir(f"/proc/{pid}/task"):
                comm = open(f"/proc/{pid}/task/{t}/comm").read().strip()
                if comm.startswith("sl-read"):
                    print(comm, open(f"/proc/{pid}/task/{t}/stack").read().replace("\n", " | ")[:600]); 
        os.system(f"grep -E 'vda ' /proc/diskstats")
th = threading.Thread(target=sample); th.start()
try:
    r = bl.run_loadgen(ctx, ulist, os.path.join(out, "c.json"), 5, max_fetches=len(src), sequential=True)
    print("fetches", r["fetches"], "req/s", r["req_s"], "elapsed", r["elapsed"])
finally:
    th.join()
    bl.stop_all(procs)
