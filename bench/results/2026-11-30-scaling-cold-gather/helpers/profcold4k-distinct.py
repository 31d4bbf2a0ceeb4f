#!/usr/bin/env python3
"""Cold 4 KiB deep tree, seekless (build/, hybrid) pinned to CPU 0, loadgen on CPU 1 for 9 s after
drop_caches. With perf (the default): perf record -e cpu-clock -C 0 -g for 5 s in the middle
(/tmp/cp/perf.data). Always, at the end: each thread kind's read system calls (syscr, which counts
sendfile) and bytes from /proc/PID/task/*/io, beside the requests served.
usage: profcold4k.py [--no-perf]
env (added 2026-11-30 for ../../2026-11-30-hybrid-ring/; unset, it runs as it ran here): POOL=100k
for the 100 KiB pool, BUILD=a meson build directory instead of /work/main/build, NB=a
server.network-backend instead of hybrid."""
import collections, os, sys, time, subprocess, threading
sys.path.insert(0, "/work/main/bench")
import benchlib as bl
perf = "--no-perf" not in sys.argv[1:]
kind = os.environ.get("POOL", "4k"); root = f"/var/tmp/seekless-bench/pool-{kind}-1"
src = open(f"{root}/urls.{kind}").read().split()
ctx = bl.Context(os.environ.get("BUILD", "/work/main/build"), "0", "1", 1, 100); ctx.pick_ports()
cfg = bl.Config("seekless-hybrid", "seekless", keys={"server.network-backend": '"' + os.environ.get("NB", "hybrid") + '"'})
urls = bl.rotated(src, "profcold")
bl.drop_caches()
out, ulist, procs = bl.start_pinned_probe(cfg, ctx, urls, root, "profcold-")
def prof():
    time.sleep(0.7)
    os.makedirs("/tmp/cp", exist_ok=True)
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-C", "0", "-g", "-o", "/tmp/cp/perf.data", "--", "sleep", os.environ.get("PSEC","3")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
t = threading.Thread(target=prof if perf else lambda: None); t.start()
c0 = bl.tree_cpu({"s": procs["server"].pid})
r = bl.run_loadgen(ctx, ulist, os.path.join(out, "c.json"), 9, sequential=True, max_fetches=int(os.environ.get("MAXF","150000")))
c1 = bl.tree_cpu({"s": procs["server"].pid})
t.join()
agg = collections.Counter()
pid = procs["server"].pid
for tid in os.listdir(f"/proc/{pid}/task"):
    comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()[:7]
    io = dict(l.split(": ") for l in open(f"/proc/{pid}/task/{tid}/io").read().splitlines())
    for k in ("syscr", "rchar", "read_bytes"):
        agg[(comm, k)] += int(io[k])
print(sorted(agg.items()), "fetches", r["fetches"])
bl.stop_all(procs)
print("req/s", r["req_s"], "us/req", 1e6 * (c1["s"] - c0["s"]) / r["fetches"], "p99", r["p99_ms"])
