"""Run a declared sweep on Ray into the DuckDB store.

    estimator sweep sweep=resnet50_scaling          # one grid from conf/sweep/
    estimator sweep experiment=lumorph              # every sweep of a paper's experiment
    estimator sweep experiment=lumorph fabric.reconfig_s=10e-6
    estimator sweep 'sweep.grid={fabric:[ideal],fabric.nodes:[8,64]}'   # another grid (replaces it)
    estimator sweep 'sweep.grid.fabric=[lumorph]'   # one axis of the configured grid

A sweep is ``{name, kind, grid, zip}`` (see :mod:`estimator.sweep.grid` and
:mod:`estimator.sweep.kinds`); an experiment (``conf/experiment/<name>.yaml``) holds several under
``experiment.sweeps``. Other overrides on the command line apply to every point whose config has
the key. Points whose config hash is already in the store are skipped (resumable;
``sweep_force=true`` recomputes). Every point is validated before anything runs, so a bad grid
writes nothing. Sweeps of fewer than ``ray.in_process_below`` points run in this process; larger
local ones on a local Ray started once per command (the default) or on ``ray.num_cpus`` forked
worker processes (``ray.local_pool=true``); ``ray.address=auto`` or
``host:port`` runs them on an existing Ray cluster. Points are
generated from the grid on demand; estimate points come back from the workers as columnar
batches with a declared schema (:mod:`estimator.sweep.columns`).
"""

from __future__ import annotations

import sys
import time
from array import array
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from estimator import limits
from estimator.config import to_container
from estimator.errors import EstimatorError
from estimator.estimate import is_hybrid, load_workload, workload_path
from estimator.store.duckdb_store import StoreWriteFailed, existing_keys, merge_spills
from estimator.sweep import columns, grid, kinds
from estimator.sweep.runner import RaySession, run_chunks

HELP = "run a conf/sweep grid or a conf/experiment on Ray into the DuckDB store (resumable)"
RUN_WITH_OVERRIDES = True
OWN_GROUPS = ("sweep", "experiment")  # `sweep.grid.fabric=[ideal]` changes the sweep itself, not its points
NOT_COMPOSED = ("sweep.grid=", "sweep.zip=")  # replace the whole grid (run() applies them)
WRITE_EVERY_POINTS = 10_000  # a DuckDB write of 10,000 points costs ~2.5x less per point than five of 2,000
WRITE_EVERY_S = 10.0
_NOT_POINT_KEYS = ("sweep=", "sweep.", "experiment=", "experiment.", "ray.", "store=", "output=", "sweep_force=")


def _workload_file(c: dict[str, Any], seen: dict[str, str]) -> str:
    """Absolute workload path of an estimate point (captured on first use if missing or stale)."""
    path = workload_path(c)
    key = str(path)
    if key not in seen:
        from estimator.commands.estimate import stale_trace

        if not path.exists() or stale_trace(path):
            from estimator.commands.estimate import ensure_workload
            from estimator.config import compose

            ensure_workload(compose([f"model={c['model']['name']}"]))
        load_workload(path)
        seen[key] = str(path.resolve())
    return seen[key]


@dataclass
class Plan:
    """One sweep, planned once: its kind, its lazy grid, and per distinct workload its file."""

    kind: kinds.Kind
    grid: grid.Grid
    paths: dict[tuple, str]
    columnar: bool

    def items(self, indices: Any) -> list[tuple[dict[str, Any], str]]:
        """(config, workload path) of the given points (for kinds that take whole configs)."""
        out = []
        for c in self.grid.configs(indices):
            out.append((c, self.paths.get(columns.workload_key(c), "") if self.kind.name == "estimate" else ""))
        return out


