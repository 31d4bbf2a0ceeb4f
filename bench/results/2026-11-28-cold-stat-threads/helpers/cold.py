#!/usr/bin/env python3
"""cold.py pool fetches rounds name=cmd ... : drop_caches before each run, distinct URLs."""
import json, os, subprocess, sys, time, statistics, signal
W = os.environ.get("W", "/tmp/pr")  # work files; the helpers are expected there
pool, fetches, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
servers = [a.split("=", 1) for a in sys.argv[4:]]
root = f"/var/tmp/seekless-bench/pool-{pool}-1"; port = 18090
lines = [l.replace("127.0.0.1:18080", f"127.0.0.1:{port}") for l in open(f"{root}/urls.{pool}")]
res = {n: [] for n, _ in servers}
for r in range(rounds):
    order = servers[r % len(servers):] + servers[:r % len(servers)]
    for i, (name, cmd) in enumerate(order):
        start = ((r * len(servers) + i) * fetches) % (len(lines) - fetches)
        open(W + "/urls-cold", "w").writelines(lines[start:start + fetches])
        subprocess.run("sync; echo 3 > /proc/sys/vm/drop_caches", shell=True)
        cmd = cmd.replace("ROOT", root).replace("PORT", str(port))
        p = subprocess.Popen(["taskset", "-c", "0", "sh", "-c", "exec " + cmd], start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=open(f"{W}/{name}.err", "w"))
        time.sleep(0.7)
        subprocess.run(["taskset", "-c", "1", "/work/main/build/bench/loadgen", "-keepalive", "-parallel", "100",
                        "-sequential", "-fetches", str(fetches), "-json", W + "/lgc.json", W + "/urls-cold"], capture_output=True)
        d = json.load(open(W + "/lgc.json"))
        os.killpg(p.pid, signal.SIGTERM); p.wait()
        res[name].append((d["fetches_per_s"], d["fetch_ms"]["p99"]))
        print(f"round {r} {name}: {d['fetches_per_s']:.0f} req/s p99 {d['fetch_ms']['p99']:.1f} ms {d['status']} ", flush=True)
base = servers[0][0]
for name, _ in servers:
    ratios = [a[0] / b[0] for a, b in zip(res[name], res[base])]
    print(f"{name:16s} median {statistics.median(x[0] for x in res[name]):7.0f} req/s p99 {statistics.median(x[1] for x in res[name]):6.1f} ms  vs {base}: {statistics.median(ratios):.2f}x {['%.2f'%x for x in ratios]}")
