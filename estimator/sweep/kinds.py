"""What a sweep point computes, and where its rows go.

A sweep declares ``kind`` (default ``estimate``):

* ``estimate`` — one training-iteration estimate per point (tables ``estimates`` and
  ``collectives``), see :mod:`estimator.estimate`.
* ``collective`` — the price of one collective per point (table ``collective_costs``): the
  config's ``fabric``, ``collective``, ``algorithm``, ``bytes``, ``group_size``.

Other components register further kinds with :func:`register` (e.g. packet-level simulation).
A kind gives the config keys that identify a point (hashed into ``config_hash``), a Ray-side batch
evaluator returning store rows, and a writer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from estimator import __version__
from estimator.config import config_hash, flatten
from estimator.errors import EstimatorError
from estimator.fabrics.registry import shared_fabric


@dataclass(frozen=True)
class Kind:
    name: str
    keys: tuple[str, ...]  # config keys that determine a point's result
    table: str  # the table whose config_hash column says a point is done
    evaluate: Callable[[list[tuple[dict[str, Any], str]]], Any]  # Ray task: batch -> result
    write: Callable[[str, Any], int]  # driver: (store path, batch result) -> rows written
    validate: Callable[[dict[str, Any]], None] = lambda cfg: None
    # Optional: validation split into checks that each read only some top-level keys
    # ((keys, check), ...); a sweep then runs each check once per distinct value of its keys
    # instead of once per point. Their conjunction must equal ``validate``.
    scopes: tuple[tuple[tuple[str, ...], Callable[[dict[str, Any]], None]], ...] = ()
    columnar: bool = False  # points evaluated by estimator.sweep.columns (declared-schema batches)
    heavy: bool = False  # points take seconds or more: a local sweep of several runs on Ray (or the pool), never in-process

    def point_hash(self, cfg: dict[str, Any]) -> str:
        return config_hash({k: cfg.get(k) for k in self.keys})


_KINDS: dict[str, Kind] = {}
#: kinds whose module registers them when first asked for (they import this module, not it them)
LAZY = {"llm": "estimator.sweep.llm_kind", "allocation": "estimator.sweep.paper_kinds",
        "optree_depth": "estimator.sweep.paper_kinds", "cluster": "estimator.sweep.cluster_kind",
        "cluster_packet": "estimator.sweep.cluster_kind"}


def register(kind: Kind) -> None:
    _KINDS[kind.name] = kind


def get(name: str) -> Kind:
    if name not in _KINDS and name in LAZY:
        import importlib

        importlib.import_module(LAZY[name])
    if name not in _KINDS:
        raise EstimatorError(f"unknown sweep kind {name!r}; known: {', '.join(sorted(set(_KINDS) | set(LAZY)))}")
    return _KINDS[name]


def config_columns(cfg: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """Flattened ``_``-joined config columns for the given top-level keys."""
    return {k.replace(".", "_"): v for k, v in flatten({k: cfg.get(k) for k in keys}).items()}


# ---- estimate ---------------------------------------------------------------------------------
def _estimate_batch(items: list[tuple[dict[str, Any], str]]) -> list[Any]:
    from estimator.estimate import estimate

    return [estimate(cfg, path) for cfg, path in items]


def _write_estimates(store: str, batch: list[Any]) -> int:
    from estimator.store.duckdb_store import write_estimates

    return write_estimates(store, batch)


def _validate_estimate(cfg: dict[str, Any]) -> None:
    from estimator.estimate import validate

    validate(cfg)


def _validate_fabric(cfg: dict[str, Any]) -> None:
    shared_fabric(cfg.get("fabric") or {})


def _validate_device(cfg: dict[str, Any]) -> None:
    from estimator.compute.device import check_precision
    from estimator.estimate import device_profile

    device = device_profile(cfg.get("device"))
    precision = str(cfg.get("precision") or "amp")
    check_precision(precision)
    if not device.replay:
        device.tensor_peak(precision)


def _validate_policy(cfg: dict[str, Any]) -> None:
    from estimator.estimate import bucket_policy

    bucket_policy(cfg.get("parallelism"))


def _estimate_keys() -> tuple[str, ...]:
    from estimator.estimate import ESTIMATE_KEYS

    return ESTIMATE_KEYS


# ---- collective -------------------------------------------------------------------------------
COLLECTIVE_KEYS = ("fabric", "collective", "algorithm", "bytes", "group_size")


def collective_row(cfg: dict[str, Any]) -> dict[str, Any]:
    from estimator.collectives.busbw import cost_row

    fabric = shared_fabric(cfg["fabric"] or {})
    n = int(cfg.get("group_size") or fabric.nodes)
    nbytes = float(cfg["bytes"])
    if nbytes < 0:
        raise EstimatorError(f"bytes must be >= 0, got {nbytes!r}")
    cost = cost_row(fabric, str(cfg["collective"]), nbytes, str(cfg.get("algorithm") or "default"), n)
    return {
        "config_hash": config_hash({k: cfg.get(k) for k in COLLECTIVE_KEYS}),
        "version": __version__,
        **config_columns(cfg, COLLECTIVE_KEYS),
        "nodes": n,
        "algorithm_used": cost["algorithm"],
        **{k: cost[k] for k in ("time_s", "steps", "reconfig_s", "algbw_Bps", "busbw_Bps")},
    }


def _collective_batch(items: list[tuple[dict[str, Any], str]]) -> list[dict[str, Any]]:
    return [collective_row(cfg) for cfg, _ in items]


def _write_collective_rows(store: str, rows: list[dict[str, Any]]) -> int:
    from estimator.store.duckdb_store import write_rows

    return write_rows(store, {"collective_costs": ("config_hash", rows)})


def _validate_collective(cfg: dict[str, Any]) -> None:
    fabric = shared_fabric(cfg["fabric"] or {})
    if cfg.get("group_size"):
        fabric.check_size(int(cfg["group_size"]))


register(Kind("estimate", _estimate_keys(), "estimates", _estimate_batch, _write_estimates, _validate_estimate,
              scopes=((("fabric",), _validate_fabric), (("device", "precision"), _validate_device),
                      (("parallelism",), _validate_policy)), columnar=True))
register(Kind("collective", COLLECTIVE_KEYS, "collective_costs", _collective_batch, _write_collective_rows,
              _validate_collective))
