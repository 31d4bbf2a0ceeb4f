"""benchlib: what bench/run and bench/profile share.

Server configurations (written from the templates in bench/peers/), starting and stopping servers
and the stat accelerator, the two load generators (bench/loadgen, which drops bodies in the kernel,
and wrk with bench/wrk-urls.lua, which copies them), CPU accounting from /proc, page-cache control
(drop_caches, warming, fincore residency), pools (bench/mkpool) and the machine description.

Design notes. Every process started here leads its own session and is registered in `children`;
it is stopped by signalling its process group (by the leader's PID), from a finally block, an
atexit hook and on SIGINT/SIGTERM, so nothing outlives a run. Server CPU time is read from
/proc/PID/stat of every process of the server's tree right before and right after the load
(utime+stime cover all threads of a process, cutime+cstime its reaped children); nothing samples
during the run, so the harness takes no CPU from the load generator while it runs. Client CPU
comes from the client's own rusage (os.wait4). Only 127.0.0.1 is ever addressed.
"""
import glob
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PEERS = os.path.join(HERE, "peers")
WRK_LUA = os.path.join(HERE, "wrk-urls.lua")
MKPOOL = os.path.join(HERE, "mkpool")
POOL_KINDS = ("4k", "4k-popular", "100k", "100k-2g", "100k-1g", "10m")
FILE_SIZE = {"4k": 4096, "4k-popular": 4096, "100k": 100 * 1024, "100k-2g": 100 * 1024,
             "100k-1g": 100 * 1024, "10m": 10 * 1024 * 1024}
# The outside harness's hot workloads (issue 16), each a part of a pool asked for at random: a
# popular set of 15,000 of the 4 KiB pool's 200,000 files, and a warmed 2 GiB pool of 100 KiB
# files (20,000 of the 100,000). Each is the first files of mkpool's shuffled list (spread over
# the whole tree) and runs hot only. The third, 1 GiB (10,000 files), is the accelerator's hot set:
# lighttpd 1.4 keeps a descriptor open for each file in its stat cache, so
# over a larger hot set it runs out of descriptors where the hard RLIMIT_NOFILE is 20,000 and
# answers 503 (bench/results/2026-11-27-stat-accel/NOTE.md).
SUBSETS = {"4k-popular": ("4k", 15000), "100k-2g": ("100k", 20000), "100k-1g": ("100k", 10000)}
HOT_ONLY = set(SUBSETS)
children = []  # Popen objects we started; each leads its own session


def log(msg):
    print(msg, flush=True)


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=True, **kw)


def capture(argv):
    """stdout+stderr of a command, or "" when it cannot run."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return (r.stdout + r.stderr).strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


class Skip(Exception):
    """A configuration that cannot run here (refused key, missing binary); not a failure."""


def ncpus():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def all_cpus():
    return set(range(os.cpu_count() or 1))


# ---------------------------------------------------------------- CPU time from /proc

def proc_children():
    """pid -> parent pid for every process."""
    parent = {}
    for st in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(st) as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rindex(")") + 2:].split()
        parent[int(st.split("/")[2])] = int(fields[1])
    return parent


def proc_tree(root, parent=None):
    """PIDs of root and all its descendants."""
    parent = parent if parent is not None else proc_children()
    kids = {}
    for c, p in parent.items():
        kids.setdefault(p, []).append(c)
    out, todo = {root}, [root]
    while todo:
        for c in kids.get(todo.pop(), ()):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def cpu_ticks(pid):
    """utime+stime of all threads of pid, plus cutime+cstime of its reaped children."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return 0
    fields = data[data.rindex(")") + 2:].split()
    return sum(int(x) for x in fields[11:15])


def tree_cpu(roots):
    """{name: CPU seconds so far} of each named process tree (name -> root pid)."""
    parent = proc_children()
    hz = os.sysconf("SC_CLK_TCK")
    return {n: sum(cpu_ticks(p) for p in proc_tree(r, parent)) / hz for n, r in roots.items()}