def plan(
    sweep: dict[str, Any], overrides: list[str], used: dict[str, bool] | None = None, capture: bool = True
) -> Plan:
    """Compose and validate one sweep without visiting every point: checks that read only some keys
    run once per distinct value of those keys (:attr:`kinds.Kind.scopes`). ``used`` collects which
    command-line overrides applied (see :class:`grid.Grid`); ``capture=False`` checks only (no
    workload is captured or read)."""
    kind = kinds.get(str(sweep.get("kind") or "estimate"))
    base = [o for o in overrides if not o.startswith(_NOT_POINT_KEYS)]
    g = grid.Grid(sweep.get("grid") or {}, sweep.get("zip"), base, used)
    if g.size > limits.get().sweep_points:
        raise EstimatorError(f"sweep has {g.size} points, more than limits.sweep_points = {limits.get().sweep_points}")
    hybrid = any(is_hybrid(b) for b in g.bases.values()) or "parallelism.strategy" in g.keys
    if kind.scopes and not hybrid:
        for keys, check in kind.scopes:
            for c in g.scoped_configs(keys):
                check(c)
    else:
        for c in g.configs(range(g.size)):
            kind.validate(c)  # every point before anything runs (or is captured)
    p = Plan(kind, g, {}, kind.columnar and not hybrid)
    return plan_workloads(p) if capture and kind.name == "estimate" else p


def run_sweep(name: str, sweep: dict[str, Any], overrides: list[str], store: str, ray_cfg: dict[str, Any],
              force: bool = False, session: RaySession | None = None, planned: Plan | None = None) -> dict[str, Any]:
    if sweep.get("kind") == "packetsim":  # points are `estimator packetsim` configs (conf/packetsim.yaml)
        from estimator.packetsim.sweep import run_named_sweep

        return run_named_sweep(name, sweep, overrides, store, ray_cfg, force)
    t0 = time.perf_counter()
    own = session is None
    session = session or RaySession(ray_cfg)
    try:
        p = planned or plan(sweep, overrides, used={})  # overrides were checked across the experiment
        return _run_plan(name, p, store, session, force, sweep.get("batch_size"), t0)
    finally:
        if own:
            session.close()


def _run_plan(name: str, p: Plan, store: str, session: RaySession, force: bool, batch_size: Any,
              t0: float) -> dict[str, Any]:
    kind, g = p.kind, p.grid
    done = set() if force else existing_keys(store, kind.table)
    todo: Any = range(g.size)
    if done:  # resuming: hash every point once to find the missing ones
        todo = array("q", (i for i, c in enumerate(g.configs(range(g.size))) if kind.point_hash(c) not in done))
    skipped = g.size - len(todo)
    if skipped:
        print(f"sweep {name}: {skipped} of {g.size} points already in {store}; running {len(todo)}",
              file=sys.stderr)
    # rows of points not in the store are appended; a recomputation (or a grid that may repeat a
    # point) replaces rows of the same key
    replace = force or not g.distinct(kind.keys)
    in_process = (session.local and len(todo) < int(session.cfg.get("in_process_below") or 0)
                  and not (kind.heavy and len(todo) > 1))  # heavy points (cluster simulations) fan out
    pool = session.local and not in_process and bool(session.cfg.get("local_pool"))  # forked workers, no Ray
    if p.columnar:
        shared: tuple[Any, ...] = (g, p.paths, columns.estimate_schema(g))
        func: Any = _evaluate_columns
    else:
        shared, func = (kind.name, p), _evaluate_items
    written, pending, pending_points = 0, [], 0
    failed: list[StoreWriteFailed] = []  # writes whose rows were spilled: the sweep goes on, then fails
    last_write = time.monotonic()
    for batch in run_chunks(func, shared, todo, session, batch_size, f"sweep {name}", in_process, pool):
        if p.columnar:
            pending.append(batch)
            pending_points += batch["estimates"].num_rows
        else:
            pending.extend(batch)
            pending_points = len(pending)
        # one transaction per ~10,000 points or 10 s: fewer, larger writes; an interrupted sweep
        # loses at most that much and resumes from what is stored
        if pending_points >= WRITE_EVERY_POINTS or time.monotonic() - last_write > WRITE_EVERY_S:
            written += _write(p, store, pending, replace, failed)
            pending, pending_points, last_write = [], 0, time.monotonic()
    if pending:
        written += _write(p, store, pending, replace, failed)
    elapsed = time.perf_counter() - t0
    return {"sweep": name, "kind": kind.name, "table": kind.table, "points": g.size, "skipped": skipped, "written": written,
            "spilled": sum(f.rows for f in failed), "write_error": str(failed[0]) if failed else None,
            "elapsed_s": elapsed, "ray": not (in_process or pool) and bool(len(todo)), "pool": pool and bool(len(todo))}


