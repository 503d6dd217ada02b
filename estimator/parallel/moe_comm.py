"""Megatron-core's expert-parallel token exchange as its recent releases run it: the token dispatcher's backend
(``framework.moe_dispatcher``) and the all-to-all overlap of the combined 1F1B schedule
(``framework.moe_a2a_overlap``). Sources (commits in conf/framework/megatron.yaml): Megatron-LM
megatron/core/transformer/moe/token_dispatcher.py and fused_a2a.py, transformer_config.py,
models/common/model_chunk_schedule_plan.py, pipeline_parallel/schedules.py and combined_1f1b.py;
deepseek-ai/DeepEP's README and legacy tests; NVIDIA-NeMo/Megatron-Bridge scripts/performance.

Dispatcher: one dispatch costs what one combine does (the same rows back), in forward, backward and a recompute.

* ``alltoall`` (``moe_token_dispatcher_type="alltoall"``): each rank permutes its ``T`` tokens into ``k T`` rows,
  one per selected expert, and exchanges them in one NCCL all-to-all over the ``ep`` group (``k T h`` 16-bit
  values per rank, a token bound for two experts of one rank sent twice); a rank holding several experts then
  regroups the received rows by expert (``moe_sort_chunks``, in the captured layer).
* ``deepep`` (``flex`` with DeepEP's normal kernels, ``_DeepepManager``): ``fused_dispatch`` takes each token with
  its top-k indices and sends it once to every rank holding one of its experts; across nodes once over RDMA per
  (token, node) to the GPU of the same local index (the rail), which forwards it over NVLink to the node's ranks
  that need it (DeepEP's internode kernels; its tests count RDMA traffic per (token, node):
  tests/test_internode.py ``num_rdma_token_sent``). The receiving rank's permute then copies each token to its local
  experts, grouped by expert, so the alltoall dispatcher's chunk sort is skipped (the layer is captured without
  ``moe_sort_chunks``); the permute (after the dispatch) and unpermute (before the combine) stay at the captured
  bytes (the permute reads the received rows instead of the ``T`` own ones: not modelled). Megatron passes the
  BF16 hidden states (``fused_a2a.py``: no FP8 dispatch; HybridEP asserts ``not fp8_dispatch``): 2 bytes.
  Under uniform top-k routing over ``E`` experts on ``n`` equal groups of ``E / n`` (nodes or ranks), a token
  reaches a given group with probability ``1 - C(E - E/n, k) / C(E, k)`` and ``n`` times that groups on average
  (:func:`groups_reached`). Per rank, a dispatch is an all-to-all of ``T h x nodes reached`` over the group's
  ``N`` nodes on its rail and one of ``T h x ranks reached`` over its ``r`` ranks in a node (``N r = ep``); DeepEP
  pipelines the two (RDMA senders, NVLink forwarders and receivers run at once on chunks), so it takes the
  slower. With ``ep`` inside one node: only the NVLink exchange, still once per (token, rank).
* ``hybridep`` (``_HybridEPManager``, the DeepEP ``hybrid-ep`` branch by NVIDIA): the same hierarchical path
  (docs/README_Hybrid-EP.md: RDMA between nodes, NVLink TMA copies inside; fewer SMs), BF16 like ``deepep``;
  what tells it apart in Megatron -- the SM counts, MNNVL domains -- is not priced, so it is the same mechanism as
  ``deepep`` here, with two exceptions. ``framework.moe_permute_fusion_into_hybridep`` (Megatron-core's
  ``moe_permute_fusion_into_hybridep``, off by default) folds HybridEP's standalone permute kernel into its dispatch
  kernel and its unpermute into its combine kernel, so the captured layer drops those two copies (forward and
  backward; ``layer.capture_parts``' ``hybridep``, sources in conf/framework/megatron.yaml); the dispatch
  and combine keep their price. And on a device that states HybridEP's measured rail rates
  (``device.hybridep_rail_Bps``, H100's from DeepEP's hybrid-ep README table: 2 nodes 71.7 / 63.0 GB/s dispatch /
  combine "IB bandwidth" where the NCCL price of the same bytes is 93), the rail exchange is never faster than them
  (:func:`hybridep_rail_rates`, :func:`dispatch_time`; docs/research/h103-qwen3-breakdown.md).

Overlap (``moe_a2a_overlap``: ``overlap_moe_expert_parallel_comm`` with ``delay_wgrad_compute``, as
Megatron-Bridge's ``moe_a2a_overlap`` sets them; ``framework.moe_a2a_delay_wgrad=false``: without the delayed weight
gradients, so the dispatch's backward waits for the experts' whole backward): in the 1F1B steady state the forward of one microbatch and the
backward of another run merged, layer by layer, on a compute and a communication stream
(``TransformerLayerSchedulePlan.run``): combine-backward behind the forward's pre-dispatch part (attention,
norms, router); dispatch-forward behind the experts' backward (data gradients), dispatch-backward behind their
delayed weight gradients and the experts' forward; combine-forward behind the backward's pre-dispatch part;
each waits for what it depends on (:func:`merged_exposure`). The first ``w`` forwards and last ``w`` backwards
of a rank run alone (``w = 1`` without a pipeline; with virtual stages Megatron's warm-up plus the one extra
forward it schedules, ``2 (pp - 1) + (v - 1) G + 1`` on the first stage, ``G`` microbatches per group), their
all-to-alls exposed whole (:func:`merged_fraction`). Refused as Megatron-core refuses it (:func:`check`).

SMs (``framework.moe_dispatcher_sms``): DeepEP's and HybridEP's kernels hold SMs for as long as they run; behind
compute (``moe_a2a_overlap``) the layer's kernels run on the rest, so each second of hidden flex dispatch costs
``sms / device.sm_count`` of a second of compute (:func:`sm_share`; the GEMMs' time taken as proportional to the SMs
they get, as wave-filling kernels run). Defaults (:data:`DISPATCHER_SMS`): DeepEP 20 (token_dispatcher.py
l.1287-1290: ``moe_flex_dispatcher_num_sms`` None -> 20); HybridEP 32, what Megatron-Bridge's performance scripts
set (NVIDIA-NeMo/Megatron-Bridge@067f987d scripts/performance/utils/overrides.py l.86-89, whose comment says the
number "needs to be adjusted when overlapping HybridEP with computation"); Megatron-core leaves HybridEP's own
default, which is not read here. The NCCL all-to-all (``alltoall``: ``all_to_all_single``, one ncclSend / ncclRecv
per peer in one group) runs one CTA per p2p channel it touches, on SMs it does not share (NVIDIA/nccl#689): hidden
behind compute it costs ``ctas / device.sm_count`` of the hidden time, ``ctas`` from NCCL's own rule
(:func:`nccl_a2a_ctas`; docs/research/h97-a2a-sms.md), not the data-parallel collectives' ``collective_sms`` (a ring
all-gather's channels). A stated ``parallelism.comm_interference`` still overrides it, as for every NCCL collective; a
device without ``p2p_channels_*`` falls back to ``comm_interference``'s default (``collective_sms / sm_count``).

Shared expert (``framework.moe_shared_expert_overlap``, Megatron-core's ``moe_shared_expert_overlap``, default
False: NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/transformer_config.py l.717-721): without it the
shared expert runs whole before the router (moe_layer.py l.507-533); with it the dispatcher runs it in pieces on a
side stream (shared_experts.py l.106-109, 196-198) while the all-to-alls run on NCCL's stream (mappings.py
l.449-458, ``use_nccl_stream``, token_dispatcher.py l.216-220): the alltoall dispatcher issues fc1 and the
activation right after the dispatch all-to-all (token_dispatcher.py l.697-717), fc2 (and its TP reduce-scatter)
right after the combine (l.858-873); the flex dispatcher the same after its dispatch (l.1972-1979) and its combine
(l.2031-2033, 2048-2051). In backward autograd runs each op's backward on its forward's stream, and Megatron orders
the launches so the combine's backward goes first with fc2's backward beside it, the dispatch's backward with fc1's
(shared_experts.py l.313-320, 329-330: ``set_tensor_grad_fn_sequence_sr``, ``_BackwardStreamWait``). So per pass
each all-to-all hides behind one part of the shared expert's GEMM time (:func:`shared_hidden`): the dispatch
behind fc1 (with the activation; ``2/3`` of the GEMM FLOPs of a gated MLP, ``1/2`` else), the combine behind fc2;
exposed = what exceeds it, never below 0. Under the flex dispatcher the hidden part costs ``sm_share`` of compute
(the shared GEMMs run beside DeepEP's SMs). Megatron-core refuses it with ``overlap_moe_expert_parallel_comm``
(l.3039-3041) and with ``shared_experts`` in ``recompute_modules`` (l.1991-1997); without a shared expert it is
silently inert there (l.719-720), refused here so a row cannot claim an overlap that does nothing. Not modelled:
the shared expert's own TP all-gather / reduce-scatter move to the side stream as plain NCCL collectives
(shared_experts.py l.163-174 turn TE's userbuffers overlap off); they stay priced as the dense MLP's.

Group-limited routing (``model.moe_router_num_groups`` / ``moe_router_group_topk``; DeepSeek-V3's node-limited
routing, at most ``M = 4`` of 8 nodes per token, arXiv 2412.19437 Sec. 2.1.2 and 3.2.2): the flex dispatcher's
nodes and ranks reached per token are counted under the limit (:func:`units_reached`: 3.63 nodes for DeepSeek-V3's
8 groups of 32 experts on 8 nodes, against 5.29 unlimited), so the IB volume is one row per (token, destination node),
at most ``M`` per token; the NCCL all-to-all still sends ``k`` copies. FP8 dispatch (``framework.moe_dispatch_fp8``,
DeepSeek-V3 Sec. 3.3.4 with DeepEP's FP8 input): the forward dispatch and the backward's gradient dispatch carry one
E4M3 byte per value plus a fp32 scale per 1x128 tile (:data:`FP8_ROW_BYTES`), the two combines BF16; a layer's
all-to-all time is the mean of the two kinds (two of each per microbatch).

DualPipe (``parallelism.schedule=dualpipe``, :mod:`~estimator.parallel.step`): its merged forward-backward chunks hide
the all-to-alls as Megatron's merged 1F1B does (:func:`merged_exposure`, the same four-phase order as the report's
Figure 4), for the share of chunks DualPipe merges (:func:`dualpipe_merged_fraction`), with the dispatcher's SMs
taken from compute (:func:`sm_share`; DeepSeek's 20 SMs, Sec. 3.2.2, DeepEP's default).

Not modelled: routing imbalance, the expert-TP copies the flex dispatcher sends to the ``etp`` ranks (priced as
today's ``etp`` gather), NCCL EP (``ncclep``), the SMs' split between IB sending, IB-to-NVLink forwarding and
NVLink receiving inside DeepSeek's 20 (the two exchanges are priced at the links' rates, the slower one standing).
"""