def cpu_stat():
    """{"all": (total, idle, iowait), "0": (...), "1": (...), ...} jiffies from /proc/stat."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu"):
                break
            x = line.split()
            v = [int(n) for n in x[1:]]
            out[x[0][3:] or "all"] = (sum(v), v[3], v[4])
    return out


def busy_pct(s0, s1, cpus):
    """% of the time cpus ("all", a number, or a taskset-style list "0,2") were neither idle
    nor waiting for I/O, averaged over them."""
    vals = []
    for cpu in str(cpus).split(","):
        a, b = s0.get(cpu.strip()), s1.get(cpu.strip())
        if a and b and b[0] > a[0]:
            tot = b[0] - a[0]
            vals.append(100.0 * (tot - (b[1] - a[1]) - (b[2] - a[2])) / tot)
    return sum(vals) / len(vals) if vals else 0.0


# ---------------------------------------------------------------- disk and page cache

def pool_disk(path):
    """Whole-disk name in /proc/diskstats for the filesystem holding path (util% is per disk)."""
    st = os.stat(path)
    link = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if not os.path.exists(link):
        return None
    real = os.path.realpath(link)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    return os.path.basename(real)


def disk_stats(disk):
    with open("/proc/diskstats") as f:
        for line in f:
            x = line.split()
            if x[2] == disk:
                return {"reads": int(x[3]), "rsect": int(x[5]), "writes": int(x[7]),
                        "wsect": int(x[9]), "io_ms": int(x[12])}
    return {"reads": 0, "rsect": 0, "writes": 0, "wsect": 0, "io_ms": 0}


def drop_caches():
    sh("sync")
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def residency(files):
    """Fraction of the files' bytes in the page cache, from fincore."""
    res = size = 0
    for i in range(0, len(files), 1000):
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES,SIZE",
                              *files[i:i + 1000]], capture_output=True, text=True).stdout
        for line in out.splitlines():
            a, b = line.split()
            res += int(a)
            size += int(b)
    return res / size if size else 1.0


def warm(files):
    """Read every file now: this kernel reclaims file pages idle for ~30 s, so a hot run warms
    its whole pool right before it starts."""
    buf = bytearray(1 << 20)
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            while os.readv(fd, [buf]) == len(buf):
                pass
        finally:
            os.close(fd)


# ---------------------------------------------------------------- ports, templates

def port_free(port):
    with socket.socket() as s:
        # SO_REUSEADDR as the servers use it: TIME_WAIT leftovers do not count, a listener does.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def find_port(start, avoid=()):
    for p in range(start, start + 200):
        if p not in avoid and port_free(p):
            return p
    sys.exit(f"no free port in {start}..{start + 199} on 127.0.0.1")


def template(name, **values):
    with open(os.path.join(PEERS, name)) as f:
        return string.Template(f.read()).substitute(values)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


# ---------------------------------------------------------------- context

class Context:
    """Paths and settings every run needs (filled in by bench/run or bench/profile)."""

    def __init__(self, build, server_cpu="0", load_cpu="1", seekless_workers=1, parallel=100):
        self.build = os.path.abspath(build)
        self.seekless = os.path.join(self.build, "app", "seekless")
        self.accel = os.path.join(self.build, "fcgi_stat_accel", "fcgi-stat-accel")
        self.floor = os.path.join(self.build, "bench", "floor")
        self.loadgen = next((p for p in (os.path.join(self.build, "bench", "loadgen"),
                                         os.path.join(self.build, "bench", "loadgen", "loadgen"))
                             if os.path.isfile(p) and os.access(p, os.X_OK)), None)
        self.server_cpu, self.load_cpu = server_cpu, load_cpu
        self.seekless_workers = seekless_workers
        self.parallel = parallel
        self.port = self.accel_port = None
        self.tls = None  # with bench/run --tls: {"cert", "key", "pem"} (make_tls_cert)

    @property
    def scheme(self):
        return "https" if self.tls else "http"

    def pick_ports(self):
        self.port = find_port(18080)
        self.accel_port = find_port(self.port + 1)

    def ensure_ports(self, accel):
        """Pick new ports when another process took ours since (a shared machine runs other
        programs that bind ports too); returns True when they changed."""
        if port_free(self.port) and (not accel or port_free(self.accel_port)):
            return False
        old = (self.port, self.accel_port)
        self.pick_ports()
        log(f"    ports {old[0]}/{old[1]} taken by another process, now {self.port}/"
            f"{self.accel_port}")
        return True

    def seekless_backends(self):
        """(backends seekless was built with, the default one), from `seekless -V`."""
        out = capture([self.seekless, "-V"])
        names = re.findall(r"^network-backend: (\S+)", out, re.M)
        default = re.search(r"^network-backend: (\S+) \(default\)", out, re.M)
        return names, (default.group(1) if default else (names or ["hybrid"])[0])


# ---------------------------------------------------------------- configurations

