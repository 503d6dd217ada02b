"""The packet-level sweep: an experiment's ``kind: packetsim`` grids, run on Ray into DuckDB.

Points are ``estimator packetsim`` overrides (``network``, ``nodes``, ``load``, ``locality``,
``seed`` or any dotted key of ``conf/packetsim.yaml``); each becomes one row of the ``packetsim``
table keyed by ``config_hash`` (the hash of the resolved simulation spec), so re-running skips
points already stored unless ``sweep_force=true``. Uses the project's Ray batch runner and DuckDB
writer (:mod:`estimator.sweep.runner`, :mod:`estimator.store.duckdb_store`).
"""

from __future__ import annotations

import time
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from estimator import __version__
from estimator.config import config_hash, flatten, to_container
from estimator.errors import EstimatorError
from estimator.packetsim.params import SimSpec

TABLE = "packetsim"


def spec_from_config(cfg: dict[str, Any]) -> SimSpec:
    return SimSpec.from_mapping(cfg)


def row(spec: SimSpec, summary: dict[str, Any]) -> dict[str, Any]:
    """A store row: identity, the flattened spec (``opsquare_link_bps`` ...) and the metrics."""
    params = spec.to_dict()
    out = {"config_hash": config_hash(params), "version": __version__,
           "created_at": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    out.update({k.replace(".", "_"): v for k, v in flatten(params).items()})
    out.update(summary)
    return out


def simulate_batch(specs: list[SimSpec]) -> list[dict[str, Any]]:
    """Ray task: run a batch of specs and return their store rows."""
    from estimator.packetsim import simulate

    return [row(s, simulate(s).summary()) for s in specs]


def points(cfg: DictConfig) -> list[SimSpec]:
    """Every point of the experiment's packetsim sweeps, validated before anything runs."""
    exp = to_container(cfg.experiment)
    sweeps = {k: v for k, v in (exp.get("sweeps") or {}).items() if (v or {}).get("kind") == "packetsim"}
    if not sweeps:
        raise EstimatorError(f"experiment={exp.get('name')!r} declares no `kind: packetsim` sweep")
    base = cfg.copy()
    OmegaConf.set_struct(base, True)
    with open_dict(base):
        del base["experiment"]
    return [spec for name, sweep in sweeps.items() for spec in specs_for(base, name, sweep)]


def specs_for(base: DictConfig, name: str, sweep: dict[str, Any]) -> list[SimSpec]:
    """The validated points of one sweep (``grid`` keys are packetsim config keys)."""
    from estimator.sweep.grid import expand

    specs = []
    for point in expand(sweep.get("grid") or {}, sweep.get("zip")):
        c = base.copy()
        for key, value in point.items():
            if OmegaConf.select(c, key, default=None) is None and key not in _nullable(c):
                raise EstimatorError(f"experiment sweep {name}: grid key {key!r} is not a packetsim setting")
            OmegaConf.update(c, key, value, merge=False)
        specs.append(spec_from_config(to_container(c)))
    return specs


def _nullable(c: DictConfig) -> set[str]:
    return {k for k, v in flatten(to_container(c)).items() if v is None}


def _run(specs: list[SimSpec], store: str, ray_cfg: dict[str, Any], force: bool, label: str) -> dict[str, Any]:
    from estimator.store.duckdb_store import existing_keys, write_rows
    from estimator.sweep.runner import run_batches

    t0 = time.perf_counter()
    done = set() if force else existing_keys(store, TABLE)
    todo = [s for s in specs if config_hash(s.to_dict()) not in done]
    written = 0
    for rows in run_batches(simulate_batch, todo, ray_cfg, batch_size=ray_cfg.get("batch_size"), desc=label):
        written += write_rows(store, {TABLE: ("config_hash", rows)})
    return {"store": store, "table": TABLE, "points": len(specs), "skipped": len(specs) - len(todo),
            "written": written, "elapsed_s": time.perf_counter() - t0}


def run_sweep(cfg: DictConfig) -> dict[str, Any]:
    """``estimator packetsim experiment=NAME``: every ``kind: packetsim`` sweep of the experiment."""
    result = _run(points(cfg), str(cfg.store), to_container(cfg.ray), bool(cfg.get("sweep_force")),
                  f"packetsim {cfg.experiment.name}")
    return {"experiment": str(cfg.experiment.name), **result}


def run_named_sweep(name: str, sweep: dict[str, Any], overrides: list[str], store: str,
                    ray_cfg: dict[str, Any], force: bool = False) -> dict[str, Any]:
    """For ``estimator sweep`` (same shape as its ``run_sweep``): run one ``kind: packetsim``
    sweep. Command-line overrides whose top-level key is a packetsim setting apply to every point."""
    from estimator.config import compose

    keys = set(compose([], config_name="packetsim"))
    mine = [o for o in overrides if o.partition("=")[0].lstrip("+~").split(".")[0] in keys - {"experiment"}
            and not o.startswith(("store=", "output=", "ray.", "sweep_force="))]
    base = compose(mine, config_name="packetsim")
    with open_dict(base):
        base.pop("experiment", None)
    ray = {**ray_cfg, "batch_size": sweep.get("batch_size") or base.ray.batch_size}  # points are heavy
    result = _run(specs_for(base, name, sweep), store, ray, force, f"sweep {name}")
    return {"sweep": name, "kind": "packetsim", **result}
