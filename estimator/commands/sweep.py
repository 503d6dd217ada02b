"""Run a declared sweep on Ray into the DuckDB store.

    estimator sweep sweep=resnet50_scaling          # one grid from conf/sweep/
    estimator sweep experiment=lumorph              # every sweep of a paper's experiment
    estimator sweep experiment=lumorph fabric.reconfig_s=10e-6

A sweep is ``{name, kind, grid, zip}`` (see :mod:`estimator.sweep.grid` and
:mod:`estimator.sweep.kinds`); an experiment (``conf/experiment/<name>.yaml``) holds several under
``experiment.sweeps``. Other overrides on the command line apply to every point whose config has
the key. Points whose config hash is already in the store are skipped (resumable;
``sweep_force=true`` recomputes). Every point is validated before anything runs, so a bad grid
writes nothing. Ray is local by default (``ray.address=local ray.num_cpus=2``); ``ray.address=auto``
or ``host:port`` joins an existing cluster.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from omegaconf import DictConfig

from estimator import limits
from estimator.config import to_container
from estimator.errors import EstimatorError
from estimator.estimate import load_workload, workload_path
from estimator.store.duckdb_store import existing_keys
from estimator.sweep import grid, kinds
from estimator.sweep.runner import run_batches

HELP = "run a conf/sweep grid or a conf/experiment on Ray into the DuckDB store (resumable)"
RUN_WITH_OVERRIDES = True
WRITE_EVERY_POINTS = 2000
WRITE_EVERY_S = 10.0
_NOT_POINT_KEYS = ("sweep=", "sweep.", "experiment=", "experiment.", "ray.", "store=", "output=", "sweep_force=")


def _workload_file(c: dict[str, Any], seen: dict[str, str]) -> str:
    """Absolute workload path of an estimate point (captured on first use if missing)."""
    path = workload_path(c)
    key = str(path)
    if key not in seen:
        if not path.exists():
            from estimator.commands.estimate import ensure_workload
            from estimator.config import compose

            ensure_workload(compose([f"model={c['model']['name']}"]))
        load_workload(path)
        seen[key] = str(path.resolve())
    return seen[key]


def plan(
    sweep: dict[str, Any], overrides: list[str], used: dict[str, bool] | None = None, capture: bool = True
) -> tuple[kinds.Kind, list[tuple[dict[str, Any], str]]]:
    """Expand, compose and validate one sweep; return its kind and (config, workload path) points.
    ``used`` collects which command-line overrides applied (see :func:`grid.compose_points`);
    ``capture=False`` checks only (no workload is captured or read, no paths returned)."""
    kind = kinds.get(str(sweep.get("kind") or "estimate"))
    base = [o for o in overrides if not o.startswith(_NOT_POINT_KEYS)]
    configs = grid.compose_points(grid.expand(sweep.get("grid") or {}, sweep.get("zip")), base, used)
    if len(configs) > limits.get().sweep_points:
        raise EstimatorError(f"sweep has {len(configs)} points, more than limits.sweep_points = {limits.get().sweep_points}")
    for c in configs:
        kind.validate(c)  # every point before anything runs (or is captured)
    if not capture:
        return kind, [(c, "") for c in configs]
    seen: dict[str, str] = {}
    items = [(c, _workload_file(c, seen) if kind.name == "estimate" else "") for c in configs]
    return kind, items


def run_sweep(name: str, sweep: dict[str, Any], overrides: list[str], store: str, ray_cfg: dict[str, Any],
              force: bool = False) -> dict[str, Any]:
    if sweep.get("kind") == "packetsim":  # points are `estimator packetsim` configs (conf/packetsim.yaml)
        from estimator.packetsim.sweep import run_named_sweep

        return run_named_sweep(name, sweep, overrides, store, ray_cfg, force)
    t0 = time.perf_counter()
    kind, items = plan(sweep, overrides, used={})  # overrides were checked across the experiment
    done = set() if force else existing_keys(store, kind.table)
    todo = [it for it in items if kind.point_hash(it[0]) not in done]
    skipped = len(items) - len(todo)
    if skipped:
        print(f"sweep {name}: {skipped} of {len(items)} points already in {store}; running {len(todo)}",
              file=sys.stderr)
    written, pending = 0, []
    last_write = time.monotonic()
    for batch in run_batches(kind.evaluate, todo, ray_cfg, batch_size=sweep.get("batch_size"), desc=f"sweep {name}"):
        pending.extend(batch)
        # one transaction per ~2,000 points or 10 s: fewer, larger writes; an interrupted sweep
        # loses at most that much and resumes from what is stored
        if len(pending) >= WRITE_EVERY_POINTS or time.monotonic() - last_write > WRITE_EVERY_S:
            written += kind.write(store, pending)
            pending, last_write = [], time.monotonic()
    if pending:
        written += kind.write(store, pending)
    elapsed = time.perf_counter() - t0
    return {"sweep": name, "kind": kind.name, "points": len(items), "skipped": skipped, "written": written,
            "elapsed_s": elapsed}


def run(cfg: DictConfig, overrides: list[str]) -> dict[str, Any]:
    ray_cfg = to_container(cfg.ray)
    exp = cfg.get("experiment")
    if exp:
        sweeps = to_container(exp.get("sweeps") or {})
        if not sweeps:
            raise EstimatorError(f"experiment {exp.get('name')!r} declares no sweeps")
        label = str(exp.get("name"))
    else:
        sweeps = {str(cfg.sweep.name): to_container(cfg.sweep)}
        label = str(cfg.sweep.name)
    plans: dict[str, dict[str, Any]] = {}
    used: dict[str, bool] = {}
    for name, sweep in sweeps.items():  # validate every sweep before running any
        if sweep.get("kind") != "packetsim":
            plan(sweep, overrides, used, capture=False)  # a typo fails here, before any capture
        plans[name] = sweep
    grid.check_used(used, f"experiment {label}" if exp else f"sweep {label}")
    results = []
    for i, (name, sweep) in enumerate(plans.items(), 1):
        r = run_sweep(f"{label}/{name}" if exp else name, sweep, overrides, str(cfg.store), ray_cfg,
                      bool(cfg.get("sweep_force")))
        results.append(r)
        # one line per finished sweep on the terminal (and in a Snakemake log)
        print(f"[{i}/{len(plans)}] {r['sweep']}: {r['points'] - r['skipped']} of {r['points']} points computed, "
              f"{r['skipped']} already stored, {r.get('elapsed_s', 0):.1f} s", file=sys.stderr, flush=True)
    return {
        "experiment" if exp else "sweep": label,
        "store": str(cfg.store),
        "points": sum(r["points"] for r in results),
        "written": sum(r["written"] for r in results),
        "skipped": sum(r["skipped"] for r in results),
        "sweeps": results,
    }


def format_text(result: dict[str, Any]) -> str:
    """One sentence per sweep and a total, in words (rows include per-collective rows)."""
    label = result.get("experiment") or result.get("sweep")
    lines = [f"{'experiment' if 'experiment' in result else 'sweep'} {label} -> {result['store']}"]
    for r in result["sweeps"]:
        lines.append(f"  {r['sweep']}: {r['points']} points, {r['points'] - r['skipped']} computed "
                     f"({r['written']} rows written), {r['skipped']} already stored, {r.get('elapsed_s', 0):.1f} s")
    lines.append(f"total: {result['points']} points, {result['skipped']} already stored, "
                 f"{result['written']} rows written")
    return "\n".join(lines)
