"""Many training jobs sharing one fabric: queueing, placement and network contention.

    estimator cluster fabric=fattree fabric.nodes=1024 cluster.jobs=2000 output=json
    estimator cluster fabric=custom fabric.topology=topologies/leafspine_4to1.yaml fabric.nodes=1024 \\
        cluster.phases=aligned cluster.placement=random
    estimator cluster fabric=ocs fabric.nodes=256 fabric.topology=auto cluster.trace=jobs.csv write=true
    estimator cluster -m fabric=fattree,ocs cluster.phases=independent,interleaved

The cluster is ``fabric`` (its ``nodes`` are the GPUs); the jobs come from ``cluster.trace`` (CSV,
Parquet or JSON) or a synthetic trace from published distributions (``conf/cluster/default.yaml``).
Prints the run's makespan, job completion time (JCT) statistics, queueing delay, slowdown of jobs
by their neighbours, GPU and link utilisation; ``write=true`` stores the run in table
``cluster_runs`` and one row per job in ``cluster_jobs`` (``store=...``). Models a trace names
that are not captured yet are captured first. Parameters and their sources: docs/cluster.md.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from estimator.config import to_container

if TYPE_CHECKING:
    from omegaconf import DictConfig

HELP = "many training jobs sharing one fabric: queueing, placement, contention (JCT, slowdown)"
PLAIN_CONFIG = True

SUMMARY = ("fabric_name", "gpus", "jobs", "contention_model", "cluster_scheduler", "cluster_placement",
           "cluster_phases", "makespan_s", "jct_mean_s", "jct_p50_s", "jct_p99_s", "queue_mean_s", "slowdown_mean",
           "slowdown_p99", "slowdown_max", "jobs_slowed", "setup_mean_s", "placement_factor_mean", "gpu_utilisation",
           "gpu_alloc_utilisation", "link_utilisation", "wall_s", "config_hash")


def check(cfg: DictConfig | dict[str, Any]) -> None:
    """``--check`` (and a run, first): the cluster parameters and the fabric, before any capture (the CLI's shared
    checks have refused a ``write=true`` store that is no DuckDB file); the job trace file is read when the run
    starts."""
    from estimator.cluster.simulate import cluster_params
    from estimator.fabrics.registry import shared_fabric

    resolved = cfg if isinstance(cfg, dict) else to_container(cfg)
    cluster_params(resolved)
    shared_fabric(resolved.get("fabric") or {})


def run(cfg: DictConfig | dict[str, Any]) -> dict[str, Any]:
    from estimator.cluster import simulate_cluster
    from estimator.cluster.simulate import capture_missing

    resolved = cfg if isinstance(cfg, dict) else to_container(cfg)
    check(resolved)  # bad keys and a bad fabric fail before any capture
    capture_missing(resolved, announce=lambda msg: print(f"note: {msg}", file=sys.stderr))
    result = simulate_cluster(resolved)
    written = 0
    if resolved.get("write"):
        from estimator.sweep.cluster_kind import write_results

        written = write_results(str(resolved["store"]), [result])
    out = {k: result.run.get(k) for k in SUMMARY}
    if resolved.get("write"):
        out["cluster_jobs_written"] = len(result.jobs) if written else 0
        out["store"] = str(resolved["store"])
    return out


def format_text(result: dict[str, Any]) -> str:
    def hours(s: float) -> str:
        return f"{s:.6g} s ({s / 3600:.3g} h)"

    lines = [f"{result['jobs']} jobs on {result['fabric_name']} ({result['gpus']} GPUs): scheduler "
             f"{result['cluster_scheduler']}, placement {result['cluster_placement']}, phases {result['cluster_phases']}; "
             f"contention: {result['contention_model']}",
             f"makespan           {hours(result['makespan_s'])}",
             f"JCT mean / p50 / p99  {result['jct_mean_s']:.6g} / {result['jct_p50_s']:.6g} / {result['jct_p99_s']:.6g} s",
             f"queueing mean      {result['queue_mean_s']:.6g} s",
             f"slowdown mean / p99 / max  {result['slowdown_mean']:.4f} / {result['slowdown_p99']:.4f} / "
             f"{result['slowdown_max']:.4f} ({result['jobs_slowed']} jobs slowed by others)",
             f"set-up mean        {result['setup_mean_s']:.6g} s (circuit reconfiguration)",
             f"GPU utilisation    {result['gpu_utilisation']:.3f} (allocated {result['gpu_alloc_utilisation']:.3f})"]
    if result.get("link_utilisation") is not None:
        lines.append(f"link utilisation   {result['link_utilisation']:.4f}")
    lines.append(f"wall time          {result['wall_s']:.2f} s")
    if "store" in result:
        lines.append(f"stored             {result['cluster_jobs_written']} cluster_jobs rows in {result['store']}")
    return "\n".join(lines)
