"""Run a function over many points in batches on Ray, with a progress bar.

``address="local"`` starts a private Ray instance with ``num_cpus`` workers (the default, and what
CI and Snakemake use); any other address (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``)
joins an existing cluster, so the same sweep runs on ten machines unchanged.

Usage::

    for batch_result in run_batches(evaluate_batch, points, ray_cfg, batch_size=256, desc="sweep"):
        store(batch_result)   # the driver stores each batch as it arrives (resumable)

``func`` must be a module-level function taking a list of points and returning one picklable value.
"""

from __future__ import annotations

import os
import sys
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
        kwargs.update(address="local", num_cpus=int(num_cpus or os.cpu_count() or 1))
    else:
        kwargs.update(address=address)
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise EstimatorError(f"ray.address={address!r}: cannot start or join Ray ({str(exc).splitlines()[0]})") from None
    return True


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
    started = _init_ray(str(ray_cfg.get("address", "local")), ray_cfg.get("num_cpus"))
    import ray
    from tqdm import tqdm

    remote = ray.remote(func)
    try:
        pending = {remote.remote(b): len(b) for b in batches}
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
                yield result
    finally:
        if started:
            ray.shutdown()
