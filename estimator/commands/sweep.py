"""Run a declared sweep on Ray into the DuckDB store: ``estimator sweep sweep=resnet50_scaling``.

The grid comes from ``conf/sweep/<name>.yaml`` (``grid: {override: [values]}``); other overrides on
the command line apply to every point (``estimator sweep sweep=x device=h100``). Points whose config
hash is already in the store are skipped (resumable; ``sweep_force=true`` recomputes). Every point
is validated before anything runs, so a bad grid writes nothing. Ray is local by default
(``ray.address=local ray.num_cpus=2``); ``ray.address=auto`` or ``host:port`` joins a cluster.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from estimator.config import to_container
from estimator.errors import EstimatorError
from estimator.estimate import _resolve, estimate, estimate_config, load_workload, workload_path
from estimator.fabrics.registry import make_fabric
from estimator.store.duckdb_store import existing_keys, write_estimates
from estimator.sweep import grid
from estimator.sweep.runner import run_batches

HELP = "run a conf/sweep grid on Ray into the DuckDB store (resumable)"
RUN_WITH_OVERRIDES = True


def evaluate_batch(items: list[tuple[dict[str, Any], str]]) -> list[Any]:
    """Ray task: estimate a batch of (config, absolute workload path) points."""
    return [estimate(cfg, path) for cfg, path in items]


def plan(cfg: DictConfig, overrides: list[str]) -> tuple[list[tuple[dict[str, Any], str]], int]:
    """Expand, compose and validate the grid; return the points still to run and the total."""
    sweep = to_container(cfg.sweep)
    base = [o for o in overrides if not o.startswith(("sweep=", "sweep.", "ray.", "store=", "output="))]
    configs = grid.compose_points(grid.expand(sweep.get("grid") or {}, sweep.get("zip")), base)
    from estimator.commands.estimate import ensure_workload
    from estimator.config import compose

    items, seen_models = [], {}
    for c in configs:
        make_fabric(c["fabric"] or {})  # validates every point before anything runs
        path = _resolve(workload_path(c))
        if str(path) not in seen_models:
            if not path.exists():
                ensure_workload(compose([f"model={c['model']['name']}"]))
            load_workload(path)
            seen_models[str(path)] = True
        items.append((c, str(path.resolve())))
    return items, len(configs)


def run(cfg: DictConfig, overrides: list[str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    items, total = plan(cfg, overrides)
    from estimator.config import config_hash

    done = set() if cfg.get("sweep_force") else existing_keys(cfg.store)
    todo = [it for it in items if config_hash(estimate_config(it[0])) not in done]
    skipped = total - len(todo)
    if skipped:
        print(f"sweep {cfg.sweep.name}: {skipped} of {total} points already in {cfg.store}; running {len(todo)}",
              file=sys.stderr)
    written = 0
    for batch in run_batches(evaluate_batch, todo, to_container(cfg.ray), desc=f"sweep {cfg.sweep.name}"):
        written += write_estimates(cfg.store, batch)
    if not Path(cfg.store).exists() and total:
        raise EstimatorError(f"sweep {cfg.sweep.name}: nothing was written to {cfg.store}")
    elapsed = time.perf_counter() - t0
    return {
        "sweep": cfg.sweep.name,
        "points": total,
        "skipped": skipped,
        "written": written,
        "store": str(cfg.store),
        "elapsed_s": elapsed,
        "points_per_s": (len(todo) / elapsed) if elapsed > 0 else 0.0,
    }
