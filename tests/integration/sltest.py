"""Helpers the integration tests share that test_core does not hold: waiting for a condition or
a listening port, reading a file that may not be there yet, asking whether a process is still
running, reading a socket to its end, running threads, reading files cold and hot through a
server."""
import hashlib
import os
import socket
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
