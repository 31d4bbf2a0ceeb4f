#!/usr/bin/env python3
"""server pinned to CPU 0, loadgen on CPU 1, 10 s; perf stat syscalls + perf record cpu-clock on CPU 0 for 5 s.
usage: floorprof.py POOL SERVER[,SERVER...]   (servers: seekless, nginx, floor, floor-keep-open)
env: BUILD (default /work/main/build), SECS (10), PRE (seconds of load before the measured run, 0:
none; bench/results/2026-11-29-admission-margin). Server seekless-st: seekless with the status
page, whose cache counters are printed after the run."""
import os, subprocess, sys, tempfile, threading, time
sys.path.insert(0, "/work/main/bench")
import benchlib as bl
pool = sys.argv[1]; servers = sys.argv[2].split(",")
SECS = int(os.environ.get("SECS", "10"))
ctx = bl.Context(os.environ.get("BUILD", "/work/main/build"), "0", "1", 1, 100)
ctx.pick_ports()
if pool == "4k-popular":
    root = "/var/tmp/seekless-bench/pool-4k-1"; src = open(f"{root}/urls.4k").read().split()[:15000]
elif pool == "100k":
    root = "/var/tmp/seekless-bench/pool-100k-1"; src = open(f"{root}/urls.100k").read().split()
else:
    root = "/var/tmp/seekless-bench/pool-100k-1"; src = open(f"{root}/urls.100k").read().split()[:20000]
files = [root + "/" + u.split("/", 3)[3] for u in src]
EV = ["inotify_add_watch", "inotify_rm_watch", "sendfile64", "epoll_wait", "cachestat", "recvfrom", "epoll_ctl", "writev", "sendmsg", "sendto", "openat", "openat2", "close", "newfstatat", "newfstat", "setsockopt", "read", "write"]
for srv in servers:
    cfg = {"seekless": bl.Config("seekless-hybrid", "seekless", keys={"server.network-backend": '"hybrid"'}),
           "seekless-simple": bl.Config("seekless-simple", "seekless", keys={"server.network-backend": '"hybrid"', "server.stat-cache-engine": '"simple"'}),
           "seekless-st": bl.Config("seekless-st", "seekless", keys={"server.network-backend": '"hybrid"', "status.status-url": '"/server-status"', "status.allow-networks": '( "127.0.0.0/8" )'}),
           "seekless-nocache": bl.Config("seekless-nocache", "seekless", keys={"server.network-backend": '"hybrid"', "server.stat-cache-engine": '"disable"'}),
           "seekless-mc256": bl.Config("seekless-mc256", "seekless", keys={"server.network-backend": '"hybrid"', "server.max-connections": 256}),
           "seekless-mc512": bl.Config("seekless-mc512", "seekless", keys={"server.network-backend": '"hybrid"', "server.max-connections": 512}),
           "nginx": bl.Config("nginx-sendfile", "nginx"),
           "floor": bl.Config("floor", "floor"),
           "floor-keep-open": bl.Config("floor-keep-open", "floor", keep_open=bl.fdcache_capacity())}[srv]
    out = tempfile.mkdtemp(prefix=f"floorprof-{srv}-", dir="/var/tmp")
    urls = os.path.join(out, "urls")
    with open(urls, "w") as f:
        f.writelines(u.replace("18080", str(ctx.port)) + "\n" for u in src)
    os.sched_setaffinity(0, {1})
    procs, _ = bl.start_server(cfg, ctx, "pinned", out, root)
    try:
        bl.warm(files)
        PRE = int(os.environ.get("PRE", "0"))
        if PRE: bl.run_loadgen(ctx, urls, os.path.join(out, "pre.json"), PRE); bl.warm(files)
        pids = [procs["server"].pid] + [int(p) for p in subprocess.run(["pgrep", "-P", str(procs["server"].pid)], capture_output=True, text=True).stdout.split()]
        def prof():
            time.sleep(3)
            subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-C", "0", "-g", "-o", os.path.join(out, "perf.data"), "--", "sleep", "5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t = threading.Thread(target=prof); t.start()
        ps = subprocess.Popen(["perf", "stat", "-x,", "-e", ",".join(["syscalls:sys_enter_" + e for e in EV] + ["context-switches"]),
                               "-p", ",".join(map(str, pids)), "-o", os.path.join(out, "pstat.txt"), "--", "sleep", str(SECS)])
        subprocess.run(["nstat", "-n"])
        c0 = bl.tree_cpu({"s": procs["server"].pid})
        r = bl.run_loadgen(ctx, urls, os.path.join(out, "c.json"), SECS)
        c1 = bl.tree_cpu({"s": procs["server"].pid})
        if srv == "seekless-st":
            import urllib.request
            txt = urllib.request.urlopen(f"http://127.0.0.1:{ctx.port}/server-status?format=prometheus").read().decode()
            print("\n".join(l for l in txt.splitlines() if "cache" in l and not l.startswith("#")))
            print(open(os.path.join(out, "error.log")).read()[-1500:] if os.path.exists(os.path.join(out, "error.log")) else "")
        ns = subprocess.run(["nstat", "-a" if False else "-s"], capture_output=True, text=True).stdout
        nst = {l.split()[0]: int(l.split()[1]) for l in ns.splitlines()[1:] if len(l.split()) >= 2 and l.split()[1].isdigit()}
        ps.wait(); t.join()
    finally:
        bl.stop_all(procs)
    st = {}
    for line in open(os.path.join(out, "pstat.txt")):
        p = line.strip().split(",")
        if len(p) > 3 and p[0].replace(".", "").isdigit():
            st[p[2].replace("syscalls:sys_enter_", "")] = float(p[0])
    n = r["req_s"] * SECS
    per = " ".join(f"{k}={v/n:.2f}" for k, v in st.items() if v / n >= 0.01)
    nreq = r["fetches"]
    print("   net per req:", " ".join(f"{k}={nst.get(k,0)/nreq:.2f}" for k in ("TcpInSegs","TcpOutSegs","TcpExtDelayedACKs","TcpExtTCPHPAcks","TcpExtTCPPureAcks","TcpExtTCPHPHits","TcpExtTCPAutoCorking","TcpExtTCPOrigDataSent")))
    print(srv, pool, f"{r['req_s']:.0f} req/s cpu {1e6*(c1['s']-c0['s'])/n:.1f} us/req |", per, out, flush=True)
