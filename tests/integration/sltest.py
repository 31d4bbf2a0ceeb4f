"""Helpers the integration tests share that test_core does not hold: waiting for a condition,
reading a file that may not be there yet, asking whether a process is still running."""
import os
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
