"""Cross-fabric comparison: the same workload, the same per-GPU bandwidth, every fabric, one table.

``estimator compare model=resnet50 algorithm=auto compare.nodes=64 compare.bandwidth_Bps=300e9``

Every registered fabric (or ``compare.fabrics=[lumorph,ideal,...]``) is sized to ``compare.nodes``
GPUs [64] and given ``compare.bandwidth_Bps`` bytes/s per GPU per direction [300e9, seed 000's
NVLink figure], mapped onto its own parameters (see :data:`BANDWIDTH`): e.g. a 2D torus gets B/4
per link, an OCS server B/ports per port, a TeraRack node B/w per wavelength, a SiPAC CU B in
total over its l+1 ports, an OPSquare node B/(P+1) per transceiver. The OCS is wired once for the whole job: the ring / torus2d / btree shape
with the fastest iteration (its MEMS reconfiguration, paid once at job start, is in ``reconfig_s``). Fabrics whose shape cannot hold that many GPUs (SiPAC needs r^(l+1),
OPSquare N x M, ...) are listed with the reason. Rows are sorted by iteration time, fastest
first (fabrics that cannot run it last). Everything else (model, device, parallelism,
``algorithm``: ``auto`` lets each fabric pick its fastest) comes from the usual config.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig

from estimator.config import compose, to_container
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.fabrics.registry import available

HELP = "every fabric on the same workload and per-GPU bandwidth: one table"

DEFAULTS: dict[str, Any] = {"nodes": 64, "bandwidth_Bps": 300.0e9, "fabrics": None}
SKIP = ("custom",)  # needs a user topology file


def _power_shape(n: int, prefer_levels: int = 3) -> tuple[int, int]:
    """(r, levels) with r^levels = n, levels closest to ``prefer_levels`` (levels >= 2)."""
    best = None
    for levels in range(2, max(2, n.bit_length()) + 1):
        r = round(n ** (1 / levels))
        for cand in (r - 1, r, r + 1):
            if cand >= 2 and cand**levels == n:
                key = (abs(levels - prefer_levels), levels)
                if best is None or key < best[0]:
                    best = (key, (cand, levels))
    if best is None:
        raise EstimatorError(f"{n} GPUs is not r^k for any r >= 2, k >= 2")
    return best[1]


def _pods(n: int) -> dict[str, int]:
    m = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
    if m < 2:
        raise EstimatorError(f"{n} GPUs cannot be split into pods x nodes")
    pod_nodes = n // m
    groups = pod_nodes // 4 if pod_nodes % 4 == 0 else 1  # seed 004: F = M/P = 4 at 1024 nodes
    return {"pods": m, "pod_nodes": pod_nodes, "groups": groups}


def _opsquare(n: int, b: float, cfg: dict[str, Any]) -> dict[str, Any]:
    """B split over a node's P intra-pod + 1 inter-pod transceivers, as conf/experiment/cross_fabric.yaml does (each
    transceiver at B overstated a node's bandwidth (P + 1)-fold: OPSquare ran 0.2 % faster than ideal at 64 GPUs)."""
    shape = _pods(n)
    return {**shape, "transceiver_bps": 8 * b / (shape["groups"] + 1)}


def _sipac(n: int, b: float, cfg: dict[str, Any]) -> dict[str, Any]:
    r, levels = _power_shape(n)
    return {"r": r, "l": levels - 1, "per_cu_bandwidth_bps": 8 * b}


def _bcube(n: int, b: float, cfg: dict[str, Any]) -> dict[str, Any]:
    return {"radix": _power_shape(n)[0], "node_bandwidth_Bps": b}


def _superpod(n: int, b: float, cfg: dict[str, Any]) -> dict[str, Any]:
    nic = float(cfg.get("nic_bandwidth_Bps", 25e9))
    if b <= nic:
        raise EstimatorError(f"per-GPU bandwidth {b:g} B/s does not exceed the SuperPOD NIC share {nic:g}")
    return {"nvlink_bandwidth_Bps": b - nic}  # NVLink + NIC = B


# fabric -> (nodes, B bytes/s per GPU, its default config) -> parameter overrides
BANDWIDTH: dict[str, Callable[[int, float, dict[str, Any]], dict[str, Any]]] = {
    "ideal": lambda n, b, c: {"bandwidth_Bps": b},
    "nvlink_leafspine": lambda n, b, c: {"nvlink_bandwidth_Bps": b},  # uplinks per 8-GPU node unchanged
    "superpod": _superpod,
    "torus2d": lambda n, b, c: {"link_bandwidth_Bps": b / 4},
    "bcube": _bcube,
    "fattree": lambda n, b, c: {"link_bandwidth_Bps": b},
    "ring": lambda n, b, c: {"link_bandwidth_Bps": b / 2 if c.get("bidirectional", True) else b},
    "lumorph": lambda n, b, c: {"bandwidth_Bps": b},
    "sipac": _sipac,
    "terarack": lambda n, b, c: {"wavelength_bps": 8 * b / int(c.get("wavelengths", 64))},
    "opsquare": _opsquare,
    "ocs": lambda n, b, c: {"port_bps": 8 * b / int(c.get("ports", 4)), "topology": "auto"},
}


