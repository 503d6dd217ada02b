"""Run a function over many points in batches on Ray (or, for local sweeps, in this process or on
a pool of forked processes: :func:`run_chunks`), with a progress bar.

``address="local"`` starts a private Ray instance with ``num_cpus`` workers (the default, and what
CI and Snakemake use). A local instance asks for 127.0.0.1, but Ray 2.60 swaps that for the node's
IP (``services.resolve_ip_for_localhost``) and its gRPC servers listen on every interface, so what
protects it is that it has no dashboard and requires a random per-run token on every gRPC call (Ray's ``RAY_AUTH_MODE=token``), so nothing else on the
network (or on the machine) can submit work to it; SIGTERM/SIGHUP shut it down like Ctrl-C. Any
other address (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``)
joins an existing cluster, so the same sweep runs on ten machines unchanged.

Usage::

    for batch_result in run_batches(evaluate_batch, points, ray_cfg, batch_size=256, desc="sweep"):
        store(batch_result)   # the driver stores each batch as it arrives (resumable)

``func`` must be a module-level function taking a list of points and returning one picklable value.
"""

from __future__ import annotations

import atexit
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from estimator.errors import EstimatorError


def _init_ray(address: str, num_cpus: int | None) -> bool:
    """Start or join Ray; return True when this call started it (so it should shut it down)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
    if address in ("local", "", None):
        kwargs.update(address="local", num_cpus=int(num_cpus or os.cpu_count() or 1), _node_ip_address="127.0.0.1")
        _enable_token_auth()
    else:
        from estimator.sweep.ray_address import check_address

        kwargs.update(address=check_address(address))  # one line within seconds when it cannot be joined
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise EstimatorError(f"ray.address={address!r}: cannot start or join Ray ({str(exc).splitlines()[0]})") from None
    return True


def _enable_token_auth() -> None:
    """Require a token on every gRPC call of the local instance: a random one per process, set in
    the environment (inherited by the GCS, raylet and workers), unless the user configured Ray's
    authentication already. Ray caches its config and token in the process, so both are re-read
    from the environment every time (the GCS and raylet read the environment: a cache left from an
    earlier instance with another token makes the driver's own calls fail as "Failed to start GCS")."""
    if not os.environ.get("RAY_AUTH_MODE"):
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    try:
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
    except (ImportError, AttributeError):  # another Ray version: the environment is all it reads
        pass


#: set when a signal ended the local Ray instance under this process: the process must then exit
#: without Ray's exit hooks (``ray.shutdown()`` waits for the dead GCS), see ``estimator.cli.main``
RAY_KILLED = False


class RaySession:
    """Ray for one command: started (or joined) on first use, shut down when the command ends.

    Several sweeps of an experiment share it. When Ray is already initialised in this process
    (a notebook) it is used and left running. While a local instance runs, a watchdog process
    (:mod:`estimator.sweep.watchdog`) ends it if this process dies without shutting it down
    (SIGKILL, an out-of-memory kill)."""

    def __init__(self, ray_cfg: dict[str, Any] | None = None) -> None:
        self.cfg = dict(ray_cfg or {})
        self.address = str(self.cfg.get("address", "local") or "local")
        self.num_cpus = int(self.cfg.get("num_cpus") or os.cpu_count() or 1)
        self.started = False
        self._previous: dict[int, Any] = {}
        self._watchdog: Any = None

    @property
    def local(self) -> bool:
        return self.address in ("local", "")

    def __enter__(self) -> RaySession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def ray(self) -> Any:
        """The ``ray`` module, initialised."""
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        import ray

        if self.started or ray.is_initialized():
            return ray
        self._previous = _terminate_like_interrupt(self._on_signal)  # a kill during start-up ends it too
        if self.local:
            atexit.register(_reap_local_ray)
            from estimator.sweep.watchdog import start_watchdog

            self._watchdog = start_watchdog()
        self.started = True
        _init_ray(self.address, self.num_cpus)
        _terminate_like_interrupt(self._on_signal)  # again: ray.init installs its own SIGTERM handler
        return ray

    def _on_signal(self, signum: int, frame: Any) -> None:
        """SIGTERM/SIGHUP/SIGINT while Ray runs: a local instance is ended by the watchdog at once
        (``ray.shutdown()`` from inside an interrupted Ray call can block on Ray's own locks), then
        the command unwinds like Ctrl-C (rows not yet written are lost; a rerun resumes)."""
        global RAY_KILLED
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None
            self.started = False  # nothing left to shut down
            RAY_KILLED = True
            sys.excepthook = sys.__excepthook__  # Ray's hook reports to its (now dead) GCS and blocks
        raise KeyboardInterrupt(f"signal {signum}")

    def close(self) -> None:
        ray = sys.modules.get("ray")
        try:
            if self.started and ray is not None and ray.is_initialized():
                _shutdown(ray)
        finally:
            self.started = False
            if self._watchdog is not None:
                self._watchdog.stop()
                self._watchdog = None
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
            self._previous = {}


def run_batches(
    func: Callable[[list[Any]], Any],
    points: Sequence[Any],
    ray_cfg: dict[str, Any] | None = None,
    batch_size: int | None = None,
    desc: str = "points",
    session: RaySession | None = None,
) -> Iterator[Any]:
    """Yield ``func(batch)`` for consecutive batches of ``points`` as Ray finishes them (on
    ``session``'s Ray, or on a Ray started for this call)."""
    ray_cfg = dict(ray_cfg or {})
    if not points:
        return
    size = _batch_size(batch_size or ray_cfg.get("batch_size"))
    batches = [list(points[i : i + size]) for i in range(0, len(points), size)]
    own = session is None
    session = session or RaySession(ray_cfg)
    try:
        ray = session.ray()
        remote = ray.remote(func)
        tasks = ((remote.remote, (b,), len(b)) for b in batches)
        yield from _gather(_ray_waiter(ray), tasks, len(points), desc, in_flight=len(batches))
    finally:
        if own:
            session.close()


def run_chunks(
    func: Callable[..., Any],
    shared: tuple[Any, ...],
    indices: Sequence[int],
    session: RaySession,
    batch_size: int | None = None,
    desc: str = "points",
    in_process: bool = False,
    pool: bool = False,
) -> Iterator[Any]:
    """Yield ``func(*shared, chunk)`` for consecutive chunks of ``indices`` (a ``range`` or a list
    of point numbers): in this process when ``in_process`` (no Ray), on a pool of
    ``session.num_cpus`` local processes when ``pool`` (no Ray: started in a fraction of a second,
    see :func:`_pool`), else as Ray tasks with ``shared`` (e.g. the grid) put in Ray's object
    store once. At most a few chunks per CPU are in flight, so memory does not grow with the
    number of points."""
    if not len(indices):
        return
    size = _batch_size(batch_size or session.cfg.get("batch_size"))
    chunks = (indices[i : i + size] for i in range(0, len(indices), size))
    if in_process:
        tasks = ((_Done, (func(*shared, c),), len(c)) for c in chunks)  # computed when the loop asks
        yield from _gather(_here, tasks, len(indices), desc, 1)
        return
    if pool:
        yield from _pool(func, shared, chunks, len(indices), desc, session.num_cpus)
        return
    ray = session.ray()
    refs = tuple(ray.put(x) for x in shared)
    remote = ray.remote(func)
    tasks = ((remote.remote, (*refs, c), len(c)) for c in chunks)
    yield from _gather(_ray_waiter(ray), tasks, len(indices), desc, in_flight=2 * session.num_cpus + 2)


def _batch_size(value: Any) -> int:
    size = int(value or 256)
    if size < 1:
        raise EstimatorError(f"ray.batch_size must be >= 1, got {size}")
    return size


# ---- local process pool -----------------------------------------------------------------------
_WORKER: tuple[Callable[..., Any], tuple[Any, ...]] | None = None


def _pool(func: Callable[..., Any], shared: tuple[Any, ...], chunks: Iterator[Any], total: int, desc: str,
          workers: int) -> Iterator[Any]:
    """``func(*shared, chunk)`` on ``workers`` forked processes of this one (they inherit
    ``shared`` and everything this process has loaded: no start-up beyond the fork). The workers
    ignore Ctrl-C (the driver handles it), exit when the driver dies (even by SIGKILL) and are
    terminated when the driver stops early; a worker's exception (an ``EstimatorError`` for bad
    input) is raised here."""
    import multiprocessing
    import queue

    done: queue.SimpleQueue[tuple[int, bool, Any]] = queue.SimpleQueue()
    pool = multiprocessing.get_context("fork").Pool(workers, _pool_worker_init, (func, shared, os.getpid()))
    counter = iter(range(1 << 62))

    def submit(chunk: Any) -> int:
        key = next(counter)
        pool.apply_async(_pool_task, (chunk,), callback=lambda r: done.put((key, True, r)),
                         error_callback=lambda e: done.put((key, False, e)))
        return key

    def wait(pending: dict[Any, int]) -> tuple[Any, Any]:
        key, ok, result = done.get()
        if not ok:
            raise result
        return key, result

    try:
        yield from _gather(wait, ((submit, (c,), len(c)) for c in chunks), total, desc, in_flight=2 * workers + 2)
    finally:
        pool.terminate()
        pool.join()


def _pool_worker_init(func: Callable[..., Any], shared: tuple[Any, ...], parent: int) -> None:
    global _WORKER
    _WORKER = (func, shared)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the driver's handler (inherited) is not ours
    import threading

    def orphaned() -> None:  # the driver died without terminating us (SIGKILL, out of memory)
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=orphaned, daemon=True).start()


