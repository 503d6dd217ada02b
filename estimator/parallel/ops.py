"""Where the time goes: the per-op breakdown of a ``parallelism=hybrid`` step (``estimator estimate ... ops=true``).

The step's compute time (``compute_time_s``) is summed by :func:`~estimator.parallel.step.step_time` from the
captured parts of the slowest pipeline rank (:func:`~estimator.parallel.step.compute_terms`): per microbatch each
kind of decoder layer (dense, MoE) times its layers on the rank's stage, the embedding on the first stage, the LM
head and the loss on the last, the recompute in the backward, then the optimizer step. This module lists every
captured op of those parts with the price :func:`~estimator.compute.device.node_prices` gives it -- the same
function :func:`~estimator.compute.device.node_times` and so the step use, on the same scaled workloads
(:func:`~estimator.parallel.step.part_workloads`, with the arguments of
:func:`~estimator.parallel.step.part_args`): no price is computed a second way.

One row per captured op and phase (``forward``, ``backward``, ``recompute``): its name, op class, FLOPs, bytes
moved (the capture's fp32 bytes scaled as priced: 16-bit activations, elementwise fusion), priced seconds, what
bounds it (compute at its efficiency of which peak, memory at its efficiency of HBM bandwidth, or the launch
floor), and how many times per step it runs on the slowest pipeline rank (layers of that kind on the stage x
microbatches; DualPipe: the mean of the rank's two stages). What the step adds to compute without a captured op
is listed apart, with where it is priced: the loss (the framework's loss kernel, :mod:`~estimator.parallel.loss`),
a recompute priced by formula (``recompute=op``, ``recompute_modules``: :mod:`~estimator.parallel.sac`,
:func:`~estimator.parallel.step.module_recompute_cost`), multi-token prediction (its layer counted with its
communication), gradient-accumulation passes, pipeline-boundary copies and the optimizer step. Rows and those
terms add up to ``compute_time_s`` (checked to 1e-9 relative; a mismatch is an error, not a footnote).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from estimator.compute.device import DeviceProfile, node_prices
from estimator.errors import EstimatorError
from estimator.parallel.step import attention_causal_share, part_args, part_workloads

PHASES = ("forward", "backward", "recompute")
TOLERANCE = 1e-9  # relative: the rows are the step's own prices summed in another order


def _bound(p: dict[str, Any], i: int, device: DeviceProfile) -> str:
    """What sets node ``i``'s price (``p``: :func:`node_prices` arrays)."""
    if p["replayed"][i]:
        return "measured duration replayed"
    t = p["time_s"][i] - device.op_overhead_s
    if t <= 0:
        return "no kernel (view)"
    compute, memory, floor = p["compute_s"][i], p["memory_s"][i], p["floor_s"][i]
    if floor >= compute and floor >= memory:
        kernels = round(floor / device.launch_s) if device.launch_s else 1
        return f"launch floor ({kernels} kernel{'s' * (kernels != 1)})"
    if compute >= memory:
        return f"compute {p['compute_efficiency'][i]:.0%} of {p['peak_flops'][i] / 1e12:.0f} TFLOP/s"
    return f"memory {p['memory_efficiency'][i]:.0%} of {device.mem_bw_Bps / 1e12:.2f} TB/s"


def _op_rows(part: str, workload, precision: str, device: DeviceProfile, attention_kernel: str, count: float,
             phases: dict[str, str], causal_share: float = 1.0) -> list[dict[str, Any]]:
    """Rows of ``workload``'s nodes whose phase is a key of ``phases`` (captured phase -> shown phase);
    ``causal_share``: as :func:`~estimator.parallel.step.part_times` prices the attention forward."""
    p = node_prices(workload, device, precision, attention_kernel, causal_share)
    scale = p["memory_s"] * device.mem_bw_Bps * p["memory_efficiency"]  # bytes as priced (precision, fusion)
    rows = []
    for i, node in enumerate(workload.nodes):
        if node.kind != "compute" or node.phase not in phases:
            continue
        seconds = float(p["time_s"][i])
        rows.append({"part": part, "phase": phases[node.phase], "op": node.op, "op_class": node.op_class,
                     "flops": float(node.flops), "bytes": float(scale[i]), "time_s": seconds,
                     "bound": _bound(p, i, device), "count_per_step": count, "step_time_s": seconds * count})
    return rows