class Config:
    """One server configuration.

    kind: seekless | nginx | lighttpd | apache | floor (bench/floor/floor.c); keys: seekless
    config keys; accel: None, "tcp" or "unix" (start fcgi-stat-accel and route requests to it);
    group: the table it belongs to ("main", "accel" or a sweep); headline: cross-checked with
    wrk; workloads: the (pool, cache) pairs it runs on (None: all)."""

    def __init__(self, name, kind, group="main", param="", keys=None, accel=None,
                 workloads=None, headline=False, **opts):
        self.name, self.kind, self.group, self.param = name, kind, group, param
        self.keys, self.accel, self.workloads, self.opts = keys or {}, accel, workloads, opts
        self.headline = headline

    def runs_on(self, pool, cache):
        return self.workloads is None or (pool, cache) in self.workloads

    def loops(self, ctx, mode):
        """Event loops (processes or threads serving connections) this configuration runs."""
        if mode == "pinned":
            return 1
        if self.kind == "nginx":
            return ncpus()
        if self.kind == "seekless":
            return ctx.seekless_workers
        return 1

    def accel_addr(self, ctx, run):
        """(spawn-fcgi address args, seekless backend string, lighttpd backend) or None."""
        if self.accel == "tcp":
            return (["-a", "127.0.0.1", "-p", str(ctx.accel_port)],
                    f"127.0.0.1:{ctx.accel_port}",
                    f'"host" => "127.0.0.1", "port" => {ctx.accel_port}')
        if self.accel == "unix":
            sock = os.path.join(run, "accel.sock")
            return (["-s", sock, "-M", "0666"], f"unix:{sock}", f'"socket" => "{sock}"')
        return None

    def prepare(self, ctx, mode, run, root):
        """Write the config files under run; return (argv, env, [config files]) or raise Skip."""
        if self.accel and not os.access(ctx.accel, os.X_OK):
            raise Skip(f"stat accelerator not built ({ctx.accel} missing)")
        return getattr(self, "prep_" + self.kind)(ctx, mode, run, root)

    def prep_seekless(self, ctx, mode, run, root):
        if not os.access(ctx.seekless, os.X_OK):
            raise Skip(f"{ctx.seekless} not built")
        keys = dict(self.keys)
        if self.accel:
            keys.update({"proxy-core.protocol": '"fastcgi"',
                         "proxy-core.backends": f'( "{self.accel_addr(ctx, run)[1]}" )',
                         "proxy-core.allow-x-sendfile": '"enable"',
                         "proxy-core.max-pool-size": 20})
        n = self.loops(ctx, mode)
        # Always named: seekless's own default (0) is one loop per core it may run on, which
        # unpinned is every core, not the one loop a row with --seekless-workers 1 says it ran.
        workers = f"server.max-worker = {n}"
        if ctx.tls:
            keys.update({"ssl.engine": '"enable"', "ssl.pemfile": f'"{ctx.tls["pem"]}"'})
        extra = "".join(f"{k} = {v}\n" for k, v in keys.items())
        conf = write(os.path.join(run, "seekless.conf"),
                     template("seekless.conf", root=root, port=ctx.port, run=run,
                              workers=workers, extra=extra))
        t = subprocess.run([ctx.seekless, "-t", "-f", conf], capture_output=True, text=True)
        if t.returncode != 0:
            lines = (t.stderr or t.stdout).strip().splitlines() or [f"exit {t.returncode}"]
            raise Skip("not implemented: seekless -t refused the config: "
                       + lines[-1].split(".conf:", 1)[-1].strip())
        return [ctx.seekless, "-D", "-f", conf], None, [conf]

    def prep_nginx(self, ctx, mode, run, root):
        if not shutil.which("nginx"):
            raise Skip("nginx not installed")
        aio = self.opts.get("aio")
        if aio and "--with-threads" not in capture(["nginx", "-V"]):
            raise Skip("this nginx was built without --with-threads (no aio threads)")
        conf = write(os.path.join(run, "nginx.conf"), template(
            "nginx.conf", root=root, port=ctx.port, run=run,
            workers="1" if mode == "pinned" else "auto", aio="aio threads;" if aio else "",
            affinity="worker_cpu_affinity auto;" if self.opts.get("affinity") else "",
            open_file_cache=("open_file_cache max=16384 inactive=20s; open_file_cache_valid 1s;"
                             if self.opts.get("open_file_cache") else ""),
            listen_ssl=" ssl" if ctx.tls else "",
            ssl=(f"ssl_protocols TLSv1.2 TLSv1.3; ssl_certificate {ctx.tls['cert']}; "
                 f"ssl_certificate_key {ctx.tls['key']};") if ctx.tls else ""))
        return ["nginx", "-c", conf, "-p", run], None, [conf]

    def prep_lighttpd(self, ctx, mode, run, root):
        if not shutil.which("lighttpd"):
            raise Skip("lighttpd not installed")
        fcgi = ""
        if self.accel:
            fcgi = template("lighttpd-fastcgi.conf", root=root,
                            backend=self.accel_addr(ctx, run)[2])
        conf = write(os.path.join(run, "lighttpd.conf"),
                     template("lighttpd.conf", root=root, port=ctx.port, run=run, fastcgi=fcgi,
                              max_fds=lighttpd_max_fds()))
        # lighttpd 1.4.69 opens its error log after dropping to www-data.
        elog = os.path.join(run, "error.log")
        write(elog, "")
        shutil.chown(elog, "www-data", "www-data")
        t = subprocess.run(["lighttpd", "-tt", "-f", conf], capture_output=True, text=True)
        if t.returncode != 0:
            raise Skip("lighttpd -tt refused the config: " + (t.stderr + t.stdout).strip()[-300:])
        return ["lighttpd", "-D", "-f", conf], None, [conf]

    def prep_floor(self, ctx, mode, run, root):
        if not os.access(ctx.floor, os.X_OK):
            raise Skip(f"{ctx.floor} not built")
        keep = self.opts.get("keep_open")
        return ([ctx.floor, str(ctx.port), root] + (["--keep-open", str(keep)] if keep else []),
                None, [])

    def prep_apache(self, ctx, mode, run, root):
        mods = "/usr/lib/apache2/modules"
        if not os.path.isdir(mods):
            raise Skip("apache2 not installed")
        conf = write(os.path.join(run, "httpd.conf"),
                     template("apache2.conf", root=root, port=ctx.port, run=run, modules=mods))
        # Debian's apache2 reads these from /etc/apache2/envvars; point them all at the run dir.
        env = {"APACHE_RUN_DIR": run, "APACHE_PID_FILE": f"{run}/httpd.pid",
               "APACHE_LOCK_DIR": run, "APACHE_LOG_DIR": run, "APACHE_RUN_USER": "nobody",
               "APACHE_RUN_GROUP": "nogroup", "LANG": "C"}
        return ["apache2", "-f", conf, "-DFOREGROUND"], env, [conf]


