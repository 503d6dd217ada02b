"""Run a function over many points in batches on Ray, with a progress bar.

``address="local"`` starts a private Ray instance with ``num_cpus`` workers (the default, and what
CI and Snakemake use). A local instance advertises 127.0.0.1, has no dashboard and requires a
random per-run token on every gRPC call (Ray's ``RAY_AUTH_MODE=token``), so nothing else on the
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
        kwargs.update(address=address)
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise EstimatorError(f"ray.address={address!r}: cannot start or join Ray ({str(exc).splitlines()[0]})") from None
    return True


def _enable_token_auth() -> None:
    """Require a token on every gRPC call of the local instance: a random one per process, set in
    the environment (inherited by the GCS, raylet and workers), unless the user configured Ray's
    authentication already. Ray caches its config and token at import, so both are refreshed."""
    if os.environ.get("RAY_AUTH_MODE"):
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    try:
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
    except (ImportError, AttributeError):  # another Ray version: the environment is all it reads
        pass


def run_batches(
    func: Callable[[list[Any]], Any],
    points: Sequence[Any],
    ray_cfg: dict[str, Any] | None = None,
    batch_size: int | None = None,
    desc: str = "points",
) -> Iterator[Any]:
    """Yield ``func(batch)`` for consecutive batches of ``points`` as Ray finishes them."""
    ray_cfg = dict(ray_cfg or {})
    if not points:
        return
    size = int(batch_size or ray_cfg.get("batch_size") or 256)
    if size < 1:
        raise EstimatorError(f"ray.batch_size must be >= 1, got {size}")
    batches = [list(points[i : i + size]) for i in range(0, len(points), size)]
    previous = _terminate_like_interrupt()  # before Ray starts: a kill during start-up shuts it down too
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    owned = not ray.is_initialized()  # this call starts (or joins) Ray, so it must shut it down
    if owned and str(ray_cfg.get("address", "local")) in ("local", ""):
        atexit.register(_reap_local_ray)
    try:
        _init_ray(str(ray_cfg.get("address", "local")), ray_cfg.get("num_cpus"))
        _terminate_like_interrupt()  # again: ray.init installs its own SIGTERM handler
        from tqdm import tqdm

        remote = ray.remote(func)
        pending = {remote.remote(b): len(b) for b in batches}
        done_points, t0, log_progress = 0, time.monotonic(), not sys.stderr.isatty()
        with tqdm(total=len(points), desc=desc, unit="pt", file=sys.stderr, disable=None, mininterval=0.5) as bar:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                ref = done[0]
                n = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                    if isinstance(cause, EstimatorError):
                        raise EstimatorError(str(cause)) from None
                    raise
                bar.update(n)
                done_points += n
                if log_progress and (done_points * 10 // len(points) > (done_points - n) * 10 // len(points)):
                    # not a terminal (a Snakemake log): a plain line every 10 %
                    print(f"{desc}: {done_points}/{len(points)} points ({100 * done_points // len(points)} %) "
                          f"after {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
                yield result
    finally:
        if owned and ray.is_initialized():
            _shutdown(ray)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _shutdown(ray: Any) -> None:
    """``ray.shutdown()``, then :func:`_reap_local_ray`."""
    ray.shutdown()
    _reap_local_ray()


def _reap_local_ray() -> None:
    """End every process a local Ray instance left behind: Ray makes the driver a process-group
    leader and starts its GCS, raylet, workers and agents in that group; the agents outlive an
    interrupted sweep for seconds (or for good). Runs at exit too (``atexit``), so it also covers a
    sweep ended by SIGTERM while the driver was between batches."""
    import psutil

    me = os.getpid()
    if os.getpgrp() != me:  # Ray did not make us a group leader: nothing of ours to reap
        return
    procs = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid != me and os.getpgid(proc.pid) == me:
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


def _terminate_like_interrupt() -> dict[int, Any]:
    """Make SIGTERM/SIGHUP raise KeyboardInterrupt in the driver, so a killed sweep (Snakemake,
    ``timeout``, a closed terminal) runs the ``finally`` that shuts Ray down and leaves no workers."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous: dict[int, Any] = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, interrupt)
        except ValueError:  # not the main thread
            pass
    return previous
