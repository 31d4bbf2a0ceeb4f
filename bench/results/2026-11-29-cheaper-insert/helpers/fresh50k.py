#!/usr/bin/env python3
"""The outside harness's regime: a fresh server, the set warmed, then a fixed number of requests
(50,000 by default), 100 keep-alive connections; server pinned to CPU 0, the client on CPU 1.
Rounds interleave the servers; prints req/s and server CPU us per request per run, then medians,
and each server's median ratio to the last server named (per client).
usage: fresh50k.py POOL ROUNDS NAME=BUILD[:ENGINE[:KEY=VALUE;...]]|nginx ...   (POOL: 4k-popular
or 100k-2g; ENGINE: server.stat-cache-engine, default inotify; then more seekless keys, e.g.
server.reuse-port="disable"). With several loops, the requests each served are printed. A seekless NAME=BUILD runs
BUILD/app/seekless, hybrid backend, status page on (its open-file cache counters are printed).
env:
  FETCHES   requests per run (50000)
  CLIENTS   comma list of loadgen (default) and wrk; wrk runs bench/wrk-urls.lua with its request
            limit, so it also stops after FETCHES requests (it reports the responses back by
            then, up to 100 fewer). Every round runs every server under every client, each run
            on a fresh server.
  PERF=1    perf record -g on CPU 0 during each run, into the run's folder (printed)
  PRESLEEP  seconds to wait between the warming and the run
  UNPINNED  N: nothing pinned, seekless with N loops (server.max-worker), nginx
            worker_processes auto, the client free to run on either core."""
import os, statistics, subprocess, sys, tempfile, urllib.request
sys.path.insert(0, "/work/main/bench")
import benchlib as bl
pool, rounds, specs = sys.argv[1], int(sys.argv[2]), [a.split("=", 1) for a in sys.argv[3:]]
FETCHES = int(os.environ.get("FETCHES", "50000"))
if pool == "4k-popular":
    root = "/var/tmp/seekless-bench/pool-4k-1"; src = open(f"{root}/urls.4k").read().split()[:15000]
else:
    root = "/var/tmp/seekless-bench/pool-100k-1"; src = open(f"{root}/urls.100k").read().split()[:20000]
files = [root + "/" + u.split("/", 3)[3] for u in src]
clients = os.environ.get("CLIENTS", "loadgen").split(",")
WORKERS = int(os.environ.get("UNPINNED", "0"))
res = {(c, n): [] for c in clients for n, _ in specs}
for rnd in range(rounds):
  for client in clients:
    for name, what in specs:
        build, _, rest = what.partition(":")
        engine, _, more = rest.partition(":")
        extra_keys = dict(kv.split("=", 1) for kv in more.split(";") if kv)
        ctx = bl.Context("/work/main/build" if what == "nginx" else build, "0", "1", WORKERS, 100)
        ctx.pick_ports()
        cfg = (bl.Config("nginx-sendfile", "nginx") if what == "nginx" else
               bl.Config("seekless-st", "seekless", keys={"server.network-backend": '"hybrid"',
                         "status.status-url": '"/server-status"', "status.allow-networks": '( "127.0.0.0/8" )',
                         "server.stat-cache-engine": f'"{engine or "inotify"}"', **extra_keys}))
        if WORKERS:
            # Unpinned: server and client share both cores (nginx worker_processes auto)
            out = tempfile.mkdtemp(prefix=f"fresh50k-{name}-", dir="/var/tmp")
            urls = os.path.join(out, "urls")
            with open(urls, "w") as f:
                f.writelines(u.replace("18080", str(ctx.port)) + "\n" for u in src)
            os.sched_setaffinity(0, set(range(os.cpu_count())))
            procs, _ = bl.start_server(cfg, ctx, "unpinned", out, root)
        else:
            out, urls, procs = bl.start_pinned_probe(cfg, ctx, src, root, f"fresh50k-{name}-")
        try:
            bl.warm(files)
            perf = None
            if os.environ.get("PRESLEEP"):
                import time; time.sleep(float(os.environ["PRESLEEP"]))
            if os.environ.get("PERF"):
                perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-C", "0", "-g", "-o",
                                         os.path.join(out, "perf.data")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                import time; time.sleep(0.5)
            def minflt():
                return sum(int(open(f"/proc/{procs['server'].pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[7])
                           for t in os.listdir(f"/proc/{procs['server'].pid}/task"))
            f0 = minflt()
            c0 = bl.tree_cpu({"s": procs["server"].pid})
            if client == "wrk":
                r = bl.run_wrk(ctx, urls, os.path.join(out, "c.json"), 60, max_requests=FETCHES)
            else:
                r = bl.run_loadgen(ctx, urls, os.path.join(out, "c.json"), 60, max_fetches=FETCHES)
            c1 = bl.tree_cpu({"s": procs["server"].pid})
            faults = minflt() - f0
            if perf:
                perf.send_signal(2); perf.wait()
            extra = ""
            if what != "nginx":
                txt = urllib.request.urlopen(f"http://127.0.0.1:{ctx.port}/server-status?format=prometheus").read().decode()
                extra = " ".join(l.split("{")[0].replace("seekless_cache_", "") + "=" + l.split()[-1]
                                 for l in txt.splitlines() if "open-files" in l and not l.startswith("#"))
                per_loop = [l.split()[-1] for l in txt.splitlines()
                            if l.startswith("seekless_loop_requests") and 'loop="' in l]
                if len(per_loop) > 1:
                    extra += " loop_requests=" + "/".join(per_loop)
        finally:
            bl.stop_all(procs)
        us = 1e6 * (c1["s"] - c0["s"]) / r["fetches"]
        res[(client, name)].append((r["req_s"], us))
        print(f"r{rnd + 1} {client:7s} {name:10s} {r['fetches']} req {r['req_s']:8.0f} req/s {us:5.1f} us/req non200={r['non_200']} p99={r['p99_ms']:.2f} faults={faults} {extra}{' ' + out if perf else ''}", flush=True)
ref = specs[-1][0]
for client in clients:
  for name, _ in specs:
    rs = [x[0] for x in res[(client, name)]]; us = [x[1] for x in res[(client, name)]]
    ratios = [a[0] / b[0] for a, b in zip(res[(client, name)], res[(client, ref)])]
    print(f"median {client:7s} {name:10s} {statistics.median(rs):8.0f} req/s {statistics.median(us):5.1f} us/req  ratio to {ref}: {statistics.median(ratios):.2f}x (per round {', '.join(f'{x:.2f}' for x in ratios)})")