def _write(p: Plan, store: str, pending: list[Any], replace: bool, failed: list[StoreWriteFailed]) -> int:
    """Store a batch; a write that fails has spilled its rows (said on stderr) and the sweep goes on,
    so every computed row is kept (:func:`run` fails at the end)."""
    try:
        if p.columnar:
            return columns.write_batches(store, pending, replace)
        return p.kind.write(store, pending)
    except StoreWriteFailed as exc:
        if not failed:
            print(f"warning: {exc}; the sweep goes on and saves the rest there too", file=sys.stderr, flush=True)
        failed.append(exc)
        return 0


def _evaluate_columns(g: grid.Grid, paths: dict[tuple, str], schema: dict[str, Any], indices: Any) -> Any:
    """Ray task (or in-process call): estimate points of a grid into declared-schema columns."""
    return columns.estimate_batch(g, indices, paths, schema)


def _evaluate_items(kind_name: str, p: Plan, indices: Any) -> Any:
    """Ray task (or in-process call): a kind's evaluator on the configs of some points."""
    return kinds.get(kind_name).evaluate(p.items(indices))


def _checked(cfg: DictConfig, overrides: list[str]) -> tuple[str, bool, dict[str, dict[str, Any]], dict[str, Plan]]:
    """(label, experiment?, sweeps by name, planned non-packetsim sweeps): every sweep composed and
    every point validated, nothing captured or run (what ``run`` checks first; ``--check``)."""
    exp = cfg.get("experiment")
    if exp:
        sweeps = to_container(exp.get("sweeps") or {})
        if not sweeps:
            raise EstimatorError(f"experiment {exp.get('name')!r} declares no sweeps")
        label = str(exp.get("name"))
    else:
        sweep = to_container(cfg.sweep)
        for ov in overrides:  # `sweep.grid={...}` replaces the grid (Hydra would merge it into the old one)
            if ov.startswith(NOT_COMPOSED):
                key, value = grid._parse_override(ov)
                sweep[key.split(".", 1)[1]] = value
        label = sweep_label(str(cfg.sweep.name), overrides)
        sweeps = {label: sweep}
    plans: dict[str, dict[str, Any]] = {}
    used: dict[str, bool] = {}
    checked: dict[str, Plan] = {}
    for name, sweep in sweeps.items():  # validate every sweep before running any
        if sweep.get("kind") != "packetsim":
            checked[name] = plan(sweep, overrides, used, capture=False)  # a typo fails here, before any capture
        plans[name] = sweep
    grid.check_used(used, f"experiment {label}" if exp else f"sweep {label}")
    return label, bool(exp), plans, checked


def check(cfg: DictConfig, overrides: list[str]) -> int:
    """``--check``: every sweep's grid and every point, as a run checks them before it starts
    (``kind: packetsim`` sweeps check their points when they run); nothing runs. Returns the
    number of grid points (what ``--check`` reports, not the one command line)."""
    _, _, plans, checked = _checked(cfg, overrides)
    return sum(checked[n].grid.size if n in checked else grid.grid_size(s.get("grid") or {}, s.get("zip"))
               for n, s in plans.items())  # a packetsim sweep is not planned: its grid counted as is


