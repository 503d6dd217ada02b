"""A parallel layout (``parallelism=hybrid``): degrees, microbatches, rank order, pipeline stages.

Layout keys (``conf/parallelism/hybrid.yaml``): ``tp`` tensor, ``cp`` context (the sequence split
over ``cp`` ranks; Megatron-core's ``--context-parallel-size``) with ``cp_comm`` how its ranks
exchange keys and values (``ring``: Megatron-core's default ring attention; ``all_gather``: the
keys and values gathered before attention, Llama 3's method; :mod:`~estimator.parallel.step`),
``pp`` pipeline,
``dp`` data parallel degree (tp x cp x pp x dp = GPUs = ``fabric.nodes``), ``ep`` expert parallel
degree and ``etp`` the experts' tensor-parallel degree (MoE models only; :meth:`Layout.expert_strides`),
``micro_batch_size``
sequences per microbatch, ``global_batch`` sequences per step (microbatches per pipeline =
global_batch / (dp x micro_batch_size); context parallelism splits sequences, not the batch),
``zero`` 0-3, ``sequence_parallel`` (null: on when tp > 1 and tp divides the sequence), ``recompute`` none | selective | op | full,
``recompute_modules`` (null = ``recompute`` alone; a list, with ``recompute=selective`` only: Megatron-core's
``--recompute-modules``, exactly those modules, :data:`RECOMPUTE_MODULES`; memory and time in
:mod:`~estimator.parallel.memory` and :func:`~estimator.parallel.step.recompute_cost`), ``virtual_stages``
model chunks per pipeline rank (interleaved 1F1B, Narayanan et al. 2021 Sec. 2.2.2; Megatron-LM's
``--num-layers-per-virtual-pipeline-stage k`` is ``virtual_stages = layers / (pp x k)``; its
assertion: the microbatches divide by ``pp``), ``microbatch_group`` the number N of contiguous
microbatches each model chunk runs before the next (Llama 3's tunable N, Dubey et al. 2024 Sec.
3.3.2 and Fig. 6; Megatron-core's ``--microbatch-group-size-per-virtual-pipeline-stage``; null =
``pp``, the depth-first schedule; ``pp <= N <= microbatches``, and the microbatches left for the
last group are 0 or at least ``pp``: ``get_schedule_table`` / its checks in
megatron/core/pipeline_parallel/schedules.py), ``first_stage_layers`` / ``last_stage_layers``.

Pipeline stages (:meth:`Layout.stage_layers`): with both stage keys null and ``pp`` dividing the
layers, every stage holds ``layers / pp``. Otherwise the split is uneven, as Megatron-core's
``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``: the given first /
last stage counts, the remaining layers evenly over the other stages (they must divide). With both
null and ``pp`` not dividing the layers (our rule, chosen to reproduce Llama 3 405B's 126 layers on
16 stages, Dubey et al. 2024 Sec. 3.3.2: "we reduce one Transformer layer each from the first and
the last stages" because they also hold the embedding and the LM head): every stage gets
``ceil(layers / pp)`` and the surplus is taken one layer each from the first, the last, the second,
the second-to-last stage...

Expert layers (Megatron-core's "MoE parallel folding", ``--expert-tensor-parallel-size``;
``parallel_state.initialize_model_parallel`` builds a second rank generator for them with order
``tp-ep-dp-pp``): the ``tp x cp x dp`` ranks of a pipeline stage are regrouped as ``etp`` (innermost)
x ``ep`` x ``edp`` (the ranks holding the same experts, which reduce their gradients), so
``etp x ep`` must divide ``tp x cp x dp``. ``etp`` null = ``tp`` (experts split like the dense MLP).
With ``etp = tp`` and ``cp = 1`` an EP group is ``ep`` ranks of a DP group, in any rank order; any
other fold needs the stage's ranks to be one arithmetic run (``pp`` outermost or innermost in
``order``).

Interleaved (``virtual_stages`` v > 1; :meth:`Layout.chunk_layers`): rank ``i``'s ``j``-th model
chunk is global chunk ``c = j pp + i`` (Megatron-core's interleaved order), so the first chunk of
the first stage holds the embedding and the last chunk of the last stage the LM head. The same
rules apply to the ``pp x v`` chunks: ``layers / (pp v)`` each when it divides; else, with both
stage keys null, ``ceil(layers / (pp v))`` each and the surplus taken one layer each from chunk 0,
the last chunk, chunk 1, ... — 126 layers on 16 x 8 chunks leave chunk 0 with only the embedding
and the last chunk with only the output layer and loss, as Llama 3 405B ran (Dubey et al. 2024 Sec.
3.3.2; Megatron-core's ``--account-for-embedding-in-pipeline-split`` /
``--account-for-loss-in-pipeline-split`` count them as a layer each the same way). Only the
embedding and LM-head chunks may be left without a layer. Given first / last stage counts are split
evenly over that stage's v chunks (they and the other stages' count must divide by v, as
Megatron-core requires).

Rank order (``order``, innermost first): Megatron-core's default ``tp-cp-dp-pp`` (a TP group is
``tp`` consecutive ranks, CP strides by ``tp``, DP by ``tp x cp``, PP by ``tp x cp x dp``); an
order without ``cp`` gets it right inside ``dp``. ``cp`` must sit directly inside ``dp``: the
gradients of a CP group's ranks are reduced together with their DP replicas (Megatron-core's
data-parallel group with context parallelism spans dp x cp ranks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from estimator.errors import EstimatorError
from estimator.parallel.spec import TransformerSpec

RECOMPUTE = ("none", "selective", "op", "full")
ZERO_STAGES = (0, 1, 2, 3)  # parallelism.zero / framework.zero
SCHEDULES = ("1f1b", "dualpipe")  # parallelism.schedule (estimator/parallel/step.py: the pipeline)
# Megatron-core's selective recompute modules (megatron/core/transformer/transformer_config.py ``recompute_modules``,
# NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553; its default ["core_attn"] is recompute=selective)
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts")
# Transformer Engine's cp_comm_type p2p / all_gather (Megatron-core --cp-comm-type); torch: PyTorch's context_parallel
# (torchtitan's default rotate method "allgather"); torch_alltoall: the same with rotate method "alltoall"
CP_COMM = ("ring", "all_gather", "torch", "torch_alltoall")
DIMS = ("tp", "cp", "dp", "pp")


def _int(par: Mapping[str, Any], key: str, default: int | None = None, low: int = 1) -> int:
    value = par.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise EstimatorError(f"parallelism.{key} must be an integer >= {low}, got {value!r}")
    return value


def check_zero(zero: object, key: str) -> None:
    """One-line error unless ``zero`` is a ZeRO stage (:data:`ZERO_STAGES`); ``key`` names the setting."""
    if isinstance(zero, bool) or zero not in ZERO_STAGES:
        raise EstimatorError(f"{key} must be 0, 1, 2 or 3, got {zero!r}")


def _modules(par: Mapping[str, Any], recompute: str) -> tuple[str, ...] | None:
    """``parallelism.recompute_modules`` checked against :data:`RECOMPUTE_MODULES` and ``recompute`` (None = unset)."""
    value = par.get("recompute_modules")
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise EstimatorError(f"parallelism.recompute_modules must be a list of module names (e.g. [mla_up_proj,mlp]) "
                             f"or null, got {value!r}")
    unknown = [v for v in value if v not in RECOMPUTE_MODULES]
    if unknown:
        raise EstimatorError(f"parallelism.recompute_modules: unknown module {unknown[0]!r}; Megatron-core's are "
                             f"{', '.join(RECOMPUTE_MODULES)}")
    if recompute != "selective":
        raise EstimatorError(f"parallelism.recompute_modules={list(value)} names the modules of a selective recompute: it "
                             f"needs parallelism.recompute=selective (got {recompute})")
    return tuple(dict.fromkeys(value))


def _order(order: str) -> str:
    """A rank order with ``cp`` (inserted right inside ``dp`` when not given), checked."""
    dims = order.split("-")
    if "cp" not in dims and sorted(dims) == ["dp", "pp", "tp"]:
        dims.insert(dims.index("dp"), "cp")
    if sorted(dims) != sorted(DIMS):
        raise EstimatorError(f"parallelism.order must list tp, dp, pp (and optionally cp) innermost first "
                             f"(e.g. tp-cp-dp-pp), got {order!r}")
    if dims.index("dp") - dims.index("cp") != 1:
        raise EstimatorError(f"parallelism.order {order!r}: cp must sit directly inside dp (the gradient "
                             "reduction spans dp x cp ranks), e.g. tp-cp-dp-pp")
    return "-".join(dims)


@dataclass(frozen=True)
class Layout:
    tp: int
    pp: int
    dp: int
    ep: int
    micro_batch_size: int
    microbatches: int
    zero: int
    sequence_parallel: bool
    recompute: str
    order: str = "tp-cp-dp-pp"  # rank order, innermost first (Megatron-core's default)
    virtual_stages: int = 1  # model chunks per pipeline rank (1 = non-interleaved 1F1B)
    cp: int = 1  # context-parallel degree
    first_stage_layers: int | None = None  # None: the module docstring's rule
    last_stage_layers: int | None = None
    cp_comm: str = "ring"  # how the CP ranks exchange keys and values: ring | all_gather | torch | torch_alltoall
    microbatch_group: int | None = None  # contiguous microbatches per model chunk (interleaved); None = pp
    etp: int | None = None  # the experts' tensor-parallel degree; None = tp
    distribute_saved: bool = False  # full recompute: each TP rank keeps 1/tp of the checkpointed layer input
    recompute_modules: tuple[str, ...] | None = None  # recompute=selective's modules; None = core_attn (selective) alone
    schedule: str = "1f1b"  # pipeline schedule: 1f1b (with virtual_stages: interleaved) | dualpipe (DeepSeek-V3's)

    @property
    def modules(self) -> frozenset[str]:
        """Megatron-core modules recomputed (``recompute_modules``); ``selective`` alone is ``core_attn``."""
        if self.recompute_modules is not None:
            return frozenset(self.recompute_modules)
        return frozenset(("core_attn",)) if self.recompute == "selective" else frozenset()

    @property
    def reruns_attention(self) -> bool:
        """The backward re-runs the core attention's forward (and its context-parallel exchange)."""
        return self.recompute in ("op", "full") or "core_attn" in self.modules

    @property
    def saved_input_split(self) -> int:
        """TP ranks the checkpointed layer input of a full recompute is split over: ``tp`` with sequence parallelism
        (already split) or ``parallelism.distribute_saved_activations``, else 1."""
        return self.tp if self.sequence_parallel or self.distribute_saved else 1

    @property
    def expert_tp(self) -> int:
        return self.tp if self.etp is None else self.etp

    @property
    def edp(self) -> int:
        """Ranks holding the same experts (expert data parallelism; module docstring)."""
        return self.tp * self.cp * self.dp // (self.expert_tp * self.ep)

    def expert_strides(self, stride: Mapping[str, int]) -> dict[str, int]:
        """Rank strides of the expert groups ``etp``, ``ep``, ``edp`` given the dense dims' ``stride``
        (module docstring: Megatron-core's fold of a stage's ranks)."""
        if self.expert_tp == self.tp and self.cp == 1:
            return {"etp": stride["tp"], "ep": stride["dp"], "edp": stride["dp"] * self.ep}
        base = self._fold_base()
        return {"etp": base, "ep": base * self.expert_tp, "edp": base * self.expert_tp * self.ep}

    def _fold_base(self) -> int:
        """Rank stride of a stage's ``tp x cp x dp`` ranks, which the expert groups fold (module docstring)."""
        dims = self.order.split("-")
        if dims[-1] == "pp":
            return 1
        if dims[0] == "pp":
            return self.pp
        raise EstimatorError(f"parallelism.etp={self.expert_tp}, ep={self.ep}, cp={self.cp}: experts are folded over a "
                             f"stage's tp x cp x dp ranks, which needs pp outermost or innermost in parallelism.order "
                             f"(got {self.order!r})")

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def global_batch(self) -> int:
        return self.microbatches * self.micro_batch_size * self.dp

    def label(self) -> str:
        cp = f" cp{self.cp}" + ("" if self.cp_comm == "ring" else f"({self.cp_comm})") if self.cp > 1 else ""
        extra = cp + (f" ep{self.ep}" if self.ep > 1 else "") + (f" etp{self.etp}" if self.etp not in (None, self.tp) else "") + \
            (f" zero{self.zero}" if self.zero else "")
        sp = (" sp" if self.sequence_parallel else "") + (f" v{self.virtual_stages}" if self.virtual_stages > 1 else "") + \
            (f" N{self.microbatch_group}" if self.microbatch_group is not None else "")
        order = self.order if self.cp > 1 else self.order.replace("cp-", "").replace("-cp", "")
        rc = self.recompute + (f"({'+'.join(self.recompute_modules)})" if self.recompute_modules is not None else "")
        sched = " dualpipe" if self.schedule == "dualpipe" else ""
        return (f"tp{self.tp} pp{self.pp} dp{self.dp}{extra} mbs{self.micro_batch_size} m{self.microbatches}"
                f"{sp}{sched} rc={rc} order={order}")

    @classmethod
    def from_cfg(cls, par: Mapping[str, Any], spec: TransformerSpec, gpus: int) -> Layout:
        tp, pp = (1 if par.get(k) is None else _int(par, k) for k in ("tp", "pp"))  # unstated: 1 (Megatron-LM's default)
        cp = _int(par, "cp", 1)
        dp = par.get("dp")
        if dp is None and gpus % (tp * cp * pp):
            what = "tp x cp x pp" if cp > 1 else "tp x pp"
            raise EstimatorError(f"parallelism: {what} = {tp * cp * pp} does not divide the fabric's {gpus} GPUs "
                                 "(fabric.nodes counts GPUs, not servers)")
        dp = gpus // (tp * cp * pp) if dp is None else _int(par, "dp")
        if tp * cp * pp * dp != gpus:
            what = "tp x cp x pp x dp" if cp > 1 else "tp x pp x dp"
            values = " x ".join(str(v) for v in ((tp, cp, pp, dp) if cp > 1 else (tp, pp, dp)))
            raise EstimatorError(f"parallelism: {what} = {values} = {tp * cp * pp * dp} but the fabric has {gpus} GPUs (fabric.nodes)")
        mbs = _int(par, "micro_batch_size", 1)
        if par.get("microbatches") is not None:
            m = _int(par, "microbatches")
        else:
            gb = _int(par, "global_batch")
            if gb % (dp * mbs):
                raise EstimatorError(f"parallelism.global_batch {gb} is not a multiple of dp x micro_batch_size = {dp * mbs}")
            m = gb // (dp * mbs)
        if par.get("recompute", "none") is None:  # estimator.parallel.estimate fills it from framework.recompute first
            raise EstimatorError("parallelism.recompute is null: the framework's default (framework.recompute) is filled in "
                                 "by estimator.parallel.estimate; a layout built directly needs it stated")
        recompute = str(par.get("recompute", "none"))
        if recompute not in RECOMPUTE:
            raise EstimatorError(f"parallelism.recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
        # null: estimate.setup_hybrid fills in framework.zero; a caller that does not gets 1, the tool's earlier default
        zero = 1 if "zero" in par and par["zero"] is None else _int(par, "zero", 0, low=0)
        check_zero(zero, "parallelism.zero")
        sp = par.get("sequence_parallel")
        if sp is None:  # today's recipes: on with tensor parallelism, where the sequence splits evenly over tp
            sp = tp > 1 and (spec.seq_len // cp) % tp == 0
        if not isinstance(sp, bool):
            raise EstimatorError(f"parallelism.sequence_parallel must be true, false or null (on when tp > 1), got {sp!r}")
        order = _order(str(par.get("order", "tp-cp-dp-pp")))
        first, last = (None if par.get(k) is None else _int(par, k) for k in ("first_stage_layers", "last_stage_layers"))
        cp_comm = str(par.get("cp_comm", "ring"))
        if cp_comm not in CP_COMM:
            raise EstimatorError(f"parallelism.cp_comm must be one of {', '.join(CP_COMM)}, got {cp_comm!r}")
        group = None if par.get("microbatch_group") is None else _int(par, "microbatch_group")
        etp = None if par.get("etp") is None else _int(par, "etp")
        distribute = par.get("distribute_saved_activations", False)
        if not isinstance(distribute, bool):
            raise EstimatorError(f"parallelism.distribute_saved_activations must be true or false, got {distribute!r}")
        if distribute and (recompute != "full" or tp == 1):
            raise EstimatorError("parallelism.distribute_saved_activations=true splits a full recompute's checkpointed "
                                 f"input over the TP ranks: it needs recompute=full and tp > 1 (got recompute={recompute}, "
                                 f"tp={tp})")
        ep = 1 if par.get("ep") is None else _int(par, "ep")  # null: 1, or searched (estimator/parallel/estimate.py)
        schedule = str(par.get("schedule") or "1f1b")
        if schedule not in SCHEDULES:
            raise EstimatorError(f"parallelism.schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
        layout = cls(tp, pp, dp, ep, mbs, m, zero, sp, recompute, order, _int(par, "virtual_stages", 1),
                     cp, first, last, cp_comm, group, etp, distribute and not sp, _modules(par, recompute), schedule)
        layout.check(spec)
        return layout

    def stage_layers(self, layers: int) -> tuple[int, ...]:
        """Decoder layers of each pipeline stage (module docstring)."""
        chunks, pp = self.chunk_layers(layers), self.pp
        return tuple(sum(chunks[i::pp]) for i in range(pp))

    def chunk_layers(self, layers: int) -> tuple[int, ...]:
        """Decoder layers of each model chunk in Megatron-core's global order (chunk ``j pp + i`` is
        rank ``i``'s ``j``-th); ``pp`` chunks, one per stage, without interleaving (module docstring)."""
        pp, v, fixed = self.pp, self.virtual_stages, {}
        if self.first_stage_layers is not None:
            fixed[0] = self.first_stage_layers
        if self.last_stage_layers is not None:
            fixed[pp - 1] = self.last_stage_layers
        if pp == 1:
            if any(n != layers for n in fixed.values()):
                raise EstimatorError(f"parallelism: with pp=1 the one stage holds all {layers} layers; "
                                     "unset first_stage_layers / last_stage_layers")
            return (layers,)  # interleaving needs pp >= 2 (check)
        if not fixed:
            return _spread(layers, pp * v)
        rest, free = layers - sum(fixed.values()), pp - len(fixed)
        if rest < free or rest % free:
            raise EstimatorError(f"parallelism: {layers} layers minus first/last stage layers "
                                 f"{sorted(fixed.values())} leave {rest}, which does not split evenly over the other {free} stages")
        stages = [fixed.get(i, rest // free) for i in range(pp)]
        if v > 1 and any(n % v for n in stages):
            raise EstimatorError(f"parallelism.virtual_stages={v}: stage layers {stages} must each divide by "
                                 "virtual_stages (each stage's layers split evenly over its model chunks)")
        return tuple(stages[c % pp] // v for c in range(pp * v))

    def check(self, spec: TransformerSpec) -> None:
        if spec.heads % self.tp:
            raise EstimatorError(f"parallelism.tp={self.tp}: model {spec.name} has {spec.heads} attention heads, not divisible by tp")
        for key, width in (("ffn_size", spec.ffn), ("shared_expert_ffn_size", spec.shared_ffn)):
            if width % self.tp:
                raise EstimatorError(f"parallelism.tp={self.tp}: model {spec.name} {key} {width} is not divisible by tp")
        if spec.mla and self.cp > 1:
            raise EstimatorError(f"parallelism.cp={self.cp}: context parallelism with multi-head latent attention "
                                 f"(model {spec.name}) is not modelled; use cp=1")
        if spec.fused == "te" and spec.kv_heads % self.tp:
            raise EstimatorError(f"parallelism.tp={self.tp}: model {spec.name} has {spec.kv_heads} key/value heads; Megatron-core "
                                 "splits them over tp (num_query_groups % tp == 0)")
        if self.schedule == "dualpipe":
            # deepseek-ai/DualPipe@3da1bbe dualpipe/dualpipe.py l.332-333: ``assert num_ranks % 2 == 0``, ``num_chunks %
            # 2 == 0 and num_chunks >= num_ranks * 2``; one model chunk per direction on each rank (no interleaving)
            why = None
            if self.pp < 2 or self.pp % 2:
                why = f"an even number of pipeline ranks >= 2, got pp={self.pp}"
            elif self.microbatches % 2 or self.microbatches < 2 * self.pp:
                why = f"an even number of microbatches >= 2 pp = {2 * self.pp}, got {self.microbatches}"
            elif self.virtual_stages != 1:
                why = f"virtual_stages=1 (its two chunks per rank are the two directions), got {self.virtual_stages}"
            elif self.recompute == "full" or "moe" in self.modules:
                why = ("no recompute of the MoE layer (recompute=full or recompute_modules with moe): its merged chunks' "
                       "all-to-alls are priced for one forward and one backward")
            if why:
                raise EstimatorError(f"parallelism.schedule=dualpipe needs {why}")
        if self.virtual_stages > 1 and self.pp < 2:
            raise EstimatorError(f"parallelism.virtual_stages={self.virtual_stages} needs pipeline parallelism (pp >= 2), "
                                 f"got pp={self.pp}")
        chunks = self.chunk_layers(spec.layers)
        if min(self.stage_layers(spec.layers)) < 1:
            raise EstimatorError(f"parallelism.pp={self.pp}: model {spec.name} has {spec.layers} layers, fewer than one per stage")
        if min(chunks[1:-1], default=1) < 1:
            raise EstimatorError(f"parallelism.virtual_stages={self.virtual_stages}: model {spec.name}'s {spec.layers} layers "
                                 f"on pp x virtual_stages = {len(chunks)} model chunks leave a chunk other than the "
                                 "embedding's (first) and the LM head's (last) without a layer")
        if self.microbatch_group is not None:
            n, m = self.microbatch_group, self.microbatches
            if self.virtual_stages == 1:
                raise EstimatorError(f"parallelism.microbatch_group={n} orders an interleaved schedule's model chunks; "
                                     "it needs virtual_stages > 1")
            if not self.pp <= n <= m:
                raise EstimatorError(f"parallelism.microbatch_group={n} must lie in [pp, microbatches] = [{self.pp}, {m}] "
                                     "(Megatron-core's range for contiguous microbatches per model chunk)")
            if 0 < m % n < self.pp:
                raise EstimatorError(f"parallelism.microbatch_group={n}: the last group would hold {m % n} of the {m} "
                                     f"microbatches, fewer than pp={self.pp} (a dependency bubble Megatron-core refuses)")
        elif self.virtual_stages > 1:
            v = self.virtual_stages
            if self.microbatches % self.pp:
                raise EstimatorError(f"parallelism.virtual_stages={v}: the interleaved schedule needs the microbatches "
                                     f"({self.microbatches}) to be a multiple of pp={self.pp}")
        if self.cp > 1:
            if spec.fused != "te":
                raise EstimatorError(f"parallelism.cp={self.cp}: context parallelism runs through Transformer Engine's "
                                     f"attention; model {spec.name} needs model.fused_kernels=te")
            if spec.seq_len % (2 * self.cp):
                raise EstimatorError(f"parallelism.cp={self.cp}: seq_len {spec.seq_len} is not divisible by 2 x cp "
                                     "(Megatron-core splits each sequence into 2 x cp chunks)")
        if self.sequence_parallel and (spec.seq_len // self.cp) % self.tp:
            raise EstimatorError(f"parallelism.sequence_parallel: seq_len / cp = {spec.seq_len // self.cp} is not divisible by tp={self.tp}")
        if self.ep > 1 and not spec.experts:
            raise EstimatorError(f"parallelism.ep={self.ep}: model {spec.name} is dense (no experts); use ep=1")
        etp, ranks = self.expert_tp, self.tp * self.cp * self.dp
        if self.etp is not None and self.etp != self.tp:
            if not spec.experts:
                raise EstimatorError(f"parallelism.etp={self.etp}: model {spec.name} is dense (no experts); leave etp null")
            if spec.fused != "te":
                raise EstimatorError(f"parallelism.etp={self.etp}: an expert tensor-parallel degree other than tp is "
                                     f"Megatron-core's MoE layer; model {spec.name} needs model.fused_kernels=te")
            if self.tp > 1 and not self.sequence_parallel:
                raise EstimatorError(f"parallelism.etp={self.etp} with tp={self.tp} needs parallelism.sequence_parallel=true "
                                     "(Megatron-core requires sequence parallelism for MoE with tensor parallelism)")
        if spec.experts and spec.moe_ffn % etp:
            key = "moe_ffn_size" if spec.expert_ffn else "ffn_size"
            raise EstimatorError(f"parallelism.etp={etp}: model {spec.name} {key} {spec.moe_ffn} is not divisible by the "
                                 "experts' tensor-parallel degree")
        if spec.experts and not (etp == self.tp and self.cp == 1):
            self._fold_base()
        if (self.ep > 1 or etp != self.tp) and ranks % (etp * self.ep):
            hint = self._whole_experts_hint(spec)
            if etp == self.tp and self.cp == 1:
                raise EstimatorError(f"parallelism.ep={self.ep} must divide the data-parallel degree dp={self.dp} "
                                     f"(expert-parallel groups are made of data-parallel ranks){hint}")
            raise EstimatorError(f"parallelism: etp x ep = {etp} x {self.ep} must divide tp x cp x dp = {ranks} "
                                 f"(Megatron-core regroups a pipeline stage's ranks for the expert layers){hint}")
        self._check_modules(spec)
        if self.ep > 1 and spec.experts % self.ep:
            raise EstimatorError(f"parallelism.ep={self.ep}: model {spec.name} has {spec.experts} experts, not divisible by ep")

    def _whole_experts_hint(self, spec: TransformerSpec) -> str:
        """With etp unstated (= tp) and an ep that only fits when the experts are not tensor-split: say that etp=1 is
        the layout Megatron-core accepts. Megatron-core folds the expert groups over a stage's tp x cp x dp ranks and
        only needs world_size % (etp x ep x pp) == 0 (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
        megatron/core/parallel_state.py l.874-884); Megatron-Bridge's MoE recipes set expert_tensor_parallel_size = 1
        with tp > 1 (NVIDIA-NeMo/Megatron-Bridge@067f987df03b8355b03192d88d70f1709fedf51a
        src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py l.125-132: tp 2, pp 16, ep 64, etp 1). "" when
        etp was stated, tp is 1 or the etp=1 layout is refused too."""
        if self.etp is not None or self.tp == 1:
            return ""
        try:
            replace(self, etp=1).check(spec)
        except EstimatorError:
            return ""
        return (f"; with whole experts, parallelism.etp=1, etp x ep = {self.ep} divides tp x cp x dp = "
                f"{self.tp * self.cp * self.dp}, as Megatron-Bridge's MoE recipes run it")

    def _check_modules(self, spec: TransformerSpec) -> None:
        """Each of ``recompute_modules`` must be a module the model has (Megatron-core refuses mla_up_proj without
        multi-latent attention; a module the model lacks would recompute nothing)."""
        lacks = {"mla_up_proj": (not spec.mla, "has no multi-head latent attention (model.kv_lora_rank)"),
                 "moe": (not spec.experts, "has no experts"), "moe_act": (not spec.experts, "has no experts"),
                 "shared_experts": (not spec.shared_ffn, "has no shared expert (model.shared_expert_ffn_size)")}
        for name in self.recompute_modules or ():
            missing, why = lacks.get(name, (False, ""))
            if missing:
                raise EstimatorError(f"parallelism.recompute_modules: {name} is not in model {spec.name}, which {why}")
            if name != "core_attn" and spec.fused != "te":
                raise EstimatorError(f"parallelism.recompute_modules: {name} is a module of Megatron-core's Transformer "
                                     f"Engine layer; model {spec.name} needs model.fused_kernels=te (or recompute_modules "
                                     "[core_attn], which is recompute=selective)")


def schedule_chunks(microbatches: int, chunks: int, group: int) -> list[int]:
    """The model chunk of each of a stage's ``microbatches x chunks`` forward passes, in the order the
    interleaved schedule runs them (Megatron-core's ``get_schedule_table``): groups of ``group``
    contiguous microbatches pass through chunk 0, then chunk 1, ...; the last group holds the
    microbatches left. Backward passes run the same table with the chunks reversed."""
    out: list[int] = []
    for start in range(0, microbatches, group):
        size = microbatches - start if start + group >= microbatches else group
        out += [c for c in range(chunks) for _ in range(size)]
    return out


def _spread(layers: int, n: int) -> tuple[int, ...]:
    """``layers`` over ``n`` chunks: ``ceil(layers / n)`` each, the surplus taken one layer each from
    the first, the last, the second, the second-to-last chunk... (module docstring)."""
    each = -(-layers // n)
    counts = [each] * n
    ends = [i for pair in zip(range(n), reversed(range(n)), strict=True) for i in pair]
    for i in ends[: each * n - layers]:
        counts[i] -= 1
    return tuple(counts)


def layer_kinds(spec: TransformerSpec, layout: Layout) -> list[tuple[TransformerSpec, tuple[int, ...]]]:
    """Each kind of decoder layer with how many of it every pipeline stage holds: ``spec``'s own
    layer on every layer, or, with ``model.first_dense_layers`` k, the dense layer on the first k
    layers in Megatron-core's global chunk order (chunk ``j pp + i`` on stage ``i``) and the MoE
    layer on the rest."""
    stages = layout.stage_layers(spec.layers)
    if not spec.dense_layers:
        return [(spec, stages)]
    dense, left, pp = [0] * layout.pp, spec.dense_layers, layout.pp
    for j, n in enumerate(layout.chunk_layers(spec.layers)):
        take = min(n, left)
        dense[j % pp], left = dense[j % pp] + take, left - take
    return [(spec.dense_layer(), tuple(dense)), (spec, tuple(n - d for n, d in zip(stages, dense, strict=True)))]
