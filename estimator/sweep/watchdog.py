"""A watchdog that ends a local Ray instance when the sweep that started it dies.

A sweep shuts its Ray down on exit, Ctrl-C and SIGTERM/SIGHUP (:mod:`estimator.sweep.runner`),
but a SIGKILL (or the out-of-memory killer) gives it no chance, and Ray's GCS, raylet and workers
then outlive it. :func:`start_watchdog` starts ``python -m estimator.sweep.watchdog PID MARK`` in
its own session (so a signal to the sweep's process group does not reach it). Every ``POLL_S`` it
records the sweep's Ray descendants (pid and start time of the GCS, raylet, workers and agents);
when the sweep process is gone it sends SIGKILL to every recorded process still alive (and to
their descendants), then exits. After ``ray.shutdown()`` the sweep stops it with SIGTERM, which
does the same (Ray's dashboard and runtime-env agents outlive a shutdown).

It kills only what its own sweep started. Before starting Ray the sweep puts a random *mark* in
its environment (``ESTIMATOR_RAY_MARK``); the GCS, raylet and every worker and agent inherit it.
A worker the raylet started after the last poll is not recorded (Ray puts each worker in its own
session), so after a SIGKILL the watchdog also kills the processes started since the sweep that
carry the mark in their environment, or whose command line names the Ray session directory of a
recorded process (the instance's own folder). Another user's processes, and this user's other Ray
instances (even orphaned ``ray::`` workers), carry neither and are never touched.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from typing import Any

POLL_S = 0.2  # how often the descendants are recorded and the parent checked
SESSION = re.compile(r"/session_[0-9][\w.-]*")  # a Ray session directory in a command line
MARK_ENV = "ESTIMATOR_RAY_MARK"  # the environment variable holding a sweep's mark


class Watchdog:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def stop(self) -> None:
        """End what is left of Ray (the watchdog kills the Ray processes it saw) and the watchdog."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def start_watchdog() -> Watchdog:
    """Mark this process's environment (inherited by the Ray processes it starts next) and start
    the watchdog for it."""
    import secrets

    mark = os.environ[MARK_ENV] = secrets.token_hex(16)  # fresh: never a mark inherited from another sweep
    env = {k: v for k, v in os.environ.items() if k != MARK_ENV}  # the watchdog itself is not marked
    proc = subprocess.Popen([sys.executable, "-m", "estimator.sweep.watchdog", str(os.getpid()), mark],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
                            env={**env, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    return Watchdog(proc)


def marked(proc: Any, mark: str) -> bool:
    """Whether ``proc``'s environment carries the sweep's mark (False when it cannot be read:
    another user's process)."""
    import psutil

    try:
        return proc.environ().get(MARK_ENV) == mark
    except (psutil.Error, OSError):
        return False


def _is_ray(proc: Any) -> bool:
    name = proc.name()
    if name in ("gcs_server", "raylet") or name.startswith("ray::"):
        return True
    return any("/ray/" in part or part.startswith("ray::") for part in proc.cmdline()[:4])


def _descendants(parent: Any, me: int) -> dict[int, float]:
    import psutil

    found = {}
    try:
        for child in parent.children(recursive=True):
            if child.pid != me:
                try:
                    if _is_ray(child):
                        found[child.pid] = child.create_time()
                except psutil.Error:
                    pass
    except psutil.Error:
        pass
    return found


def _kill_all(procs: list[Any]) -> None:
    """SIGKILL every process of ``procs`` still alive and wait (at most 5 s) for them to exit."""
    import psutil

    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=5)


def _kill(recorded: dict[int, float]) -> None:
    import psutil

    procs = []
    for pid, started in recorded.items():
        try:
            proc = psutil.Process(pid)
            if proc.create_time() == started:  # not a recycled pid
                procs.append(proc)
                procs.extend(proc.children(recursive=True))
        except psutil.Error:
            continue
    _kill_all(procs)


def _kill_group(pgid: int, mark: str) -> None:
    """Kill what is left in the dead sweep's process group (Ray makes the driver a group leader and
    starts its processes in that group) that carries the mark: workers Ray started after the last
    poll."""
    import psutil

    procs = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and marked(proc, mark):
                procs.append(proc)
        except (OSError, psutil.Error):
            continue
    _kill_all(procs)


def _sessions(recorded: dict[int, float]) -> set[str]:
    """The Ray session directories named in the recorded processes' command lines."""
    import psutil

    found: set[str] = set()
    for pid in recorded:
        try:
            found.update(SESSION.findall(" ".join(psutil.Process(pid).cmdline())))
        except psutil.Error:
            continue
    return found


def _kill_session_leftovers(sessions: set[str], since: float, me: int, mark: str) -> None:
    """Kill unrecorded processes of the dead instance started since the sweep: those carrying the
    mark, or naming a recorded process's session directory (see the module docstring)."""
    import psutil

    procs = []
    for proc in psutil.process_iter(["name", "cmdline", "create_time"]):
        info = proc.info
        if proc.pid == me or (info["create_time"] or 0) < since:
            continue
        cmd = " ".join(info["cmdline"] or ())
        if any(s in cmd for s in sessions) or marked(proc, mark):
            procs.append(proc)
    _kill_all(procs)


def watch(pid: int, mark: str) -> None:
    import psutil

    try:
        parent = psutil.Process(pid)
        started = parent.create_time()
    except psutil.Error:
        return
    me = os.getpid()
    recorded: dict[int, float] = {}
    sessions: set[str] = set()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    while True:
        try:
            alive = parent.is_running() and parent.create_time() == started and parent.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            alive = False
        if not alive or stop:
            _kill(recorded)
            if not alive:
                _kill_group(pid, mark)
                _kill_session_leftovers(sessions, started, me, mark)
            return
        new = _descendants(parent, me)
        if set(new) - set(recorded):
            recorded.update(new)
            sessions |= _sessions(new)
        time.sleep(POLL_S)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the sweep's to handle
    watch(int(sys.argv[1]), sys.argv[2])