from __future__ import annotations

from math import comb

from estimator.errors import EstimatorError
from estimator.parallel.placement import ranks_per_node

DISPATCHERS = ("alltoall", "deepep", "hybridep")
DISPATCHER_SMS = {"deepep": 20, "hybridep": 32}  # SMs a flex backend holds by default (module docstring)
BF16_BYTES = 2
# FP8 dispatch (DeepSeek-V3, arXiv 2412.19437 Sec. 3.3.4 "we quantize the activation before MoE up-projections into FP8
# and then apply dispatch components"; the combines stay BF16): one E4M3 byte per value plus one fp32 scale per 1x128
# tile (deepseek-ai/DeepEP@9fe9021f29c9083cd1808ab36b740208524d9f63 tests/utils.py l.37-42 per_token_cast_to_fp8:
# (x fp8 [m, n], amax / 448 float32 [m, n / 128]); its README benchmarks "FP8 dispatching and BF16 combining")
FP8_ROW_BYTES = 1 + 4 / 128


def groups_reached(experts: int, groups: int, k: int) -> float:
    """Expected number of the ``groups`` equal groups of experts holding at least one of a token's ``k`` experts,
    chosen uniformly without replacement from ``experts``: ``groups x (1 - C(E - E/n, k) / C(E, k))``."""
    return groups * (1.0 - comb(experts - experts // groups, k) / comb(experts, k))


def ep_split(fabric, ep: int, stride: int) -> tuple[int, int]:
    """(ranks of an ``ep`` group in one node, nodes it spans); a fabric without nodes: one rank per node."""
    r = ranks_per_node(getattr(fabric.config, "gpus_per_node", 1) or 1, ep, stride)
    return r, ep // r


def flex_strides(fabric, ep: int, stride: int) -> dict[str, int]:
    """Strides of the flex dispatcher's two exchanges: ``ep_rail`` (across nodes) and ``ep_node`` (inside one)."""
    r, _ = ep_split(fabric, ep, stride)
    return {"ep_rail": stride * r, "ep_node": stride}


def units_reached(experts: int, units: int, k: int, groups: int | None = None, topk: int | None = None) -> float:
    """Expected number of the ``units`` equal, contiguous blocks of experts (nodes or ranks of the ``ep`` group)
    holding at least one of a token's ``k`` experts. Without group-limited routing (``groups`` None, or ``topk >=
    groups``): :func:`groups_reached`. With it (Megatron-core's ``moe_router_num_groups`` / ``moe_router_group_topk``;
    DeepSeek-V3's node-limited routing, arXiv 2412.19437 Sec. 2.1.2 "each token will be sent to at most M nodes"):
    the token first picks ``topk`` of the ``groups`` contiguous expert groups, then its ``k`` experts among their
    ``topk E / groups`` experts, both taken uniform here (the routing's balance is not modelled). A unit holding
    ``c`` whole groups is reached with probability ``sum_j P(j of its c groups picked) (1 - C(P - j E/G, k) / C(P,
    k))``, ``P = topk E / G`` (``j`` hypergeometric); a unit inside one group with ``(topk / G) (1 - C(P - E/n, k) /
    C(P, k))``. At most ``min(units, topk x units / groups)`` units when units hold whole groups (DeepSeek-V3:
    groups = nodes = 8, 4 of them)."""
    if not groups or topk is None or topk >= groups:
        return groups_reached(experts, units, k)
    per_group, per_unit = experts // groups, experts // units
    pool = topk * per_group
    if pool < k:
        raise EstimatorError(f"group-limited routing: {topk} of {groups} groups hold {pool} experts, fewer than "
                             f"top-k {k}")
    total = comb(pool, k)
    if per_unit % per_group == 0:  # the unit holds c whole groups
        c = per_unit // per_group
        p = sum(comb(c, j) * comb(groups - c, topk - j) / comb(groups, topk) * (1 - comb(pool - j * per_group, k) / total)
                for j in range(1, min(c, topk) + 1))
    elif per_group % per_unit == 0:  # the unit is part of one group
        p = topk / groups * (1 - comb(pool - per_unit, k) / total)
    else:
        raise EstimatorError(f"group-limited routing: {groups} expert groups and {units} units of the ep group "
                             f"({experts} experts) do not nest (neither holds whole ones of the other)")
    return units * p


def hybridep_rail_rates(table: tuple | None, nodes: int) -> tuple[float, float] | None:
    """HybridEP's measured (dispatch, combine) rail rates in bytes/s for an ``ep`` group spanning ``nodes`` nodes:
    the entry of a device's parsed ``hybridep_rail_Bps`` ``table`` (``((nodes, dispatch, combine), ...)``) of the
    largest measured node count not above ``nodes`` (rates fall as nodes are added, so between or beyond the measured
    counts this is the optimistic neighbour); None when the group is inside one node or no entry is that low."""
    below = [(d, c) for n, d, c in table or () if n <= nodes]
    return below[-1] if nodes > 1 and below else None


def dispatch_time(pricer, dispatcher: str, tokens: float, hidden: int, experts: int, k: int, ep: int,
                  count: float, limit: tuple[int | None, int | None] = (None, None), fp8: bool = False,
                  rail_table: tuple | None = None) -> float:
    """Seconds of one all-to-all of a rank's ``tokens`` over the ``ep`` group (module docstring), the mean of a
    dispatch and a combine (the four a layer runs per microbatch: two of each kind); ``count``: how many per step (the
    collectives' record); ``limit``: the router's (groups, group top-k), group-limited routing (:func:`units_reached`,
    the flex dispatcher only: the NCCL all-to-all sends ``k`` copies whatever the groups); ``fp8``: the dispatches
    carry FP8 rows with their 1x128 scales (``framework.moe_dispatch_fp8``, :data:`FP8_ROW_BYTES`), the combines BF16.
    ``rail_table`` (HybridEP only: the device's parsed ``hybridep_rail_Bps``): its kernels' measured (dispatch, combine)
    rates of the rail exchange for the ep group's node count (:func:`hybridep_rail_rates`), in the bytes the rail is
    priced on (``tokens x row x nodes reached``, a token's own node counted, as
    HybridEP's benchmark counts them); the rail exchange takes the slower of the fabric's price and the measured
    kernel, the dispatch and the combine each at its own rate (their mean is recorded, pricing
    ``hybridep_measured``, when the measured rate binds)."""
    sizes = (FP8_ROW_BYTES, BF16_BYTES) if fp8 else (BF16_BYTES,)
    if dispatcher != "alltoall":  # rows per token to the nodes (rail) and to the ranks (inside a node) it reaches
        r, n = ep_split(pricer.fabric, ep, pricer.stride.get("ep", 1))
        nodes, ranks = units_reached(experts, n, k, *limit), units_reached(experts, ep, k, *limit)
        rail_rates = hybridep_rail_rates(rail_table, n) if dispatcher == "hybridep" else None
    times = []
    for value_bytes in sizes:
        row, n_count = hidden * value_bytes, count / len(sizes)
        if dispatcher == "alltoall":
            times.append(pricer.price("ep", "all_to_all", tokens * k * row, ep, n_count))
            continue
        at = len(pricer.colls)
        rail = pricer.price("ep_rail", "all_to_all", tokens * row * nodes, n, n_count) if n > 1 else 0.0
        rails = (rail, rail)
        if rail_rates:
            rails = tuple(max(rail, tokens * row * nodes / rate) for rate in rail_rates)
            if max(rails) > rail and len(pricer.colls) > at:
                pricer.colls[at].update(time_s=sum(rails) / 2, pricing="hybridep_measured")
        node = pricer.price("ep_node", "all_to_all", tokens * row * ranks, r, n_count) if r > 1 else 0.0
        times.append(sum(max(t, node) for t in rails) / 2)
    return sum(times) / len(times)


def merged_exposure(a2a: float, pre_f: float, experts_f: float, pre_b: float, experts_b: float,
                    delay_wgrad: bool = True) -> float:
    """Exposed seconds of one layer's four all-to-alls (``a2a`` each) when one microbatch's forward and another's
    backward run merged (Megatron-core's ``TransformerLayerSchedulePlan.run``): ``pre_*`` the pre-dispatch part's
    compute (attention, norms, router, the layer's other exposed communication), ``experts_*`` the routed
    experts'; with ``delay_wgrad_compute`` (``delay_wgrad``, ``framework.moe_a2a_delay_wgrad``) the experts' weight
    gradients (half their backward) run after their data gradients, behind the dispatch's backward; without it the
    experts' whole backward runs before the dispatch's backward is issued (``mlp.backward`` computes both,
    ``mlp.backward_dw`` does nothing)."""
    dgrad, wgrad = (experts_b / 2, experts_b / 2) if delay_wgrad else (experts_b, 0.0)
    combine_b = a2a  # comm: combine backward | comp: pre-dispatch forward
    dispatch_f = max(combine_b, pre_f) + a2a  # after the forward's router
    dgrad_end = max(pre_f, combine_b) + dgrad  # the experts' backward needs the combine's gradient
    dispatch_b = max(dispatch_f, dgrad_end) + a2a
    experts_f_end = max(dgrad_end + wgrad, dispatch_f) + experts_f
    combine_f = max(dispatch_b, experts_f_end) + a2a
    pre_b_end = max(experts_f_end, dispatch_b) + pre_b
    return max(0.0, max(combine_f, pre_b_end) - (pre_f + experts_f + pre_b + experts_b))


# NCCL's p2p scheduling (NVIDIA/nccl, the same rule at v2.23.4-1 .. v2.28.9-1; file:line at v2.27.7-1 and v2.28.9-1 in
# docs/research/h97-a2a-sms.md): a remote peer gets 2 channels ("start from 2 channels per NIC", src/graph/paths.cc
# l.820 / 839), halved while 2 x nRanks > 4 x p2pnChannels (l.827 / 846), raised to the NICs a GPU needs for its
# bandwidth (getLocalNetCountByBw: 1 on a DGX, one 400 Gb/s NIC per GPU); one CTA runs up to 8 send / recv pairs at
# once and the peers of one node share their channels (NCCL_MAX_DEV_WORK_P2P_PER_BATCH, src/include/device.h l.369 /
# 364; src/include/channel.h ncclP2pChannelBaseForRound)
NET_CHANNELS_PER_PEER = 2
P2P_PER_BATCH = 8


def nccl_a2a_ctas(device, ranks: int, nodes: int) -> int | None:
    """CTAs (SMs) of one NCCL all-to-all of MB-sized per-peer blocks over ``ranks x nodes`` ranks, ``ranks`` of them per
    node (NCCL's grid is the number of p2p channels the grouped sends / receives touch: ``countOneBits(channelMask)``,
    src/enqueue.cc l.1539 at v2.27.7-1). Inside one node (``nodes == 1``): ``P = device.p2p_channels_nvlink``; each of
    the ``r`` peers (self included) is split over ``c`` channels, ``c`` halved from the per-peer count (``P``: an
    NVSwitch peer gets ``2 x NVLinks`` channels, above ``P``) while ``c r > P``, the peers on disjoint channels:
    ``min(P, r c)``.
    Across nodes: ``P = device.p2p_channels_network``; every peer gets ``c`` channels (:data:`NET_CHANNELS_PER_PEER`,
    halved while ``2 x ranks x nodes > 4 P``; a MB-sized block doubles to it, its part above the 128 kB network chunk),
    and the 8 peers of a node share them, so ``min(P, nodes x ceil(ranks / 8) x c)``. None when the device states no
    p2p channel count. Not modelled: blocks under 64 kB (fewer channels), NCCL_NCHANNELS_PER_NET_PEER / max_ctas set
    by the user, CE / symmetric-memory all-to-all (NCCL 2.28's ``NCCL_CTA_POLICY_ZERO``, opt-in)."""
    if nodes <= 1:
        p = device.p2p_channels_nvlink
        if not p:
            return None
        c = p
        while c * ranks > p and c > 1:
            c //= 2
        return min(p, ranks * c)
    p = device.p2p_channels_network
    if not p:
        return None
    c = NET_CHANNELS_PER_PEER
    while c * ranks * nodes > 4 * p and c > 1:
        c //= 2
    return min(p, nodes * -(-ranks // P2P_PER_BATCH) * c)


def sm_share(framework, device, interference: float = 0.0, nccl_ctas: int | None = None) -> float:
    """Seconds of compute one second of hidden dispatch costs: the flex dispatcher's SMs over the device's (0 for
    a device that states no SM count); the NCCL all-to-all's ``nccl_ctas`` (:func:`nccl_a2a_ctas`) over the device's
    SMs, or ``interference`` when None (a stated ``parallelism.comm_interference``, or a device without p2p channel
    counts: by default the device's ``collective_sms / sm_count``)."""
    if framework.moe_dispatcher not in DISPATCHER_SMS:
        return nccl_ctas / device.sm_count if nccl_ctas and device.sm_count else interference
    if not device.sm_count:
        return 0.0
    sms = framework.moe_dispatcher_sms or DISPATCHER_SMS[framework.moe_dispatcher]
    if sms >= device.sm_count:
        raise EstimatorError(f"framework.moe_dispatcher_sms={sms} leaves no SM of the device's {device.sm_count} "
                             "for compute")
    return sms / device.sm_count


def fc1_share(gated: bool) -> float:
    """fc1's share of an MLP's GEMM FLOPs: ``2f`` of ``3f`` wide when gated (SwiGLU), half else."""
    return 2 / 3 if gated else 1 / 2


def shared_hidden(a2a: float, fc1: float, fc2: float) -> tuple[float, float]:
    """(exposed, hidden) seconds of one pass's dispatch and combine (``a2a`` each) when the shared expert's fc1
    (``fc1`` seconds in that pass) runs behind the dispatch and its fc2 behind the combine (module docstring)."""
    hidden = min(a2a, fc1) + min(a2a, fc2)
    return 2 * a2a - hidden, hidden


def merged_fraction(microbatches: int, pp: int, v: int, group: int | None) -> float:
    """Share of a rank's forwards (and backwards) that run merged (module docstring; the first stage, which has
    the longest warm-up)."""
    total = microbatches * v
    alone = 1 if pp == 1 else 2 * (pp - 1) + (v - 1) * (group or pp) + 1
    return max(0, total - alone) / total


def dualpipe_merged_fraction(microbatches: int, pp: int) -> float:
    """Share of a rank's forwards (and backwards) DualPipe runs merged with another microbatch's backward
    (deepseek-ai/DualPipe@3da1bbe dualpipe/dualpipe.py l.381-403: step 4 runs ``C - pp + h + 1`` rounds of two
    ``_forward_backward_chunk`` and step 5 ``pp/2 - h - 1`` of one, ``C = m / 2`` microbatches per direction, ``h`` the
    rank's distance to the nearer end; the rest run alone in the warm-up and cool-down). Taken at ``h = 0``, the first
    and last ranks, which hold the embedding, the LM head and the MTP module: ``(m - 3 pp / 2 + 1) / m``; with ``pp =
    2`` they are the middle ranks, whose first pair runs unmerged (l.385-391): one fewer."""
    return max(0.0, microbatches - 1.5 * pp + 1 - (1 if pp == 2 else 0)) / microbatches


def check(framework, spec, layout, precision: str) -> None:
    """One-line errors for what Megatron-core refuses (transformer_config.py ``__post_init__``: the
    ``overlap_moe_expert_parallel_comm`` asserts; ``MoEFlexTokenDispatcher``: DeepEP needs TP x EP > 1)."""
    check_model(framework, spec, precision)
    if not spec.experts:
        return
    L = layout
    if framework.moe_dispatcher != "alltoall" and L.expert_tp * L.ep == 1:
        raise EstimatorError(f"framework.moe_dispatcher={framework.moe_dispatcher}: the flex dispatcher needs "
                             f"etp x ep > 1, got {L.expert_tp} x {L.ep}")
    if framework.moe_shared_expert_overlap and "shared_experts" in L.modules:
        raise EstimatorError("framework.moe_shared_expert_overlap: Megatron-core refuses shared_experts in "
                             "recompute_modules")
    if not framework.moe_a2a_overlap:
        return
    why = None
    if L.ep == 1:
        why = "needs expert parallelism (ep > 1)"
    elif L.pp > 1 and L.virtual_stages == 1:
        why = f"with pp={L.pp} needs virtual pipeline stages (parallelism.virtual_stages > 1)"
    elif L.recompute == "full":
        why = "refuses full recompute"
    elif "moe" in L.modules:
        why = "refuses moe in recompute_modules"
    if why:
        raise EstimatorError(f"framework.moe_a2a_overlap: Megatron-core {why}")


def check_model(framework, spec, precision: str) -> None:
    """The part of :func:`check` no layout changes (so a layout search can still say it at once)."""
    if framework.moe_permute_fusion_into_hybridep and framework.moe_dispatcher != "hybridep":
        raise EstimatorError("framework.moe_permute_fusion_into_hybridep: Megatron-core passes it to the HybridEP "
                             f"backend only; needs framework.moe_dispatcher=hybridep, got {framework.moe_dispatcher}")
    if framework.moe_dispatch_fp8 and (framework.moe_dispatcher == "alltoall" or precision != "fp8"):
        raise EstimatorError("framework.moe_dispatch_fp8: DeepEP's FP8 dispatch needs the flex dispatcher "
                             f"(framework.moe_dispatcher deepep | hybridep, got {framework.moe_dispatcher}) and "
                             f"precision=fp8 (got {precision}); Megatron-core's NCCL all-to-all sends BF16")
    if framework.moe_shared_expert_overlap:
        why = None
        if not (spec.experts and spec.shared_ffn):
            why = (f"model {spec.name} has no shared expert (model.shared_expert_ffn_size); Megatron-core leaves the "
                   "flag inert without one")
        elif framework.moe_a2a_overlap:
            why = "Megatron-core refuses it with overlap_moe_expert_parallel_comm (framework.moe_a2a_overlap)"
        if why:
            raise EstimatorError(f"framework.moe_shared_expert_overlap: {why}")
    if not framework.moe_a2a_overlap:
        return
    why = None
    if not spec.experts:
        why = f"requires expert parallelism: model {spec.name} has no experts"
    elif spec.mtp > 1:
        why = f"allows at most one MTP layer, got {spec.mtp}"
    elif precision == "fp32":
        why = "needs a bf16 or fp16 model"
    if why:
        raise EstimatorError(f"framework.moe_a2a_overlap: Megatron-core {why}")