def fdcache_capacity():
    """The files seekless's open-file cache holds at its defaults (server/server.c): the hard
    RLIMIT_NOFILE less 4 descriptors per connection slot (1,024) and 256, at most 65,536; 15,648
    under this machine's 20,000. The floor's --keep-open row keeps as many."""
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    left = 65536 if hard == resource.RLIM_INFINITY else hard - (4 * 1024 + 256)
    return max(0, min(65536, left))


def lighttpd_max_fds():
    """32768 (see lighttpd.conf), or the hard RLIMIT_NOFILE when that is lower: lighttpd cannot
    raise it without CAP_SYS_RESOURCE (containers), and says so at every start otherwise."""
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return 32768 if hard == resource.RLIM_INFINITY else min(32768, hard)


SWEEPS_FULL = {"read-threads": (1, 2, 4, 8, 16, 32, 64), "stat-threads": (0, 1, 2, 4, 8, 12, 16),
               "block": (256, 512, 1024), "noatime": ("disable", "enable")}
SWEEPS_QUICK = {"read-threads": (1, 4, 16, 64), "stat-threads": (0, 1, 4, 16),
                "block": (256, 1024), "noatime": ("disable", "enable")}
# The whole pools hot need more descriptors than 20,000 on lighttpd's side (see SUBSETS); the two
# smaller hot sets do not.
ACCEL_WORKLOADS = {("4k", "cold"), ("4k", "hot"), ("100k", "cold"), ("100k", "hot"),
                   ("4k-popular", "hot"), ("100k-1g", "hot")}


