"""Summarise a workload: parameters, FLOPs, gradient and communication volume, op breakdown.

    estimator inspect model=resnet50 [output=json]
    estimator inspect workload=traces/some.workload.json [output=json]

Without ``workload=``, reads ``${traces_dir}/<model>.workload.json`` and captures the model first
when that trace does not exist yet (a note goes to stderr). ``comm_bytes`` is the communication
volume of one iteration: for a single-replica capture (data parallel) the all-reduce volume, i.e.
the gradient bytes; for a graph that carries collective / p2p nodes (e.g. imported multi-device
task graphs) the sum of their bytes. ``forward_flops`` is per sample.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any

from omegaconf import DictConfig

from estimator.workloads.capture import ensure_workload
from estimator.workloads.graph import Workload

HELP = "summarise a workload: params, FLOPs per sample, gradient/comm bytes, ops by phase and class"


def _note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def breakdown(workload: Workload, key: str) -> dict[str, dict[str, Any]]:
    """Per value of node attribute ``key`` (phase, op_class, kind): ops, FLOPs, bytes, time."""
    rows: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"ops": 0, "flops": 0.0, "mem_bytes": 0.0, "duration_s": 0.0}
    )
    for n in workload.nodes:
        row = rows[getattr(n, key) or "none"]
        row["ops"] += 1
        row["flops"] += n.flops
        row["mem_bytes"] += n.mem_bytes + n.comm_bytes
        row["duration_s"] += n.duration_s or 0.0
    return dict(sorted(rows.items()))


def summarise(workload: Workload) -> dict[str, Any]:
    comm_nodes = [n for n in workload.nodes if n.kind != "compute"]
    forward = workload.forward_flops or sum(n.flops for n in workload.nodes if n.phase == "forward")
    durations = [n.duration_s for n in workload.compute_nodes() if n.duration_s is not None]
    return {
        "name": workload.name,
        "source": workload.source,
        "devices": workload.devices,
        "batch_size": workload.batch_size,
        "params": workload.params,
        "forward_flops": forward / workload.batch_size,
        "flops": sum(n.flops for n in workload.nodes),
        "gradients": len(workload.gradients),
        "gradient_bytes": workload.gradient_bytes,
        "ops": len(workload.compute_nodes()),
        "nodes": len(workload.nodes),
        "comm_bytes": workload.comm_bytes() if comm_nodes else float(workload.gradient_bytes),
        "comm_basis": "collective+p2p nodes" if comm_nodes else "data-parallel all-reduce of gradients",
        "measured_compute_s": sum(durations) if durations else None,
        "by_phase": breakdown(workload, "phase"),
        "by_op_class": breakdown(workload, "op_class"),
        "by_kind": breakdown(workload, "kind"),
    }


def run(cfg: DictConfig) -> dict[str, Any]:
    workload, path = ensure_workload(cfg, announce=_note)
    return {**summarise(workload), "path": str(path)}


def _table(title: str, rows: dict[str, dict[str, Any]]) -> list[str]:
    lines = [f"{title:<14} {'ops':>7} {'GFLOP':>12} {'MB moved':>12} {'time ms':>10}"]
    for name, r in rows.items():
        lines.append(
            f"  {name:<12} {r['ops']:>7} {r['flops'] / 1e9:>12.4f} {r['mem_bytes'] / 1e6:>12.3f} "
            f"{r['duration_s'] * 1e3:>10.3f}"
        )
    return lines


def format_text(r: dict[str, Any]) -> str:
    measured = "n/a" if r["measured_compute_s"] is None else f"{r['measured_compute_s'] * 1e3:.3f} ms"
    lines = [
        f"workload        {r['name']}  ({r['source'] or 'unknown source'}; {r['path']})",
        f"devices         {r['devices']}   batch {r['batch_size']}",
        f"parameters      {r['params']:,}",
        f"forward FLOPs   {r['forward_flops'] / 1e9:.4f} G per sample",
        f"gradients       {r['gradients']} tensors, {r['gradient_bytes']:,} bytes",
        f"comm bytes      {r['comm_bytes']:,.0f} per iteration ({r['comm_basis']})",
        f"ops             {r['ops']} compute of {r['nodes']} nodes; measured compute {measured}",
        "",
        *_table("phase", r["by_phase"]),
        "",
        *_table("op class", r["by_op_class"]),
    ]
    if len(r["by_kind"]) > 1:  # graphs with communication nodes
        lines += ["", *_table("node kind", r["by_kind"])]
    return "\n".join(lines)