def _pool_task(chunk: Any) -> Any:
    assert _WORKER is not None
    func, shared = _WORKER
    return func(*shared, chunk)


# ---- waiting for results ----------------------------------------------------------------------
class _Done:
    """An in-process task's handle: its result, already computed."""

    __slots__ = ("result",)

    def __init__(self, result: Any) -> None:
        self.result = result


def _here(pending: dict[Any, int]) -> tuple[Any, Any]:
    key = next(iter(pending))
    return key, key.result


def _ray_waiter(ray: Any) -> Callable[[dict[Any, int]], tuple[Any, Any]]:
    def wait(pending: dict[Any, int]) -> tuple[Any, Any]:
        done, _ = ray.wait(list(pending), num_returns=1)
        try:
            return done[0], ray.get(done[0])
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            if isinstance(cause, EstimatorError):
                raise EstimatorError(str(cause)) from None
            raise

    return wait


def _gather(wait: Callable[[dict[Any, int]], tuple[Any, Any]], tasks: Iterator[tuple[Callable[..., Any], tuple[Any, ...], int]],
            total: int, desc: str, in_flight: int) -> Iterator[Any]:
    """Run ``(submit, args, points)`` tasks, at most ``in_flight`` at a time, with a progress bar;
    ``wait(pending)`` returns (the handle ``submit`` returned, its result) of a finished task."""
    from tqdm import tqdm

    done_points, t0, log_progress = 0, time.monotonic(), not sys.stderr.isatty()
    pending: dict[Any, int] = {}
    with tqdm(total=total, desc=desc, unit="pt", file=sys.stderr, disable=None, mininterval=0.5) as bar:
        while True:
            for submit, args, n in tasks:
                pending[submit(*args)] = n
                if len(pending) >= in_flight:
                    break
            if not pending:
                return
            handle, result = wait(pending)
            n = pending.pop(handle)
            bar.update(n)
            done_points += n
            if log_progress and (done_points * 10 // total > (done_points - n) * 10 // total):
                # not a terminal (a Snakemake log): a plain line every 10 %
                print(f"{desc}: {done_points}/{total} points ({100 * done_points // total} %) "
                      f"after {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
            yield result


def _shutdown(ray: Any) -> None:
    """``ray.shutdown()``, then :func:`_reap_local_ray`."""
    ray.shutdown()
    _reap_local_ray()


def _reap_local_ray() -> None:
    """End every process a local Ray instance left behind: Ray makes the driver a process-group
    leader and starts its GCS, raylet, workers and agents in that group; the agents outlive an
    interrupted sweep for seconds (or for good). Only processes carrying this sweep's mark
    (:data:`estimator.sweep.watchdog.MARK_ENV`) are ended: a shell pipeline's other commands share
    the group. Runs at exit too (``atexit``), so it also covers a sweep ended by SIGTERM while the
    driver was between batches."""
    import psutil

    from estimator.sweep.watchdog import MARK_ENV, marked

    me = os.getpid()
    mark = os.environ.get(MARK_ENV)
    if os.getpgrp() != me or not mark:  # not a group leader, or no Ray of ours: nothing to reap
        return
    procs = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid != me and os.getpgid(proc.pid) == me and marked(proc, mark):
                procs.append(proc)
        except (OSError, psutil.Error):
            continue
    for proc in procs:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=2.0)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass


def _terminate_like_interrupt(handler: Callable[[int, Any], None]) -> dict[int, Any]:
    """Route SIGTERM/SIGHUP/SIGINT to ``handler`` (which raises KeyboardInterrupt), so a killed
    sweep (Snakemake, ``timeout``, a closed terminal) leaves no workers; returns the previous
    handlers."""
    previous: dict[int, Any] = {}
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread
            pass
    return previous