def run(cfg: DictConfig, overrides: list[str]) -> dict[str, Any]:
    ray_cfg = to_container(cfg.ray)
    label, exp, plans, checked = _checked(cfg, overrides)
    merge_spills(str(cfg.store))  # rows a failed run saved beside the store (even when nothing is left to compute)
    results = []
    with RaySession(ray_cfg) as session:  # Ray starts at most once for all the sweeps
        for i, (name, sweep) in enumerate(plans.items(), 1):
            t0 = time.perf_counter()
            if name in checked:  # capture/read the workloads now (the grid is not planned again)
                c = checked[name]
                if c.kind.name == "estimate":
                    c = plan_workloads(c)
                r = run_sweep(f"{label}/{name}" if exp else name, sweep, overrides, str(cfg.store), ray_cfg,
                              bool(cfg.get("sweep_force")), session, c)
                r["elapsed_s"] = time.perf_counter() - t0  # with the workload captures
            else:
                r = run_sweep(f"{label}/{name}" if exp else name, sweep, overrides, str(cfg.store), ray_cfg,
                              bool(cfg.get("sweep_force")), session)
            results.append(r)
            if len(plans) > 1:  # progress: one line per finished sweep (the summary comes once, at the end)
                print(f"[{i}/{len(plans)}] {r['sweep']}: {r['points'] - r['skipped']} of {r['points']} points computed, "
                      f"{r['skipped']} already stored, {r.get('elapsed_s', 0):.1f} s", file=sys.stderr, flush=True)
    spilled = sum(r.get("spilled") or 0 for r in results)
    if spilled:
        first = next(r["write_error"] for r in results if r.get("write_error"))
        raise EstimatorError(f"{spilled} computed row(s) were not written: {first.split('; ')[0]}; they are saved "
                             f"in {cfg.store}.spill/ and merged by the next write (run the sweep again)")
    return {
        "experiment" if exp else "sweep": label,
        "store": str(cfg.store),
        "points": sum(r["points"] for r in results),
        "written": sum(r["written"] for r in results),
        "skipped": sum(r["skipped"] for r in results),
        "sweeps": results,
    }


def plan_workloads(p: Plan) -> Plan:
    """The workload file of every distinct workload of a planned estimate sweep (captured if missing)."""
    seen: dict[str, str] = {}
    paths = {columns.workload_key(c): _workload_file(c, seen) for c in p.grid.scoped_configs(("workload", "model", "traces_dir"))}
    return Plan(p.kind, p.grid, paths, p.columnar)


def sweep_label(name: str, overrides: list[str]) -> str:
    """What a sweep is called in its output: the configured sweep's name, unless the command line
    replaced its grid (``sweep.grid={...}``: "command-line grid") or changed it
    (``sweep.grid.fabric=[...]``: "<name> (grid changed on the command line)")."""
    if any(o.startswith(NOT_COMPOSED) for o in overrides):
        return "command-line grid"
    if any(o.lstrip("+~").startswith(("sweep.grid.", "sweep.zip")) for o in overrides):
        return f"{name} (grid changed on the command line)"
    return name


def _in_words(points: int, skipped: int, sweeps: list[dict[str, Any]]) -> str:
    """"807 points: 807 computed, 0 already in the store; 843 rows written (estimates 800, ...)"."""
    tables: dict[str, int] = {}
    for r in sweeps:
        table = r.get("table") or r.get("kind") or "rows"
        tables[table] = tables.get(table, 0) + r["written"]
    written = sum(tables.values())
    where = ", ".join(f"{t} {n}" for t, n in tables.items())
    return (f"{points} points: {points - skipped} computed, {skipped} already in the store; "
            f"{written} rows written ({where})")


def format_text(result: dict[str, Any]) -> str:
    """The summary, once: one line for a sweep, one for an experiment (its sweeps were reported as
    each finished). Rows are store rows per table (a point can write several)."""
    sweeps = result["sweeps"]
    what = "experiment" if "experiment" in result else "sweep"
    elapsed = sum(r.get("elapsed_s", 0.0) for r in sweeps)
    parts = f"{len(sweeps)} sweeps, " if len(sweeps) > 1 else ""
    return (f"{what} {result[what]}: {parts}{_in_words(result['points'], result['skipped'], sweeps)} "
            f"in {result['store']}, {elapsed:.1f} s")
