"""Helpers the integration tests share that test_core does not hold: waiting for a condition or
a listening port, reading a file that may not be there yet, asking whether a process is still
running, reading a socket to its end, running threads, reading files cold and hot through a
server."""
import hashlib
import os
import socket
import struct
import time

WRAPPED = bool(os.environ.get("SEEKLESS_WRAPPER"))  # under valgrind: everything is slower


def wait_for(pred, timeout=None):
    """Polls pred every 50 ms until it is true or timeout seconds have passed (30 under a
    wrapper, else 10); returns its last value."""
    if timeout is None:
        timeout = 30 if WRAPPED else 10
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def accepting(port, timeout=10, proc=None):
    """Whether something accepts connections on 127.0.0.1:port within timeout seconds (False at
    once when proc, if given, has exited)."""
    deadline = time.time() + timeout
    while time.time() < deadline and (proc is None or proc.poll() is None):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def read_to_end(s, got=b""):
    """got and all the socket s sends until it closes its side; s is closed then."""
    while True:
        d = s.recv(1 << 20)
        if not d:
            break
        got += d
    s.close()
    return got


def run_threads(threads):
    """Start every thread, then wait for all of them."""
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def fd_targets(pid):
    """What the process's descriptors point at (one that closes while we look is left out)."""
    out = []
    for f in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{f}"))
        except FileNotFoundError:
            pass
    return out


def listening_inodes(port):
    """Inodes of the TCP sockets listening on port (IPv4 and IPv6), from /proc/net."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    out.append(cols[9])
    return out


def watches_a_listener(pid, port):
    """Whether any epoll instance of process pid still watches a socket listening on port
    (/proc/PID/fdinfo of each epoll lists the descriptors it watches as "tfd:")."""
    listening = {f"socket:[{i}]" for i in listening_inodes(port)}
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except FileNotFoundError:
        return False
    for f in fds:
        try:
            if os.readlink(f"{fd_dir}/{f}") != "anon_inode:[eventpoll]":
                continue
            with open(f"/proc/{pid}/fdinfo/{f}") as fh:
                watched = [line.split()[1] for line in fh if line.startswith("tfd:")]
        except (FileNotFoundError, ProcessLookupError):
            continue  # closed while we looked
        for t in watched:
            try:
                if os.readlink(f"{fd_dir}/{t}") in listening:
                    return True
            except FileNotFoundError:
                continue
    return False


def wait_loops_up(pid):
    """Wait until the server pid runs all its loops (SEEKLESS_TEST_LOOPS, else one a CPU): its
    port accepts once the first runs, and each other opens its epoll as it starts."""
    loops = int(os.environ.get("SEEKLESS_TEST_LOOPS") or len(os.sched_getaffinity(0)))
    wait_for(lambda: fd_targets(pid).count("anon_inode:[eventpoll]") >= loops)


def reset_mid_answer(s, req, nbytes=200000):
    """Send req on the connected socket s, read about nbytes of the answer, then close s with a
    RST, not a FIN: the server learns on its next write, maybe with a read in flight."""
    s.sendall(req)
    got = 0
    while got < nbytes:
        d = s.recv(65536)
        if not d:
            break
        got += len(d)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def read_text(path):
    """The file's text, or "" when it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def alive(pid):
    """True if pid exists and is not a zombie (a child that exited and was not reaped yet, or
    one spawned for another parent)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_at_end(case, srv):
    """srv (a started test_core.Server) is stopped when the test case ends, and must have
    exited with status 0 then; returns srv."""
    case.addCleanup(lambda: case.assertEqual(srv.stop(), 0))
    return srv


def sha(b):
    return hashlib.sha256(b).hexdigest()


def warm(path):
    """Read the file whole, so its pages are in the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def set_temp(path, temp):
    """"cold": drop the file's pages from the page cache; "hot": read them in."""
    from test_core import evict  # test_core is the server side; imported when first needed
    (evict if temp == "cold" else warm)(path)


def multipart_bodies(h, body):
    """The bodies of a multipart/byteranges answer's parts, in order."""
    boundary = h["content-type"].split("boundary=")[1].encode()
    parts = body.split(b"--" + boundary)
    return [p.split(b"\r\n\r\n", 1)[1][:-2] for p in parts[1:-1]]


def check_files_cold_and_hot(case, content):
    """Every file of content (name -> bytes) comes whole from case.get(name), read once with
    its pages out of the page cache and once with them in (case.path(name) is the file)."""
    for name, data in content.items():
        for temp in ("cold", "hot"):
            set_temp(case.path(name), temp)
            st, h, body = case.get(name)
            with case.subTest(file=name, cache=temp):
                case.assertEqual(st, 200)
                case.assertEqual(int(h["content-length"]), len(data))
                case.assertEqual(sha(body), sha(data))


class BackendFiles:
    """Mixed into one TestCase class per network backend (the class attribute backend) that
    serves content (name -> bytes) from one server for the class, with conf_extra added to its
    config (TLS, say); the class defines get(name, extra=b"", method=b"GET"). Checks every file
    whole and ranges of one, read cold and hot."""

    backend = None
    content = {}
    conf_extra = ""

    @classmethod
    def setUpClass(cls):
        from test_core import Server
        cls.srv = Server(f'server.network-backend = "{cls.backend}"\n'
                         'server.network-backend-block-size = 65536\n'
                         'server.max-read-threads = 4\nserver.max-stat-threads = 1\n'
                         + cls.conf_extra, cls.content).start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        assert rc == 0, cls.srv.log_text

    def path(self, name):
        return os.path.join(self.srv.root, name)

    def test_whole_files_cold_and_hot(self):
        check_files_cold_and_hot(self, self.content)

    def check_ranges_cold_and_hot(self, name):
        """Ranges of the file `name` (over 1 MB), cold and hot: one, a suffix, and several in
        one multipart answer."""
        data = self.content[name]
        for temp in ("cold", "hot"):
            set_temp(self.path(name), temp)
            st, h, body = self.get(name, b"Range: bytes=4097-200000\r\n")
            self.assertEqual((st, body), (206, data[4097:200001]), temp)
            st, h, body = self.get(name, b"Range: bytes=-70000\r\n")
            self.assertEqual((st, body), (206, data[-70000:]), temp)
            set_temp(self.path(name), temp)
            st, h, body = self.get(name, b"Range: bytes=1-1,65535-65537,1000000-\r\n")
            self.assertEqual(st, 206)
            self.assertEqual(multipart_bodies(h, body),
                             [data[1:2], data[65535:65538], data[1000000:]], temp)

    def check_pipelined(self, s, names, host, rest=b""):
        """GETs of the files `names`, evicted from the page cache first, sent on the connected
        socket s in one write: each answer comes whole and in order. Returns what was read past
        the last answer."""
        from test_core import evict, read_response
        for n in names:
            evict(self.path(n))
        s.sendall(b"".join(b"GET /" + n.encode() + b" HTTP/1.1\r\nHost: " + host + b"\r\n\r\n"
                           for n in names))
        for n in names:
            st, h, body, rest = read_response(s, rest)
            self.assertEqual((st, sha(body)), (200, sha(self.content[n])), n)
        return rest
