#!/usr/bin/env python3
"""Hot 100 KiB 2 GiB set: server (seekless hybrid or nginx sendfile) pinned to CPU 0, client on
CPU 1 (loadgen or wrk), 8 s; perf stat on the server: chosen syscalls and context switches per request."""
import os, subprocess, sys, tempfile
sys.path.insert(0, "/work/main/bench")
import benchlib as bl
rounds = int(sys.argv[1]); combos = [c.split(":") for c in sys.argv[2].split(",")]
build = sys.argv[3] if len(sys.argv) > 3 else "/work/main/build"
ctx = bl.Context(build, "0", "1", 1, 100)
ctx.pick_ports()
root = "/var/tmp/seekless-bench/pool-100k-1"
src = open(f"{root}/urls.100k").read().split()[:20000]
files = [root + "/" + u.split("/", 3)[3] for u in src]
EV = ["sendfile64", "epoll_wait", "cachestat", "sendto", "recvfrom", "epoll_ctl", "writev", "sendmsg", "openat2", "close"]
for rnd in range(rounds):
    for srv, client in combos:
        cfg = (bl.Config("seekless-hybrid", "seekless", keys={"server.network-backend": '"hybrid"'})
               if srv == "seekless" else bl.Config("nginx-sendfile", "nginx"))
        out = tempfile.mkdtemp(prefix=f"wrkprof-{srv}-{client}-", dir="/var/tmp")
        urls = os.path.join(out, "urls")
        with open(urls, "w") as f:
            f.writelines(u.replace("18080", str(ctx.port)) + "\n" for u in src)
        os.sched_setaffinity(0, {1})
        procs, _ = bl.start_server(cfg, ctx, "pinned", out, root)
        try:
            bl.warm(files)
            pids = [procs["server"].pid] + [int(p) for p in subprocess.run(["pgrep", "-P", str(procs["server"].pid)], capture_output=True, text=True).stdout.split()]
            ps = subprocess.Popen(["perf", "stat", "-x,", "-e", ",".join(["syscalls:sys_enter_" + e for e in EV] + ["context-switches"]),
                                   "-p", ",".join(map(str, pids)), "-o", os.path.join(out, "pstat.txt"), "--", "sleep", "8"])
            c0 = bl.tree_cpu({"s": procs["server"].pid})
            if client == "wrk":
                r = bl.run_wrk(ctx, urls, os.path.join(out, "c.json"), 8)
            else:
                r = bl.run_loadgen(ctx, urls, os.path.join(out, "c.json"), 8)
            c1 = bl.tree_cpu({"s": procs["server"].pid})
            ps.wait()
        finally:
            bl.stop_all(procs)
        st = {}
        for line in open(os.path.join(out, "pstat.txt")):
            p = line.strip().split(",")
            if len(p) > 3 and p[0].replace(".", "").isdigit():
                st[p[2].replace("syscalls:sys_enter_", "")] = float(p[0])
        n = r["req_s"] * 8
        per = " ".join(f"{k}={v/n:.2f}" for k, v in st.items() if v / n >= 0.01)
        print(rnd, srv, client, f"{r['req_s']:.0f} req/s cpu {1e6*(c1['s']-c0['s'])/(r['req_s']*r.get('elapsed', 8) if 'elapsed' in r else n):.1f} us/req |", per, flush=True)
