"""Price one collective on a fabric, print its schedule, or a bus-bandwidth curve.

  estimator collective fabric=ideal fabric.nodes=64 collective=all_reduce algorithm=ring bytes=67108864
  estimator collective fabric=nvlink_leafspine algorithm=auto output=json
  estimator collective fabric=torus2d collective=all_to_all explicit=true show_schedule=true bytes=1e6
  estimator collective fabric=ring fabric.nodes=64 'sizes=[1e3,1e6,64e6]'

Keys: collective, algorithm (a name, ``default`` or ``auto``), bytes (per-rank buffer, nccl-tests
convention), group_size (default all fabric.nodes), explicit (price the explicit schedule on the
topology instead of the closed form), show_schedule (a per-step table: transfers, bytes and the first
transfers of each step, a run of identical steps on one row, e.g. ``1..1022``; every transfer inline
only up to 10,000, and in a JSON file with ``schedule_out=FILE``: each run once, with its ``repeat``
count), sizes (list of byte sizes: one row per size
with time, algbw = bytes/time and busbw = algbw x the nccl-tests factor, e.g. 2(n-1)/n for
all-reduce); busbw_plot (with sizes: also write the curve as a figure, .png/.svg/.pdf). Fabrics
that model NCCL (``nvlink_leafspine``, ``system=dgx_*``) also report the NCCL protocol
(``protocol``: ll, ll128, simple; the curve prints ``algorithm/protocol``).

  estimator collective system=dgx_h100 fabric.nodes=8 algorithm=auto 'sizes=[1048576,1073741824]'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from estimator.collectives.algorithms import collective_name
from estimator.collectives.busbw import cost_row, curve, plot_curves
from estimator.collectives.schedule import Step
from estimator.config import to_container
from estimator.errors import EstimatorError
from estimator.fabrics.registry import make_fabric
from estimator.files import write_atomic

EXAMPLES = 4  # transfers shown per step
MAX_INLINE_TRANSFERS = 10_000  # beyond this, show_schedule lists steps only (schedule_out= for all)

HELP = "price a collective (any algorithm x fabric x size), its schedule, or a busbw curve"


def _number(value: Any, name: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise EstimatorError(f"{name} must be a number of bytes, got {value!r}") from None
    if not (out >= 0) or out == float("inf"):
        raise EstimatorError(f"{name} must be a non-negative finite number of bytes, got {value!r}")
    return out


def check(cfg: DictConfig) -> None:
    """``--check``: the fabric, the collective and algorithm it offers, the sizes; nothing priced."""
    tree = to_container(cfg)
    fabric = make_fabric(tree.get("fabric") or {})
    coll = collective_name(tree.get("collective") or "all_reduce")
    algorithm = str(tree.get("algorithm") or "default")
    resolve = getattr(fabric, "resolve", None)  # the collective library's fabrics: a name it offers
    if algorithm not in ("default", "auto") and resolve is not None:
        resolve(coll, algorithm, fabric.nodes)
    sizes = tree.get("sizes")
    for s in sizes if isinstance(sizes, list) else [tree.get("bytes")]:
        _number(s, "sizes[]" if sizes is not None else "bytes")


def run(cfg: DictConfig) -> dict[str, Any]:
    tree = to_container(cfg)
    fabric = make_fabric(tree.get("fabric") or {})
    coll = collective_name(tree.get("collective") or "all_reduce")
    algorithm = str(tree.get("algorithm") or "default")
    n = tree.get("group_size")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
        raise EstimatorError(f"group_size must be an integer, got {n!r}")
    explicit = bool(tree.get("explicit"))
    head = {"fabric": fabric.name, "collective": coll, "nodes": fabric.nodes if n is None else n}
    sizes = tree.get("sizes")
    if sizes is not None:
        if not isinstance(sizes, list) or not sizes:
            raise EstimatorError(f"sizes must be a non-empty list of byte sizes, got {sizes!r}")
        rows = curve(fabric, coll, [_number(s, "sizes[]") for s in sizes], algorithm, n, explicit)
        out = {**head, "algorithm": algorithm, "curve": rows}
        if tree.get("busbw_plot"):
            label = f"{fabric.name} {algorithm}"
            out["figure"] = str(plot_curves({label: rows}, tree["busbw_plot"], f"{coll}, n={head['nodes']}"))
        return out
    nbytes = _number(tree.get("bytes"), "bytes")
    out = {**head, **cost_row(fabric, coll, nbytes, algorithm, n, explicit), "explicit": explicit,
           "offered": ",".join(fabric.algorithms(coll))}
    if tree.get("show_schedule"):
        if not callable(getattr(fabric, "schedule", None)):
            raise EstimatorError(f"fabric {fabric.name!r} has no explicit schedules")
        group = fabric.nodes if n is None else n
        sched = fabric.schedule(coll, out["algorithm"], group, nbytes)
        runs = _runs(sched.steps)
        out["schedule_steps"] = [
            {"step": i, "repeat": r, "reconfigure": st.reconfigure, "transfers": len(st.transfers),
             "bytes": _bytes(st), "example": [[t.src, t.dst, t.nbytes, t.reduce_bytes] for t in st.transfers[:EXAMPLES]]}
            for i, r, st in runs
        ]
        total = sum(s["transfers"] * s["repeat"] for s in out["schedule_steps"])
        if tree.get("schedule_out"):
            target = Path(str(tree["schedule_out"]))
            full = [{"step": i, "repeat": r, "reconfigure": st.reconfigure,
                     "transfers": [[t.src, t.dst, t.nbytes, t.reduce_bytes] for t in st.transfers]} for i, r, st in runs]
            try:
                out["schedule_file"] = str(write_atomic(target, json.dumps(full)))
            except OSError as exc:
                raise EstimatorError(f"schedule_out={target}: cannot write ({exc.strerror})") from None
        if total <= MAX_INLINE_TRANSFERS:  # every transfer inline only while it stays readable
            out["schedule"] = [{"step": i, "reconfigure": st.reconfigure,
                                "transfers": [[t.src, t.dst, t.nbytes, t.reduce_bytes] for t in st.transfers]}
                               for i, st in enumerate(sched.steps)]
    return out


def _runs(steps: tuple[Step, ...]) -> list[tuple[int, int, Step]]:
    """(first step, how many, step) per run of repeated steps: generators emit a repeated step as
    the same object (a ring's n-1 steps), so a 65,536-rank ring is two rows, not 131,070."""
    out: list[tuple[int, int, Step]] = []
    for i, st in enumerate(steps):
        if out and out[-1][2] is st:
            out[-1] = (out[-1][0], out[-1][1] + 1, st)
        else:
            out.append((i, 1, st))
    return out


def _bytes(step: Step) -> float:
    return sum(t.nbytes for t in step.transfers)


def format_text(result: dict[str, Any]) -> str:
    if "curve" in result:
        lines = [f"# {result['fabric']} {result['collective']} n={result['nodes']} algorithm={result['algorithm']}"
                 + (f" figure={result['figure']}" if "figure" in result else ""),
                 f"{'bytes':>14} {'time_us':>12} {'algbw_GB/s':>11} {'busbw_GB/s':>11}  algorithm"]
        for r in result["curve"]:
            proto = f"/{r['protocol']}" if r.get("protocol") else ""
            lines.append(f"{r['bytes']:>14.0f} {r['time_s'] * 1e6:>12.3f} {r['algbw_Bps'] / 1e9:>11.3f} "
                         f"{r['busbw_Bps'] / 1e9:>11.3f}  {r['algorithm']}{proto}")
        return "\n".join(lines)
    keys = [k for k in result if k not in ("schedule", "schedule_steps")]
    width = max(len(k) for k in keys)
    lines = [f"{k:<{width}}  {result[k]:.6g}" if isinstance(result[k], float) else f"{k:<{width}}  {result[k]}"
             for k in keys]
    steps = result.get("schedule_steps", [])
    if steps:
        lines.append(f"{'step(s)':>12} {'reconf':>6} {'transfers':>10} {'bytes':>14}  first transfers (src->dst:bytes, +r = reduced)")
    for st in steps:
        pairs = " ".join(f"{s}->{d}:{b:.6g}{'(+r)' if r else ''}" for s, d, b, r in st["example"])
        more = " ..." if st["transfers"] > len(st["example"]) else ""
        label = str(st["step"]) if st.get("repeat", 1) == 1 else f"{st['step']}..{st['step'] + st['repeat'] - 1}"
        lines.append(f"{label:>12} {'yes' if st['reconfigure'] else '-':>6} {st['transfers']:>10} "
                     f"{st['bytes']:>14.6g}  {pairs}{more}")
    return "\n".join(lines)
