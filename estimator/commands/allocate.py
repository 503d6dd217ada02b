"""Multi-tenant allocation on a rack: Lumorph (any size) vs TPU-style torus slices vs SiPAC/BCube
groups, on the same seeded request stream.

``estimator allocate allocation.gpus=256 allocation.requests=500 allocation.seed=1``

Parameters (``allocation.<key>=...``; defaults in brackets): ``gpus`` [256] rack size (a power of
two, whole 32-tile servers), ``tiles`` [32] Lightpath tiles per server, ``r`` [2] SiPAC/BCube
switch radix, ``requests`` [500], ``seed`` [0], ``max_size`` [32] (sizes uniform 1..max_size) or
``sizes`` (a list), ``mean_interarrival_s`` [1.0], ``mean_duration_s`` [12.0], ``policies``
[lumorph, torus_slices, bcube_groups]. One row per policy: placed / rejected / fragmented
requests, stranded GPU-seconds, utilisation.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from estimator.allocation import POLICIES, generate_requests, make_policy, simulate
from estimator.config import to_container
from estimator.errors import EstimatorError

HELP = "multi-tenant allocation: Lumorph any-size vs fixed-shape slices (utilisation, rejections)"

DEFAULTS: dict[str, Any] = {
    "gpus": 256,
    "tiles": 32,
    "r": 2,
    "requests": 500,
    "seed": 0,
    "max_size": 32,
    "sizes": None,
    "mean_interarrival_s": 1.0,
    "mean_duration_s": 12.0,
    "policies": list(POLICIES),
}


def _int(params: dict[str, Any], key: str) -> int:
    v = params[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise EstimatorError(f"allocation.{key} must be an integer, got {v!r}")
    return v


def _params(cfg: DictConfig) -> tuple[dict[str, Any], list[Any]]:
    """The allocation parameters (unknown keys refused) and one policy per name, each rack checked."""
    given = to_container(cfg.get("allocation") or {}) if "allocation" in cfg else {}
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise EstimatorError(f"allocation: unknown parameter(s) {unknown}; known: {sorted(DEFAULTS)}")
    p = {**DEFAULTS, **given}
    names = [p["policies"]] if isinstance(p["policies"], str) else list(p["policies"] or [])
    if not names:  # an empty list printed an empty table and exit 0
        raise EstimatorError(f"allocation.policies must name at least one of {', '.join(POLICIES)}")
    return p, [make_policy(str(name), _int(p, "gpus"), tiles=_int(p, "tiles"), r=_int(p, "r")) for name in names]


def check(cfg: DictConfig) -> None:
    """``--check``: the parameters and every policy's rack (e.g. whole 32-tile servers), nothing simulated."""
    _params(cfg)


def run(cfg: DictConfig) -> list[dict[str, Any]]:
    p, policies = _params(cfg)
    reqs = generate_requests(
        _int(p, "requests"),
        seed=_int(p, "seed"),
        sizes=p["sizes"],
        max_size=_int(p, "max_size"),
        mean_interarrival_s=float(p["mean_interarrival_s"]),
        mean_duration_s=float(p["mean_duration_s"]),
    )
    rows = []
    for policy in policies:
        rep = simulate(policy, reqs).to_dict()
        rep.pop("rejected_ids")
        rows.append({**rep, "layout": policy.describe(), "seed": p["seed"]})
    return rows


def format_text(rows: list[dict[str, Any]]) -> str:
    head = f"{'policy':<14} {'GPUs':>5} {'placed':>7} {'rejected':>8} {'fragmented':>10} {'rounded_up':>10} {'stranded_GPU_s':>14} {'utilisation':>11}"
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['policy']:<14} {r['capacity']:>5} {r['placed']:>7} {r['rejected']:>8} {r['rejected_fragmented']:>10} "
            f"{r['overallocated']:>10} {r['stranded_gpu_s']:>14.1f} {r['utilisation']:>11.3f}"
        )
    return "\n".join(lines)
