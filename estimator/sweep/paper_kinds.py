"""Sweep kinds that some papers' claims need beyond an estimate or a collective price.

* ``allocation`` (Lumorph, seed 000 Sec. 3: multi-tenancy without fragmentation) — one point is a
  rack (``fabric``: its ``nodes`` are the rack's GPUs, ``tiles_per_server`` / ``r`` / ``radix``
  describe it when present) and an allocation policy named by ``algorithm`` (``lumorph``,
  ``torus_slices``, ``bcube_groups``, see :mod:`estimator.allocation.policies`); ``group_size``
  is the largest request (null = the ``allocate`` command's default). The request stream is the
  ``estimator allocate`` command's (its ``DEFAULTS``), replayed for each of :data:`ALLOCATION_SEEDS`
  so a claim rests on several streams. Table ``allocations``, one row per (point, seed).
* ``optree_depth`` (OpTree, seed 002 Sec. IV-B, Fig. 4) — one point is a TeraRack ring
  (``fabric``) and a message size (``bytes``); rows for every OpTree depth k = 1..ceil(log2 N):
  Theorem 1's steps, the all-gather time ``steps * (d/B + a)`` at that depth, and which depth is
  Theorem 2's closed-form k* and which the brute-force optimum. Table ``optree_depths``.

The config keys used are existing top-level keys (``fabric``, ``algorithm``, ``group_size``,
``bytes``), so a grid needs no new config group.
"""

from __future__ import annotations

import math
from typing import Any

from estimator import __version__
from estimator.config import config_hash
from estimator.errors import EstimatorError
from estimator.fabrics.registry import shared_fabric
from estimator.sweep.kinds import Kind, config_columns, register

ALLOCATION_KEYS = ("fabric", "algorithm", "group_size")
ALLOCATION_SEEDS = (0, 1, 2, 3, 4)  # five request streams per point (our choice: enough to see the trend)
OPTREE_KEYS = ("fabric", "bytes")


def _write(table: str, key: tuple[str, ...]):
    def write(store: str, rows: list[dict[str, Any]]) -> int:
        from estimator.store.duckdb_store import write_rows

        return write_rows(store, {table: (key, rows)})

    return write


def _identity(cfg: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {"config_hash": config_hash({k: cfg.get(k) for k in keys}), "version": __version__,
            **config_columns(cfg, keys)}


# ---- allocation -------------------------------------------------------------------------------
def _allocation_params(cfg: dict[str, Any]) -> dict[str, Any]:
    from estimator.commands.allocate import DEFAULTS

    fabric = cfg.get("fabric") or {}
    policy = str(cfg.get("algorithm") or "")
    params = {**DEFAULTS, "gpus": int(fabric.get("nodes") or DEFAULTS["gpus"]), "policies": [policy]}
    if fabric.get("tiles_per_server"):
        params["tiles"] = int(fabric["tiles_per_server"])
    radix = fabric.get("r") or fabric.get("radix")
    if radix:
        params["r"] = int(radix)
    if cfg.get("group_size"):
        params["max_size"] = int(cfg["group_size"])
    return params


def allocation_rows(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per seed: the ``estimator allocate`` report of this point's policy and rack."""
    from omegaconf import OmegaConf

    from estimator.commands.allocate import run as allocate

    base = _identity(cfg, ALLOCATION_KEYS)
    rows = []
    for seed in ALLOCATION_SEEDS:
        params = {**_allocation_params(cfg), "seed": seed}
        (rep,) = allocate(OmegaConf.create({"allocation": params}))
        rep = {k: v for k, v in rep.items() if k not in ("layout", "seed")}
        rows.append({**base, "seed": seed, "max_size": params["max_size"], **rep})
    return rows


def _validate_allocation(cfg: dict[str, Any]) -> None:
    from estimator.allocation import POLICIES, make_policy

    policy = str(cfg.get("algorithm") or "")
    if policy not in POLICIES:
        raise EstimatorError(f"allocation sweep: algorithm must name a policy ({', '.join(POLICIES)}), got {policy!r}")
    p = _allocation_params(cfg)
    make_policy(policy, p["gpus"], tiles=p["tiles"], r=p["r"])


def _allocation_batch(items: list[tuple[dict[str, Any], str]]) -> list[dict[str, Any]]:
    return [row for cfg, _ in items for row in allocation_rows(cfg)]


# ---- OpTree depth -----------------------------------------------------------------------------
def optree_depth_rows(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """Every OpTree depth's steps and all-gather time on this TeraRack ring."""
    from estimator.fabrics.optical import wdm_ring_steps as wr

    fabric = shared_fabric(cfg.get("fabric") or {})
    if fabric.name != "terarack":
        raise EstimatorError(f"optree_depth sweep: fabric must be terarack, got {fabric.name!r}")
    c = fabric.config
    n, w = c.nodes, c.wavelengths
    nbytes = float(cfg["bytes"])
    if not nbytes > 0:
        raise EstimatorError(f"bytes must be > 0, got {cfg['bytes']!r}")
    k_star = wr.optree_k_star(n, c.k_star_rounding)
    k_best, _ = wr.optree_best_depth(n, w)
    step_s = c.mrr_reconfig_s + nbytes / n * fabric.per_item_byte_s()  # a + d/B of Eq. (3)
    base = _identity(cfg, OPTREE_KEYS)
    rows = []
    for k in range(1, max(1, math.ceil(math.log2(n))) + 1):
        steps = wr.optree_steps(n, w, k)
        rows.append({**base, "nodes": n, "wavelengths": w, "depth": k, "steps": steps, "time_s": steps * step_s,
                     "k_star": k_star, "k_best": k_best, "is_k_star": k == k_star, "is_best": k == k_best})
    return rows


def _validate_optree(cfg: dict[str, Any]) -> None:
    if (cfg.get("fabric") or {}).get("name") != "terarack":
        raise EstimatorError("optree_depth sweep: fabric must be terarack")
    shared_fabric(cfg["fabric"])


def _optree_batch(items: list[tuple[dict[str, Any], str]]) -> list[dict[str, Any]]:
    return [row for cfg, _ in items for row in optree_depth_rows(cfg)]


register(Kind("allocation", ALLOCATION_KEYS, "allocations", _allocation_batch,
              _write("allocations", ("config_hash", "seed")), _validate_allocation))
register(Kind("optree_depth", OPTREE_KEYS, "optree_depths", _optree_batch,
              _write("optree_depths", ("config_hash", "depth")), _validate_optree))
