"""Step time of a hybrid-parallel layout: per-rank compute from the layer capture, Megatron-LM
communication priced where each group sits, 1F1B pipeline.

Model (each line is an assumption; sources in the module docstrings of ``layer``/``layout``):

* Per microbatch and stage: ``layers / pp`` captured layers forward and backward, plus the
  embedding (first stage) or the LM head and loss (last stage) — the slower stage sets the
  pace; with ``pp = 1`` one rank runs both. Recompute adds one more forward of each layer
  (``full``) or of its core attention (``selective``) to the backward.
* Tensor parallelism (Megatron-LM, Shoeybi et al. 2019 Sec. 3): per layer 2 all-reduces of the
  ``s x b x h`` activations in forward and 2 in backward (and 2 more when full recompute reruns
  the forward), 1 in the embedding's forward; with sequence parallelism each all-reduce becomes
  a reduce-scatter + all-gather pair of the same buffer (Korthikanti et al. 2022 Sec. 4.2.2).
  TP communication is not overlapped with compute (Megatron-LM 2021 runs it synchronously).
* Pipeline (Narayanan et al. 2021 Sec. 2.2, non-interleaved 1F1B): step = (m + pp - 1) x
  (t_fwd + t_bwd + 2 t_p2p) — the bubble is (pp - 1) of those slots, i.e. (pp - 1)/m of the
  work; each boundary sends ``s x b x h / tp`` 16-bit values per microbatch each way (the
  scatter/gather optimisation, Sec. 4.1), all boundaries at once. Interleaved 1F1B with ``v``
  virtual stages (Sec. 2.2.2): the bubble shrinks to (pp - 1)/v slots and each rank sends ``v``
  times as many activations, so step = (m + (pp - 1)/v) x (t_fwd + t_bwd + 2 v t_p2p).
* Expert parallelism (MoE models, ``ep`` > 1; Megatron-core MoE): each MoE layer sends its
  tokens to their top-k experts and back — an all-to-all of ``s x b x k x h / tp`` 16-bit values
  per rank over the ``ep`` group (ep consecutive ranks of a DP group; tokens split over the TP
  ranks as sequence parallelism, which Megatron-core requires for MoE with tp > 1) for dispatch
  and one for combine, in forward, in backward and again in a full recompute; not overlapped.
  Expert gradients are reduced over the ``dp / ep`` ranks holding the same experts, after the
  dense gradients over ``dp``.
* Data parallelism: fp16/bf16 gradients of the rank's stage (``zero`` 0: one all-reduce; 1 and 2:
  reduce-scatter of gradients + all-gather of updated weights after the step; 3: in addition
  the weights of every layer are all-gathered before its forward and backward, prefetched one
  layer ahead so only what exceeds a layer's compute is exposed). With ``dp_overlap`` the
  gradient reduction overlaps the last microbatch's backward (Megatron-core
  ``--overlap-grad-reduce``); without it (Megatron-LM 2021) it follows the pipeline flush.
* Optimizer: fused Adam streams 32 bytes per (unsharded) parameter through HBM (fp32 master,
  momentum and variance read and written, fp16 gradient read, fp16 weight written).
* Circuits (fabrics whose groups get their own circuits, the OCS): the step pays the
  reconfigurations of its circuit plan (:mod:`~estimator.parallel.circuits`), exposed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from estimator.compute.device import DeviceProfile, node_times
from estimator.fabrics.base import Fabric
from estimator.parallel.circuits import plan
from estimator.parallel.layer import capture_parts
from estimator.parallel.layout import Layout, memory, stage_param_split
from estimator.parallel.placement import group_cost, p2p_cost, p2p_pricing, strides
from estimator.parallel.spec import TransformerSpec

ACT_BYTES = 2  # 16-bit activations on the wire
ADAM_STEP_BYTES = 32  # per parameter, see the module docstring


@dataclass(frozen=True)
class PartTimes:
    fwd: float
    bwd: float
    fwd_flops: float
    bwd_flops: float


@lru_cache(maxsize=1024)
def part_times(spec: TransformerSpec, tp: int, sp: bool, mbs: int, device: DeviceProfile, precision: str) -> dict[str, PartTimes]:
    out = {}
    for name, w in capture_parts(spec, tp, sp).items():
        scaled = w.scaled_to_batch(mbs)
        t = node_times(scaled, device, precision)
        phase = np.array([n.phase for n in scaled.nodes])
        flops = np.array([n.flops for n in scaled.nodes])
        fw, bw = phase == "forward", phase == "backward"
        out[name] = PartTimes(float(t[fw].sum()), float(t[bw].sum()), float(flops[fw].sum()), float(flops[bw].sum()))
    return out


def step_time(spec: TransformerSpec, layout: Layout, fabric: Fabric, device: DeviceProfile, precision: str,
              algorithm: str = "default", dp_overlap: bool = True) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metrics, collectives) of one training step."""
    L = layout
    parts = part_times(spec, L.tp, L.sequence_parallel, L.micro_batch_size, device, precision)
    layer, attn, emb, head = parts["layer"], parts["attention"], parts["embedding"], parts["head"]
    stride = strides(L.order, L.tp, L.dp, L.pp)
    stride.update(ep=stride["dp"], edp=stride["dp"] * L.ep)  # an EP group: ep consecutive ranks of a DP group
    colls: list[dict[str, Any]] = []

    def price(group: str, collective: str, nbytes: float, size: int, count: float) -> float:
        t, algo, how = group_cost(fabric, collective, nbytes, size, stride[group] if group in stride else 1, algorithm)
        if size > 1 and nbytes > 0:
            colls.append({"idx": len(colls), "group": group, "collective": collective, "algorithm": algo, "bytes": float(nbytes),
                          "group_size": size, "stride": stride.get(group, 1), "count_per_step": count, "pricing": how,
                          "time_s": t, "ready_s": 0.0, "start_s": 0.0})
        return t

    m, lps = L.microbatches, spec.layers // L.pp
    act = spec.seq_len * L.micro_batch_size * spec.hidden * ACT_BYTES
    # ---- tensor-parallel communication per layer and microbatch
    if L.sequence_parallel:
        one = price("tp", "reduce_scatter", act, L.tp, 0) + price("tp", "all_gather", act, L.tp, 0)
    else:
        one = price("tp", "all_reduce", act, L.tp, 0)
    n_rc = 2 if L.recompute == "full" else 0
    tp_f, tp_b = 2 * one, (2 + n_rc) * one
    tp_emb = price("tp", "all_reduce", act, L.tp, m)
    for c in colls:  # the per-layer TP collectives, recorded once with their count per step
        if c["count_per_step"] == 0:
            c["count_per_step"] = m * lps * (4 + n_rc)
    # ---- expert parallelism: dispatch + combine all-to-all of each MoE layer, in forward and backward
    ep_one = 0.0
    if spec.experts and L.ep > 1:
        a2a = spec.seq_len * L.micro_batch_size * spec.top_k * spec.hidden * ACT_BYTES / L.tp
        ep_one = price("ep", "all_to_all", a2a, L.ep, m * lps * (4 + n_rc))
    tp_f, tp_b = tp_f + 2 * ep_one, tp_b + (2 + n_rc) * ep_one
    rc = {"none": 0.0, "selective": attn.fwd, "full": layer.fwd}[L.recompute]
    rc_flops = {"none": 0.0, "selective": attn.fwd_flops, "full": layer.fwd_flops}[L.recompute]
    first = (emb.fwd + tp_emb, emb.bwd)
    last = (head.fwd, head.bwd)
    ends_f = first[0] + last[0] if L.pp == 1 else max(first[0], last[0])
    ends_b = first[1] + last[1] if L.pp == 1 else max(first[1], last[1])
    comp_ends_f = emb.fwd + head.fwd if L.pp == 1 else max(emb.fwd, head.fwd)
    comp_f, comp_b = lps * layer.fwd + comp_ends_f, lps * (layer.bwd + rc) + ends_b
    t_f = lps * (layer.fwd + tp_f) + ends_f
    t_b = lps * (layer.bwd + rc + tp_b) + ends_b
    # ---- pipeline
    t_p2p = 0.0
    if L.pp > 1:
        t_p2p = p2p_cost(fabric, act / L.tp, stride["pp"], L.pp)
        colls.append({"idx": len(colls), "group": "pp", "collective": "p2p", "algorithm": "direct", "bytes": act / L.tp,
                      "group_size": 2, "stride": stride["pp"], "count_per_step": 2 * m * L.virtual_stages, "time_s": t_p2p,
                      "pricing": p2p_pricing(fabric), "ready_s": 0.0, "start_s": 0.0})
    v = L.virtual_stages
    slot = t_f + t_b + 2 * v * t_p2p
    slots = m + (L.pp - 1) / v
    pipeline = slots * slot
    bubble = (L.pp - 1) / v * slot
    # ---- data parallel / ZeRO
    dense, expert = stage_param_split(spec, L)
    n_local = dense + expert
    edp = L.dp // L.ep  # data-parallel copies of an expert
    grads = [("dp", n_local * 2, L.dp)] if L.ep == 1 else [("dp", dense * 2, L.dp), ("edp", expert * 2, edp)]
    t_grad = t_after = 0.0
    for group, nbytes, size in grads:  # the two groups' reductions one after the other (Megatron-core)
        if L.zero == 0:
            t_grad += price(group, "all_reduce", nbytes, size, 1)
        else:
            t_grad += price(group, "reduce_scatter", nbytes, size, 1)
            t_after += price(group, "all_gather", nbytes, size, 1)  # updated 16-bit weights
    zero3 = 0.0
    if L.zero == 3 and L.dp > 1:
        layer_w = (spec.layer_params() - spec.expert_layer_params() + spec.expert_layer_params() // L.ep) // L.tp * 2
        ag = price("dp", "all_gather", layer_w, L.dp, m * lps * (2 + (1 if L.recompute == "full" else 0)))
        zero3 = m * lps * (max(0.0, ag - layer.fwd) + max(0.0, ag - layer.bwd))
    window = (layer.bwd + tp_b) * lps if dp_overlap else 0.0
    dp_exposed = max(0.0, t_grad - window) + t_after
    opt_params = dense / L.dp + expert / edp if L.zero >= 1 else n_local
    optimizer = opt_params * ADAM_STEP_BYTES / (device.mem_bw_Bps * device.efficiency("memory_efficiency", "optimizer", precision))
    # ---- circuits: dimension -> (group size, phases per step), see estimator/parallel/circuits.py
    counts = {g: sum(c["count_per_step"] for c in colls if c["group"] == g) for g in ("tp", "ep")}
    z3_gathers = m * lps * (2 + (1 if L.recompute == "full" else 0)) if L.zero == 3 else 0
    circuits = plan(fabric, {"tp": (L.tp, counts["tp"]), "ep": (L.ep, counts["ep"] / 2),
                             "pp": (L.pp, 2 * m * L.virtual_stages), "dp": (L.dp, 1 + z3_gathers), "edp": (edp, 1 if L.ep > 1 else 0)})
    total = pipeline + dp_exposed + zero3 + optimizer + circuits.reconfig_s
    # ---- accounting
    compute = m * (comp_f + comp_b) + optimizer
    ep_comm = m * lps * (4 + n_rc) * ep_one
    tp_comm = m * (lps * (tp_f + tp_b) + tp_emb) - ep_comm
    p2p = slots * 2 * v * t_p2p
    exposed = tp_comm + ep_comm + p2p + dp_exposed + zero3 + circuits.reconfig_s
    gb = L.global_batch
    model_flops = gb * L.tp * (spec.layers * (layer.fwd_flops + layer.bwd_flops) + emb.fwd_flops + emb.bwd_flops
                               + head.fwd_flops + head.bwd_flops) / L.micro_batch_size
    hw_flops = model_flops + gb * L.tp * spec.layers * rc_flops / L.micro_batch_size
    peak = device.tensor_peak(precision)
    mem = memory(spec, L)
    metrics = {
        "layout": L.label(), "tp": L.tp, "pp": L.pp, "dp": L.dp, "ep": L.ep, "zero": L.zero,
        "micro_batch_size": L.micro_batch_size, "microbatches": m, "global_batch": gb,
        "sequence_parallel": L.sequence_parallel, "recompute": L.recompute, "placement_order": L.order,
        "virtual_stages": L.virtual_stages,
        "iter_time_s": total, "compute_time_s": compute, "exposed_comm_time_s": exposed,
        "exposed_comm_share": exposed / total, "bubble_time_s": bubble, "tp_comm_time_s": tp_comm,
        "pp_p2p_time_s": p2p, "dp_comm_time_s": t_grad + t_after, "dp_exposed_time_s": dp_exposed,
        "zero3_exposed_time_s": zero3, "optimizer_s": optimizer,
        "forward_s": m * comp_f, "backward_s": m * comp_b, "comm_time_s": tp_comm + ep_comm + p2p + t_grad + t_after + zero3,
        "ep_comm_time_s": ep_comm, "reconfig_time_s": circuits.reconfig_s,
        "circuit_reconfigs_per_step": circuits.reconfigs_per_step, "circuit_plan": circuits.label(),
        "tokens_per_s": gb * spec.seq_len / total, "samples_per_s": gb / total,
        "model_flops_per_step": model_flops, "mfu": model_flops / (total * L.gpus * peak),
        "tflops_per_gpu": hw_flops / total / L.gpus / 1e12,
        "params": spec.params(),
        **{f"memory_{k}_bytes": v for k, v in mem.items()},
    }
    return metrics, colls
