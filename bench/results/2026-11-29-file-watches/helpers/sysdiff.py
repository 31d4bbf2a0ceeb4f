import subprocess, sys, re
def load(d, us):
    out = subprocess.run(["perf","report","-i",d+"/perf.data","--children","-g","none","--sort","sym","-q","--percent-limit","0.3"],capture_output=True,text=True).stdout
    m = {}
    for ln in out.splitlines():
        p = ln.split()
        if len(p) < 4 or not p[0].endswith("%"): continue
        m[p[-1]] = float(p[0][:-1]) * us / 100
    return m
a = load(sys.argv[1], float(sys.argv[2])); b = load(sys.argv[3], float(sys.argv[4]))
pat = re.compile(sys.argv[5] if len(sys.argv) > 5 else r"^(__x64_sys_|__do_sys|do_syscall_64|entry_SYSCALL|syscall_exit|exit_to_user|asm_|irq|__softirq|net_rx_action|do_softirq|handle_softirqs|tcp_|__tcp_|sock_|fsnotify|__fsnotify|inotify)")
for k in sorted(set(a)|set(b), key=lambda k: -max(a.get(k,0), b.get(k,0))):
    if pat.search(k):
        print(f"{k:45s} {a.get(k,0):6.2f} {b.get(k,0):6.2f} {b.get(k,0)-a.get(k,0):+6.2f}")
