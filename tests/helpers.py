"""Builders for small synthetic workloads used by several tests."""

from __future__ import annotations

from dataclasses import dataclass

from estimator.fabrics.base import CollectiveCost, Fabric, FabricConfig
from estimator.workloads.graph import Gradient, Node, Workload


def chain_workload(
    fwd: list[float], bwd: list[float], opt: float, grad_bytes: list[int], batch: int = 2
) -> Workload:
    """Forward ops, then backward ops (gradient i ready after backward op i), then one optimizer op.

    Durations are measured values (replayed by a ``replay`` device); FLOPs are 1e9 per second of
    duration so a roofline device can be used too.
    """
    nodes, prev = [], None
    nid = 0
    for phase, durs in (("forward", fwd), ("backward", bwd), ("optimizer", [opt])):
        for d in durs:
            nodes.append(
                Node(
                    id=nid,
                    name=f"{phase}{nid}",
                    deps=() if prev is None else (prev,),
                    op="aten::mm",
                    op_class="matmul",
                    phase=phase,
                    flops=d * 1e9,
                    duration_s=d,
                    scales_with_batch=phase != "optimizer",
                )
            )
            prev = nid
            nid += 1
    first_bwd = len(fwd)
    grads = tuple(
        Gradient(name=f"g{i}", nbytes=b, ready_node=first_bwd + i, order=i) for i, b in enumerate(grad_bytes)
    )
    return Workload(
        name="chain",
        nodes=tuple(nodes),
        source="test",
        batch_size=batch,
        capture_device="cpu",
        params=sum(grad_bytes) // 4,
        gradients=grads,
    ).validate()


@dataclass
class LinearConfig(FabricConfig):
    seconds_per_byte: float = 1e-9


class LinearFabric(Fabric):
    """All-reduce costs bytes * seconds_per_byte (test double for the plugin interface)."""

    name = "linear"
    Config = LinearConfig

    def algorithms(self, collective):
        return ("flat",)

    def collective_cost(self, collective, nbytes, algorithm="default", group_size=None):
        return CollectiveCost(collective, "flat", group_size or self.nodes, nbytes, nbytes * self.config.seconds_per_byte, 1)

    def p2p_time(self, src, dst, nbytes):
        return nbytes * self.config.seconds_per_byte


def linear_fabric(nodes=8, spb=1e-9):
    return LinearFabric.from_dict({"name": "linear", "nodes": nodes, "seconds_per_byte": spb})


def transformers_mixtral_params(spec) -> int:
    """Parameters of ``transformers``' Mixtral at a TransformerSpec's shapes, built on the meta device (the reference
    count for llama-family MoE presets); skips the test when torch is not installed."""
    import pytest

    torch = pytest.importorskip("torch")
    from transformers import MixtralConfig, MixtralForCausalLM

    with torch.device("meta"):
        hf = MixtralForCausalLM(MixtralConfig(
            hidden_size=spec.hidden, intermediate_size=spec.ffn, num_hidden_layers=spec.layers,
            num_attention_heads=spec.heads, num_key_value_heads=spec.kv_heads, num_local_experts=spec.experts,
            num_experts_per_tok=spec.top_k, vocab_size=spec.vocab))
    return sum(p.numel() for p in hf.parameters())


def transformers_qwen3_moe_params(spec) -> int:
    """Parameters of ``transformers``' Qwen3-MoE at a TransformerSpec's shapes (the first ``spec.dense_layers`` layers
    dense of ``ffn_size`` (``mlp_only_layers``), the rest MoE of ``moe_ffn``; untied output layer),
    built on the meta device, minus the per-head q/k RMSNorm weights (2 x head_dim per layer) unless the spec has them
    (``model.qk_norm``): the reference count for Qwen3-MoE presets; skips the test when torch is not installed."""
    import pytest

    torch = pytest.importorskip("torch")
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    with torch.device("meta"):
        hf = Qwen3MoeForCausalLM(Qwen3MoeConfig(
            hidden_size=spec.hidden, intermediate_size=spec.ffn, moe_intermediate_size=spec.moe_ffn,
            num_hidden_layers=spec.layers, num_attention_heads=spec.heads, num_key_value_heads=spec.kv_heads,
            head_dim=spec.head_dim, num_experts=spec.experts, num_experts_per_tok=spec.top_k, vocab_size=spec.vocab,
            tie_word_embeddings=False, decoder_sparse_step=1, mlp_only_layers=list(range(spec.dense_layers))))
    return sum(p.numel() for p in hf.parameters()) - (0 if spec.qk_norm else spec.layers * 2 * spec.head_dim)