def _options(cfg: DictConfig) -> dict[str, Any]:
    given = to_container(cfg.get("compare") or {}) if "compare" in cfg else {}
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise EstimatorError(f"compare: unknown parameter(s) {unknown}; known: {sorted(DEFAULTS)}")
    opts = {**DEFAULTS, **given}
    n = opts["nodes"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise EstimatorError(f"compare.nodes must be an integer >= 2, got {n!r}")
    try:
        b = float(opts["bandwidth_Bps"])
    except (TypeError, ValueError):
        raise EstimatorError(f"compare.bandwidth_Bps must be a number, got {opts['bandwidth_Bps']!r}") from None
    if not b > 0 or not math.isfinite(b):
        raise EstimatorError(f"compare.bandwidth_Bps must be positive, got {opts['bandwidth_Bps']!r}")
    opts["bandwidth_Bps"] = b
    return opts


def fabric_params(name: str, nodes: int, bandwidth_Bps: float) -> dict[str, Any]:
    """The fabric's default config resized to ``nodes`` GPUs at ``bandwidth_Bps`` per GPU."""
    if name not in BANDWIDTH:
        raise EstimatorError(f"compare: no per-GPU bandwidth mapping for fabric {name!r}")
    base = to_container(compose([f"fabric={name}"]))["fabric"]
    return {**base, "nodes": nodes, **BANDWIDTH[name](nodes, bandwidth_Bps, base)}


def _ocs_job_choice(base: dict[str, Any], params: dict[str, Any]):
    """The OCS wired as one topology for the whole job: the wired shape with the fastest iteration
    (the MEMS reconfiguration is paid once at job start, not per collective)."""
    from estimator.fabrics.ocs import WIRED

    best = None
    for topo in WIRED:
        try:
            est = estimate({**base, "fabric": {**params, "topology": topo}})
        except EstimatorError:
            continue
        if best is None or est.metrics["iter_time_s"] < best[0].metrics["iter_time_s"]:
            best = (est, topo)
    if best is None:
        raise EstimatorError("ocs: the workload runs on none of the wired topologies")
    return best


def check(cfg: DictConfig) -> None:
    """``--check``: the compare options and the shared workload/device settings."""
    from estimator.estimate import validate

    _options(cfg)
    validate(to_container(cfg))


def run(cfg: DictConfig) -> list[dict[str, Any]]:
    opts = _options(cfg)
    names = opts["fabrics"] or [f for f in available() if f not in SKIP]
    if isinstance(names, str):
        names = [names]
    base = to_container(cfg)
    rows: list[dict[str, Any]] = []
    for name in names:
        row: dict[str, Any] = {"fabric": name, "nodes": opts["nodes"], "bandwidth_Bps": opts["bandwidth_Bps"]}
        try:
            params = fabric_params(str(name), opts["nodes"], opts["bandwidth_Bps"])
            if params.get("name") == "ocs" and params.get("topology") == "auto":
                est, topo = _ocs_job_choice(base, params)
                row["reconfig_s"] = params["reconfig_s"]  # paid once at job start
            else:
                est, topo = estimate({**base, "fabric": params}), None
        except EstimatorError as exc:
            rows.append({**row, "error": str(exc)})
            continue
        m = est.metrics
        rows.append({
            **row,
            "algorithm": m["algorithm_used"] + (f"@{topo}" if topo else ""),
            "iter_time_s": m["iter_time_s"],
            "comm_time_s": m["comm_time_s"],
            "exposed_comm_time_s": m["exposed_comm_time_s"],
            "samples_per_s": m["samples_per_s"],
            "model": m["workload_name"],
        })
    ok = [r for r in rows if "iter_time_s" in r]
    ref = next((r["iter_time_s"] for r in ok if r["fabric"] == "ideal"), None)
    for r in ok:
        r["speedup_vs_ideal"] = ref / r["iter_time_s"] if ref else None
    rows.sort(key=lambda r: (r.get("iter_time_s", math.inf), r["fabric"]))  # fastest first; n/a last, by name
    return rows


def format_text(rows: list[dict[str, Any]]) -> str:
    head = (f"{'fabric':<17} {'algorithm':<26} {'iter_ms':>9} {'comm_ms':>9} {'exposed_ms':>10} "
            f"{'samples/s':>10} {'vs_ideal':>8}")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['fabric']:<17} n/a: {r['error']}")
            continue
        sp = f"{r['speedup_vs_ideal']:.3f}" if r.get("speedup_vs_ideal") else "-"
        lines.append(
            f"{r['fabric']:<17} {str(r['algorithm'])[:26]:<26} {r['iter_time_s'] * 1e3:>9.3f} {r['comm_time_s'] * 1e3:>9.3f} "
            f"{r['exposed_comm_time_s'] * 1e3:>10.3f} {r['samples_per_s']:>10.1f} {sp:>8}"
        )
    if rows:
        lines.append(f"# {rows[0]['nodes']} GPUs, {rows[0]['bandwidth_Bps'] / 1e9:g} GB/s per GPU per direction")
    return "\n".join(lines)