def configurations(backends, default_backend, every_backend=False, apache=False, sweeps=None,
                   floor=False):
    """Every configuration bench/run knows. Headline rows (cross-checked with wrk): seekless with
    its default backend, nginx, lighttpd and the stat-accelerator rows."""
    out = []
    for b in backends:
        if b != default_backend and not every_backend:
            continue
        out.append(Config(f"seekless-{b}", "seekless", param=b, headline=b == default_backend,
                          keys={"server.network-backend": f'"{b}"'}))
        if b == default_backend:
            # Loops bound to CPUs (server.worker-cpu-affinity "auto"; unpinned rows only).
            out.append(Config(f"seekless-{b}-affinity", "seekless", param=b, headline=True,
                              affinity=True,
                              keys={"server.network-backend": f'"{b}"',
                                    "server.worker-cpu-affinity": '"auto"'}))
    for mode in ("tcp", "unix"):
        out.append(Config(f"seekless-stat-accel-{mode}", "seekless", group="accel", param=mode,
                          accel=mode, workloads=ACCEL_WORKLOADS, headline=True))
    out.append(Config("nginx-sendfile", "nginx", headline=True))
    out.append(Config("nginx-aio-threads", "nginx", aio=True, headline=True))
    # nginx with its workers bound to CPUs, as seekless binds its loops by default (unpinned rows
    # only: bench/run skips them pinned, where taskset binds every server).
    out.append(Config("nginx-sendfile-affinity", "nginx", affinity=True, headline=True))
    out.append(Config("nginx-aio-threads-affinity", "nginx", aio=True, affinity=True,
                      headline=True))
    # The hot sets (a popular set, 2 GiB of 100 KiB files) are where an open-file cache pays:
    # nginx's, as its users turn it on, beside nginx as it ships (the ratio's peer).
    out.append(Config("nginx-sendfile-open-file-cache", "nginx", open_file_cache=True,
                      workloads={(k, "hot") for k in SUBSETS}, headline=True))
    out.append(Config("lighttpd-1.4", "lighttpd", headline=True))
    if floor:
        # The calibration rows (bench/run --floor; hot only, as floor reads files on its one
        # thread): the least a server can do per request on this kernel, without and with
        # descriptors kept open (as many as seekless's open-file cache holds).
        hot = {(k, "hot") for k in POOL_KINDS}
        out.append(Config("floor", "floor", workloads=hot, headline=True))
        out.append(Config("floor-keep-open", "floor", workloads=hot, headline=True,
                          keep_open=fdcache_capacity()))
    for mode in ("tcp", "unix"):  # the same accelerator over the same kind of socket
        out.append(Config(f"lighttpd-1.4-stat-accel-{mode}", "lighttpd", group="accel",
                          param=mode, accel=mode, workloads=ACCEL_WORKLOADS, headline=True))
    if apache:
        out.append(Config("apache-event", "apache"))
    if sweeps:
        # The articles swept gthread-aio on the cold 100k pool (threads, noatime) and
        # linux-aio-sendfile's chunk size on 10 MiB files.
        base_b = "gthread-aio" if "gthread-aio" in backends else default_backend
        base = {"server.network-backend": f'"{base_b}"'}
        small, large = {("100k", "cold")}, {("10m", "cold")}
        for n in sweeps["read-threads"]:
            out.append(Config(f"sweep-read-threads-{n}", "seekless", group="read-threads",
                              param=n, workloads=small,
                              keys=dict(base, **{"server.max-read-threads": n})))
        for n in sweeps["stat-threads"]:
            out.append(Config(f"sweep-stat-threads-{n}", "seekless", group="stat-threads",
                              param=n, workloads=small,
                              keys=dict(base, **{"server.max-stat-threads": n})))
        for kib in sweeps["block"]:
            out.append(Config(f"sweep-block-{kib}k", "seekless", group="block", param=kib,
                              workloads=large,
                              keys=dict(base, **{"server.network-backend-block-size": kib * 1024})))
        for v in sweeps["noatime"]:
            out.append(Config(f"sweep-noatime-{v}", "seekless", group="noatime", param=v,
                              workloads=small, keys=dict(base, **{"server.use-noatime": f'"{v}"'})))
    return out


# ---------------------------------------------------------------- processes

def wait_listening(p, addr, what, logfile, timeout=10):
    deadline = time.time() + timeout
    fam = socket.AF_UNIX if isinstance(addr, str) else socket.AF_INET
    while time.time() < deadline:
        if p.poll() is not None:
            with open(logfile, errors="replace") as f:
                raise RuntimeError(f"{what} exited with {p.returncode}: {f.read()[-500:]}")
        try:
            with socket.socket(fam) as s:
                s.settimeout(0.2)
                s.connect(addr)
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} is not listening on {addr} after {timeout} s")


def spawn(argv, env, logfile, cpus=None):
    """Start argv in its own session, pinned to cpus (a taskset list) when given."""
    e = dict(os.environ, **(env or {}))
    with open(logfile, "w") as out:
        p = subprocess.Popen((["taskset", "-c", cpus] if cpus else []) + argv, stdout=out,
                             stderr=subprocess.STDOUT, env=e, start_new_session=True)
    children.append(p)
    return p


def signal_group(p, sig):
    """Send sig to p's process group (p leads its own session); False when it is gone."""
    try:
        os.killpg(p.pid, sig)
        return True
    except ProcessLookupError:
        return False


