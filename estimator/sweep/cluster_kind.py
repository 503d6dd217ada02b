"""Sweep kinds of the cluster simulation (:mod:`estimator.cluster`).

* ``cluster`` — one point is one cluster simulation: the main config with a ``cluster`` group
  (``conf/cluster/``) and a ``fabric``; its rows go to ``cluster_runs`` (one per point, key
  ``config_hash``: the config keys of :data:`estimator.cluster.simulate.CLUSTER_KEYS` and the trace
  file's digest) and ``cluster_jobs`` (one per job, key ``config_hash``, ``job_id``).
* ``cluster_packet`` — one point is one packet-level agreement scenario
  (``cluster.packet_scenario``, :mod:`estimator.cluster.packet_check`); one row per job into
  ``cluster_packet_checks`` (key ``config_hash``, ``job``).
"""

from __future__ import annotations

from typing import Any

from estimator import __version__
from estimator.cluster.simulate import CLUSTER_KEYS, ClusterResult, cluster_params, run_hash
from estimator.config import config_hash
from estimator.sweep.kinds import Kind, register


def write_results(store: str, results: list[ClusterResult]) -> int:
    """Store runs and their jobs in one transaction; returns the runs written."""
    from estimator.store.duckdb_store import write_rows

    runs = [r.run for r in results]
    jobs = [j for r in results for j in r.jobs]
    write_rows(store, {"cluster_runs": ("config_hash", runs), "cluster_jobs": (("config_hash", "job_id"), jobs)})
    return len(runs)


def _digest(cfg: dict[str, Any]) -> str:
    trace = (cfg.get("cluster") or {}).get("trace")
    if not trace:
        return ""
    import hashlib

    from estimator.files import read_input, resolve_input

    return hashlib.sha256(read_input(resolve_input(str(trace)), "job trace")).hexdigest()[:16]


class ClusterKind(Kind):
    def point_hash(self, cfg: dict[str, Any]) -> str:
        return run_hash(cfg, _digest(cfg))


def _batch(items: list[tuple[dict[str, Any], str]]) -> list[ClusterResult]:
    from estimator.cluster import simulate_cluster
    from estimator.cluster.simulate import capture_missing

    out = []
    for cfg, _ in items:
        capture_missing(cfg)
        out.append(simulate_cluster(cfg, progress=False))
    return out


def _validate(cfg: dict[str, Any]) -> None:
    from estimator.cluster.contention import Contention
    from estimator.cluster.placement import make_placer
    from estimator.cluster.scheduler import Queue
    from estimator.fabrics.registry import shared_fabric

    p = cluster_params(cfg)
    fabric = shared_fabric(cfg.get("fabric") or {})
    Queue(str(p.get("scheduler", "fifo")), p.get("backfill_depth", 500))
    Contention(0, str(p.get("phases", "independent")))
    make_placer(str(p.get("placement", "packed")), fabric.nodes, (), 0, fabric.config)
    _digest(cfg)


register(ClusterKind("cluster", CLUSTER_KEYS, "cluster_runs", _batch, write_results, _validate, heavy=True))


# ---- the packet-level agreement -----------------------------------------------------------------
PACKET_KEYS = ("cluster",)


def _packet_batch(items: list[tuple[dict[str, Any], str]]) -> list[dict[str, Any]]:
    from estimator.cluster.packet_check import compare, scenario

    rows = []
    for cfg, _ in items:
        sc = scenario(str(cluster_params(cfg).get("packet_scenario")))
        base = {"config_hash": config_hash({k: cfg.get(k) for k in PACKET_KEYS}), "version": __version__,
                "scenario_key": sc.key}
        rows += [{**base, **c.row()} for c in compare(sc)]
    return rows


def _write_packet(store: str, rows: list[dict[str, Any]]) -> int:
    from estimator.store.duckdb_store import write_rows

    return write_rows(store, {"cluster_packet_checks": (("config_hash", "job"), rows)})


def _validate_packet(cfg: dict[str, Any]) -> None:
    from estimator.cluster.packet_check import scenario

    scenario(str(cluster_params(cfg).get("packet_scenario")))


register(Kind("cluster_packet", PACKET_KEYS, "cluster_packet_checks", _packet_batch, _write_packet, _validate_packet,
              heavy=True))