def breakdown(setup, terms: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    """The ``ops`` rows, the terms priced outside them and the totals of one step; ``setup``: its
    :class:`~estimator.parallel.estimate.HybridSetup`, ``terms``: what ``step_time(..., parts_out=terms)`` filled."""
    L, fw, device, precision = setup.layout, setup.framework, setup.device, setup.precision
    m, pp, stages = terms["microbatches"], terms["pp"], terms["stages"]
    on_first = sum(w for i, w in stages if i == 0)
    on_last = sum(w for i, w in stages if i == pp - 1)
    rows: list[dict[str, Any]] = []
    outside: list[dict[str, Any]] = []

    def priced_outside(what: str, seconds: float, where: str) -> None:
        if seconds:
            outside.append({"term": what, "step_time_s": seconds, "priced_by": where})

    def workloads(kind) -> dict[str, tuple[Any, str]]:  # the workloads part_times priced, at its precisions
        tp, sp, mbs, _device, prec, cp, _attention, *rest, _causal = part_args(kind, L, fw, device, precision)
        return part_workloads(kind, tp, sp, mbs, prec, cp, *rest)

    multi = len(terms["kinds"]) > 1
    for kind, cost, n in terms["kinds"]:
        per_rank = sum(w * n[i] for i, w in stages)
        count = m * per_rank
        name = "moe_layer" if kind.experts else ("dense_layer" if multi else "layer")
        parts = workloads(kind)
        layer_w, layer_prec = parts["layer"]
        rows += _op_rows(name, layer_w, layer_prec, device, fw.attention_kernel, count,
                         {"forward": "forward", "backward": "backward"}, attention_causal_share(L))
        # the recompute in the backward: the attention part's forward (selective) or the layer's (full) as captured
        # ops; per-op SAC and recompute_modules are priced by formula (step.recompute_cost)
        redo: list[dict[str, Any]] = []
        if cost.rc and L.recompute != "op" and L.recompute_modules is None:
            source = parts["attention"] if L.recompute == "selective" else parts["layer"]
            redo = _op_rows(name, source[0], source[1], device, fw.attention_kernel, count, {"forward": "recompute"},
                            attention_causal_share(L))
            if abs(sum(r["time_s"] for r in redo) - cost.rc) > TOLERANCE * max(cost.rc, 1e-30):
                redo = []
        if redo:
            rows += redo
        elif cost.rc:
            how = ("parallel/sac.py recomputed_gemm_fraction (recompute=op)" if L.recompute == "op"
                   else "step.module_recompute_cost (recompute_modules)")
            what = "+".join(L.recompute_modules) if L.recompute_modules is not None else L.recompute
            priced_outside(f"{name} recompute ({what})", count * cost.rc, how)
    emb_w, emb_prec = workloads(terms["kinds"][0][0])["embedding"]
    head_w, head_prec = workloads(terms["kinds"][-1][0])["head"]
    both = {"forward": "forward", "backward": "backward"}
    rows += _op_rows("embedding", emb_w, emb_prec, device, fw.attention_kernel, m * on_first, both)
    rows += _op_rows("head", head_w, head_prec, device, fw.attention_kernel, m * on_last, both)
    loss_f, loss_b = terms["loss"]
    rate = device.memory_rate("softmax", precision)
    for phase, seconds in (("forward", loss_f), ("backward", loss_b)):
        if seconds:
            rows.append({"part": "loss", "phase": phase, "op": f"loss:{fw.loss_kernel}", "op_class": "loss",
                         "flops": 0.0, "bytes": seconds * rate, "time_s": seconds,
                         "bound": f"memory (loss kernel {fw.loss_kernel}, parallel/loss.py; softmax rate "
                                  f"{rate / 1e12:.2f} TB/s)",
                         "count_per_step": m * on_last, "step_time_s": seconds * m * on_last})
    mtp_f, mtp_b = terms["mtp"]
    priced_outside("multi-token prediction (its layer with its TP/EP communication, embedding, head, loss)",
                   m * on_last * (mtp_f + mtp_b), "step.step_time (mtp_f, mtp_b)")
    priced_outside("gradient accumulation / norm-rerun passes in the backward", m * terms["accum"],
                   "step.step_time (framework.*_grad_accum_bytes, grad_add_bytes, norm_rerun_bytes)")
    priced_outside("pipeline-boundary copies", m * sum(terms["copies"]),
                   "step.step_time (p2p_partitioned_tensor, p2p_gather_on_receive)")
    priced_outside("optimizer step", terms["optimizer"], "step.step_time (ADAM_STEP_BYTES / framework step bytes "
                   "over the device's optimizer memory rate)")
    return {"ops": rows, "ops_outside": outside, "ops_totals": _totals(rows, outside, terms, metrics)}


def _totals(rows: list[dict[str, Any]], outside: list[dict[str, Any]], terms: dict[str, Any],
            metrics: dict[str, Any]) -> dict[str, Any]:
    by_class: dict[str, float] = defaultdict(float)
    by_part: dict[str, float] = defaultdict(float)
    by_phase: dict[str, float] = defaultdict(float)
    for r in rows:
        by_class[r["op_class"]] += r["step_time_s"]
        by_part[r["part"]] += r["step_time_s"]
        by_phase[r["phase"]] += r["step_time_s"]
    in_rows = sum(r["step_time_s"] for r in rows)
    out = sum(o["step_time_s"] for o in outside)
    compute = metrics["compute_time_s"]
    if abs(terms["compute"] - compute) > TOLERANCE * compute or abs(in_rows + out - compute) > TOLERANCE * compute:
        raise EstimatorError(f"ops=true: the op rows ({in_rows:.9g} s) and the terms priced outside them ({out:.9g} s) "
                             f"do not add up to compute_time_s {compute:.9g} s (a bug: please report it)")
    return {"rows_s": in_rows, "outside_s": out, "compute_time_s": compute, "check": "ok",
            "slowest_stage": terms["slowest_stage"], "microbatches": terms["microbatches"],
            "by_op_class": dict(sorted(by_class.items(), key=lambda kv: -kv[1])),
            "by_part": dict(by_part), "by_phase": {p: by_phase[p] for p in PHASES if p in by_phase}}


def format_ops(result: dict[str, Any]) -> str:
    """The text table of :func:`breakdown`'s rows, totals and outside terms."""
    rows, outside, tot = result["ops"], result["ops_outside"], result["ops_totals"]
    lines = ["", f"where the compute time goes: slowest pipeline stage {tot['slowest_stage']}, "
                 f"{tot['microbatches']} microbatches (per-op prices: estimator/compute/device.py node_prices)",
             f"{'part':<12}{'phase':<10}{'op':<36}{'class':<12}{'GFLOP':>10}{'MB':>10}{'us':>10}{'x/step':>8}"
             f"{'ms/step':>10}  bound"]
    views = sum(1 for r in rows if not r["time_s"])
    for r in rows:
        count = r["count_per_step"]
        if not r["time_s"]:  # a view: no kernel (in the JSON rows)
            continue
        lines.append(f"{r['part']:<12}{r['phase']:<10}{r['op'][:35]:<36}{r['op_class'][:11]:<12}"
                     f"{r['flops'] / 1e9:>10.3f}{r['bytes'] / 1e6:>10.2f}{r['time_s'] * 1e6:>10.1f}{count:>8.4g}"
                     f"{r['step_time_s'] * 1e3:>10.3f}  {r['bound']}")
    if views:
        lines.append(f"({views} rows of views that launch no kernel not shown; output=json lists every op. x/step 0: "
                     "the part runs on another pipeline stage)")
    compute = tot["compute_time_s"]

    def share(x: float) -> str:
        return f"{x * 1e3:>10.3f} ms {x / compute:>6.1%}"

    lines += ["", "by op class (per step)"] + [f"  {k:<22}{share(v)}" for k, v in tot["by_op_class"].items()]
    lines += ["by part (per step)"] + [f"  {k:<22}{share(v)}" for k, v in tot["by_part"].items()]
    lines += ["by phase (per step)"] + [f"  {k:<22}{share(v)}" for k, v in tot["by_phase"].items()]
    if outside:
        lines += ["priced outside the op rows (per step)"]
        lines += [f"  {o['term'][:60]:<60}{share(o['step_time_s'])}  ({o['priced_by']})" for o in outside]
    lines.append(f"op rows {tot['rows_s'] * 1e3:.3f} ms + outside {tot['outside_s'] * 1e3:.3f} ms = compute_time_s "
                 f"{compute * 1e3:.3f} ms ({tot['check']})")
    return "\n".join(lines)