def stop(p):
    """Stop p's whole process group (nginx workers, accelerator threads) by its PID."""
    if p.poll() is None:
        signal_group(p, signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            signal_group(p, signal.SIGKILL)
            p.wait()
    # Workers may outlive their master for a moment.
    deadline = time.time() + 5
    while signal_group(p, 0):
        if time.time() > deadline:
            signal_group(p, signal.SIGKILL)
            break
        time.sleep(0.05)
    if p in children:
        children.remove(p)


def kill_children():
    for p in list(children):
        signal_group(p, signal.SIGKILL)
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        children.remove(p)


def on_signal(signum, _frame):
    # Unwind through the finally blocks (they stop the servers and write partial tables).
    raise KeyboardInterrupt(f"signal {signum}")


def start_pinned_probe(cfg, ctx, urls, root, prefix):
    """For the results folders' probe helpers: a fresh folder under /var/tmp (prefix), the URL
    list written there for ctx's port (urls are bench/mkpool's, on port 18080), this process
    moved to CPU 1 and cfg started pinned to CPU 0. Returns (folder, URL list path, procs)."""
    out = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
    path = os.path.join(out, "urls")
    with open(path, "w") as f:
        f.writelines(u.replace("18080", str(ctx.port)) + "\n" for u in urls)
    os.sched_setaffinity(0, {1})
    procs, _ = start_server(cfg, ctx, "pinned", out, root)
    return out, path, procs


def start_server(cfg, ctx, mode, run, root):
    """Write cfg's configuration under run and start it (and its accelerator); returns
    ({"server": Popen, ["accel": Popen]}, [config files]). Pinned mode puts both on
    ctx.server_cpu."""
    os.chmod(run, 0o755)  # workers running as www-data/nobody look inside (sockets, temp dirs)
    argv, env, confs = cfg.prepare(ctx, mode, run, root)
    for port in [ctx.port] + ([ctx.accel_port] if cfg.accel == "tcp" else []):
        if not port_free(port):
            raise RuntimeError(f"127.0.0.1:{port} is taken by another process")
    cpus = ctx.server_cpu if mode == "pinned" else None
    procs = {}
    try:
        if cfg.accel:
            addr = cfg.accel_addr(ctx, run)
            # --readahead: the accelerator's prefetch, on for both front ends (its default).
            acc_argv = ["spawn-fcgi", "-n", *addr[0], "--", ctx.accel, "--threads", "16",
                        "--readahead", "1048576", "--root", root]
            alog = os.path.join(run, "accel.log")
            procs["accel"] = spawn(acc_argv, None, alog, cpus)
            wait_listening(procs["accel"], os.path.join(run, "accel.sock")
                           if cfg.accel == "unix" else ("127.0.0.1", ctx.accel_port),
                           "fcgi-stat-accel", alog)
        slog = os.path.join(run, "stdout.log")
        procs["server"] = spawn(argv, env, slog, cpus)
        wait_listening(procs["server"], ("127.0.0.1", ctx.port), argv[0], slog)
    except BaseException:
        for p in reversed(list(procs.values())):
            stop(p)
        raise
    return procs, confs


def stop_all(procs):
    for p in reversed(list(procs.values())):
        stop(p)


# ---------------------------------------------------------------- pools

class Pool:
    """A pool made by bench/mkpool: its root, URL paths (mkpool's shuffled order) and files."""

    def __init__(self, kind, root, paths):
        self.kind, self.root, self.paths = kind, root, paths
        self.files = [root + p for p in paths]

    def write_urls(self, path, port, paths=None):
        with open(path, "w") as f:
            f.writelines(f"http://127.0.0.1:{port}{p}\n" for p in (paths or self.paths))
        return path


def make_pool(kind, pool_dir, scale):
    if kind in SUBSETS:
        whole, n = SUBSETS[kind]
        base = make_pool(whole, pool_dir, scale)
        return Pool(kind, base.root, base.paths[:max(1, round(n * scale))])
    root = os.path.join(pool_dir, f"pool-{kind}-{scale:g}")
    urls = os.path.join(root, f"urls.{kind}")
    if not os.path.exists(urls):
        log(f"making the {kind} pool at scale {scale:g} in {root} (bench/mkpool)")
        sh([sys.executable, MKPOOL, "--root", root, "--scale", str(scale), "--pool", kind,
            "--base-url", "http://127.0.0.1:18080"])
    with open(urls) as f:
        paths = [m.group(1) for line in f
                 if (m := re.match(r"http://[^/]+(/\S*)", line.strip()))]
    return Pool(kind, root, paths)


# ---------------------------------------------------------------- load generators

def _wait(p, timeout):
    """Wait for p like Popen.wait, but return its rusage CPU seconds (user+sys) too."""
    deadline = time.time() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return ru.ru_utime + ru.ru_stime
        if time.time() > deadline:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            raise RuntimeError(f"{p.args[0]} did not finish in {timeout:.0f} s (killed)")
        time.sleep(0.02)


def _run_client(argv, json_path, timeout, env=None):
    """Run a client writing its JSON report to json_path; returns (report, CPU seconds)."""
    with open(json_path + ".out", "w") as out, open(json_path + ".err", "w") as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        cpu = _wait(p, timeout)
    if p.returncode != 0 or not os.path.exists(json_path):
        with open(json_path + ".err") as f:
            raise RuntimeError(f"{os.path.basename(argv[0])} exited with {p.returncode}: "
                               + f.read()[-500:])
    with open(json_path) as f:
        return json.load(f), cpu


def run_loadgen(ctx, urls, json_path, seconds, min_fetches=None, max_fetches=None,
                sequential=False, copy=False, keepalive=True, seed=1):
    """Run bench/loadgen (on the harness's CPUs); returns the client row fields."""
    argv = [ctx.loadgen, "-parallel", str(ctx.parallel), "-seconds", f"{seconds:g}",
            "-timeout", "30", "-seed", str(seed), "-json", json_path]
    argv += ["-keepalive"] if keepalive else []
    argv += ["-sequential"] if sequential else []
    argv += ["-copy"] if copy else []
    argv += ["-min-fetches", str(min_fetches)] if min_fetches else []
    argv += ["-fetches", str(max_fetches)] if max_fetches else []
    argv.append(urls)
    r, cpu = _run_client(argv, json_path, seconds + 600)
    ok = r["fetches"] > 0
    return {"client": "loadgen", "argv": argv,
            "fetches": r["fetches"], "elapsed": r["elapsed_s"],
            "req_s": r["fetches_per_s"], "bytes": r["bytes"],
            "errors": r["errors_total"],
            "non_200": r["fetches"] - int(r.get("status", {}).get("200", 0)),
            "status": r.get("status", {}),
            "p50_ms": r["fetch_ms"]["p50"] if ok else 0.0,
            "p99_ms": r["fetch_ms"]["p99"] if ok else 0.0,
            "client_cpu_s": cpu, "syscalls_per_req": r.get("syscalls_per_fetch", 0.0)}


def wrk_duration(seconds, min_requests, est_rate, max_requests=None):
    """Whole seconds for wrk (it takes no fractions): at least `seconds`, long enough for
    min_requests at est_rate (with 10% to spare), and no longer than max_requests allow."""
    d = max(seconds, 1.0)
    if est_rate and min_requests:
        d = max(d, 1.1 * min_requests / est_rate)
    if est_rate and max_requests:
        d = min(d, max_requests / est_rate)
    return max(1, int(d + 0.999))


def run_wrk(ctx, urls, json_path, duration, sequential=False, seed=1, new_connections=False,
            max_requests=None):
    """Run wrk -t1 with bench/wrk-urls.lua (on the harness's CPUs); returns the client row.
    new_connections: every request on a new connection (Connection: close; over TLS a full
    handshake each, as wrk resumes no sessions), half as many connections at once.
    max_requests: stop once that many requests were made (duration is then an upper bound);
    wrk counts the responses back by then, up to ctx.parallel fewer."""
    conns = max(1, ctx.parallel // 2) if new_connections else ctx.parallel
    argv = ["wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--timeout", "30s",
            "-s", WRK_LUA]
    argv += ["-H", "Connection: close"] if new_connections else []
    argv += [f"{ctx.scheme}://127.0.0.1:{ctx.port}", "--", urls,
             "sequential" if sequential else "random", str(seed)]
    argv += [str(max_requests)] if max_requests else []
    r, cpu = _run_client(argv, json_path, duration + 120,
                         env=dict(os.environ, WRK_JSON=json_path))
    e = r["errors"]
    el = r["duration_us"] / 1e6
    lat = r["latency_us"]
    return {"client": "wrk", "argv": argv, "fetches": r["requests"], "elapsed": el,
            "req_s": r["requests"] / el if el else 0.0, "bytes": r["bytes"],
            "errors": e["connect"] + e["read"] + e["write"] + e["timeout"],
            "non_200": e["status"], "status": {},
            "p50_ms": lat["p50"] / 1000, "p99_ms": lat["p99"] / 1000,
            "client_cpu_s": cpu, "syscalls_per_req": ""}


def run_h2load(ctx, urls, json_path, seconds, seed=1):
    """Run h2load over HTTP/1.1 (--h1, one thread, ctx.parallel connections) for seconds, on
    the harness's CPUs, requests taken from the URL list (h2load walks it in order, every
    connection from its start: hot runs only; the list is shuffled with seed first). Its report
    has no percentiles: they come from its per-request log (--log-file). Returns the client
    row."""
    with open(urls) as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    random.Random(seed).shuffle(lines)
    uri_file = json_path + ".uris"
    with open(uri_file, "w") as f:
        f.writelines(ln.replace("http://", f"{ctx.scheme}://", 1) + "\n" for ln in lines)
    log_file = json_path + ".log"
    argv = ["h2load", "--h1", "-t1", f"-c{ctx.parallel}", "-D", f"{seconds:g}",
            "--warm-up-time", "0", "-i", uri_file, "--log-file", log_file]
    with open(json_path + ".out", "w") as out, open(json_path + ".err", "w") as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err)
        cpu = _wait(p, seconds + 120)
    with open(json_path + ".out") as f:
        text = f.read()
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", text)
    fin = re.search(r"finished in ([\d.]+)(s|ms)", text)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
    traffic = re.search(r"traffic: .*?\((\d+)\) total", text)
    if p.returncode != 0 or not (m and fin and codes):
        with open(json_path + ".err") as f:
            raise RuntimeError(f"h2load exited with {p.returncode}: {(f.read() + text)[-500:]}")
    el = float(fin.group(1)) / (1000 if fin.group(2) == "ms" else 1)
    lat = []
    with open(log_file) as f:
        for ln in f:  # start time (us), status, duration (us)
            parts = ln.split()
            if len(parts) >= 3:
                lat.append(int(parts[2]))
    lat.sort()

    def pct(q):
        return lat[min(len(lat) - 1, int(q * len(lat)))] / 1000 if lat else 0.0
    done = int(m.group(3))
    report = {"argv": argv, "requests_done": done, "succeeded": int(m.group(4)),
              "failed": int(m.group(5)), "errored": int(m.group(6)),
              "timeout": int(m.group(7)), "elapsed_s": el,
              "status_2xx": int(codes.group(1)), "p50_ms": pct(0.5), "p99_ms": pct(0.99)}
    with open(json_path, "w") as f:
        json.dump(report, f, indent=1)
    os.unlink(log_file)
    os.unlink(uri_file)
    return {"client": "h2load", "argv": argv, "fetches": done, "elapsed": el,
            "req_s": done / el if el else 0.0,
            "bytes": int(traffic.group(1)) if traffic else 0,
            "errors": int(m.group(5)) + int(m.group(6)) + int(m.group(7)),
            "non_200": sum(int(codes.group(i)) for i in (2, 3, 4)), "status": {},
            "p50_ms": report["p50_ms"], "p99_ms": report["p99_ms"],
            "client_cpu_s": cpu, "syscalls_per_req": ""}


def make_tls_cert(directory):
    """An ECDSA P-256 self-signed certificate for 127.0.0.1 (both servers use the same one):
    {"cert", "key", "pem" (certificate and key in one file, for ssl.pemfile)}."""
    cert, key, pem = (os.path.join(directory, n) for n in ("cert.pem", "key.pem", "both.pem"))
    sh(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", key, "-out", cert, "-days", "30", "-subj", "/CN=127.0.0.1"])
    with open(pem, "w") as out:
        for n in (cert, key):
            with open(n) as f:
                out.write(f.read())
    for n in (cert, key, pem):
        os.chmod(n, 0o644)  # nginx's master reads them as root; nothing secret in a bench key
    return {"cert": cert, "key": key, "pem": pem}


def rotated(paths, seed_text):
    """paths rotated to start at a position drawn from seed_text (cold runs start elsewhere)."""
    k = random.Random(seed_text).randrange(len(paths)) if paths else 0
    return paths[k:] + paths[:k]


# ---------------------------------------------------------------- machine

def machine_info(path, ctx, pool_dir, disk, extra=()):
    with open(path, "w") as f:
        f.write(capture(["lscpu"]) + "\n\n")
        with open("/proc/meminfo") as m:
            f.write("".join(m.readlines()[:3]))
        f.write(f"\nkernel: {' '.join(platform.uname())}\n")
        f.write(f"load average at start: {' '.join(os.getloadavg().__repr__().split())}\n")
        f.write(f"pool disk (measured): {disk}\n")
        for dev in sorted(glob.glob("/sys/block/*/device")):
            name = dev.split("/")[3]
            info = []
            for k in ("vendor", "model"):
                try:
                    with open(os.path.join(dev, k)) as g:
                        info.append(g.read().strip())
                except OSError:
                    pass
            for k in ("queue/rotational", "queue/scheduler", "size"):
                try:
                    with open(f"/sys/block/{name}/{k}") as g:
                        info.append(f"{k.split('/')[-1]}={g.read().strip()}")
                except OSError:
                    pass
            f.write(f"disk {name}: {' '.join(info)}\n")
        f.write(f"pool filesystem: {capture(['findmnt', '-n', '-T', pool_dir])}\n\n")
        f.write(f"seekless: {capture([ctx.seekless, '-V'])}\n\n")
        for argv in (["nginx", "-V"], ["lighttpd", "-v"], ["apache2", "-v"],
                     ["spawn-fcgi", "-v"], [ctx.accel, "--version"], ["wrk", "-v"],
                     ["fio", "--version"], ["perf", "--version"], ["strace", "-V"],
                     ["gnuplot", "--version"], *extra):
            out = capture(argv)
            if argv[0] == "wrk":  # wrk -v prints its usage after the version line
                out = out.splitlines()[0] if out else out
            f.write(f"{os.path.basename(argv[0])}: {out or '(not available)'}\n")
        f.write(f"python: {sys.version.split()[0]}\n")
