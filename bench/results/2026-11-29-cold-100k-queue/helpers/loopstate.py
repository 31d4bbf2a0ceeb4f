#!/usr/bin/env python3
"""Where a running seekless's threads are: waits for a `seekless -D` process (started by coldq.py
in another shell), then for SECONDS samples every thread's state from /proc/PID/task/*/stat every
2 ms and prints the counts per thread name (pool threads summed) and state: R running, S sleeping,
D waiting for the disk. usage: loopstate.py SECONDS
"""
import sys,os,time,collections,subprocess
pid=None
t0=time.time()
while not pid and time.time()-t0<20:
    out=subprocess.run(["pgrep","-f","app/seekless -D"],capture_output=True,text=True).stdout.split()
    pid=out[0] if out else None
    time.sleep(0.05)
time.sleep(1.0)
c=collections.Counter(); n=0
t0=time.time()
while time.time()-t0<float(sys.argv[1]):
    try: tasks=os.listdir(f"/proc/{pid}/task")
    except OSError: break
    for t in tasks:
        try:
            st=open(f"/proc/{pid}/task/{t}/stat").read()
            comm=open(f"/proc/{pid}/task/{t}/comm").read().strip()
        except OSError: continue
        state=st.rsplit(")",1)[1].split()[0]
        if comm.startswith("sl-read"): comm="sl-read"
        if comm.startswith("sl-stat"): comm="sl-stat"
        c[(comm,state)]+=1
    n+=1
    time.sleep(0.002)
print(n, "samples"); [print(k,v) for k,v in sorted(c.items())]
