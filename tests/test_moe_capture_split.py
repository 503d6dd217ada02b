"""The TE MoE layer captured in two halves (estimator.parallel.layer.capture_parts): the attention half once
per (tp, sp, cp, fp8), the MoE half per (etp, ep, sorts), spliced; it must equal the layer captured whole
at that (etp, ep, sorts) node for node, shapes included (the grouped GEMMs' input_shapes hold E / ep)."""

from __future__ import annotations

import dataclasses

import pytest

import estimator
from estimator.parallel import layer
from estimator.parallel.spec import TransformerSpec

FIELDS = ("id", "name", "deps", "op", "op_class", "phase", "flops", "mem_bytes", "weight_bytes", "input_shapes", "attrs",
          "scales_with_batch")
split = layer.capture_parts.__wrapped__.__wrapped__  # below lru_cache and disk_cached: a fresh capture


def spec(model: str, **change) -> TransformerSpec:
    m = dict(estimator.resolve_config([f"model={model}"])["model"])
    m.update(change)
    return TransformerSpec.from_cfg(m)


# (tp, sp, cp, fp8, etp, ep, sorts[, hybridep]): etp None = tp; ep 1 (no dispatcher metadata), one expert per rank (no
# sort), flex dispatcher (sorts False), experts' TP folded to 1
CASES = [
    ("deepseek_v3", {}, (2, True, 1, True, 1, 64, True)),
    ("deepseek_v3", {}, (4, True, 1, True, None, 8, False)),
    ("deepseek_v3", {}, (1, False, 1, False, None, 256, True)),
    ("qwen3_30b_a3b", {}, (1, False, 1, False, None, 1, True)),
    ("qwen3_30b_a3b", {}, (4, True, 1, True, 1, 16, True)),
    ("qwen3_30b_a3b", {}, (2, True, 2, False, None, 4, True)),
    # the unfused router and permutation (argsort / index_select, split + cat over ranks x local experts)
    ("qwen3_30b_a3b", {"moe_permute_fusion": False, "moe_router_fusion": True}, (2, True, 1, False, 1, 8, True)),
    # HybridEP (h90): its permute pads for FP8 (no Fp8Padding copies); fused into its dispatch / combine
    # (framework.moe_permute_fusion_into_hybridep): no permute / unpermute kernel either
    ("qwen3_30b_a3b", {}, (1, False, 1, "te_tensorwise", None, 16, False, "standalone")),
    ("qwen3_30b_a3b", {}, (1, False, 1, False, None, 16, False, "fused")),
]


@pytest.mark.parametrize(("model", "change", "args"), CASES)
def test_the_spliced_moe_layer_equals_the_whole_capture_node_for_node(model, change, args):
    s = spec(model, **change)
    whole = layer.capture_whole_layer(s, *args)
    parts = split(s, *args)
    new = parts["layer"]
    assert len(new.nodes) == len(whole.nodes)
    for a, b in zip(whole.nodes, new.nodes, strict=True):
        assert {f: getattr(a, f) for f in FIELDS} == {f: getattr(b, f) for f in FIELDS}, a.id
    assert new == whole  # name, params, forward FLOPs, meta (weight_bytes pairing) too
    grouped = [n for n in new.nodes if n.op == "te::grouped_linear" and n.phase == "forward"]
    assert grouped and all(n.input_shapes[1][0] == s.experts // args[5] for n in grouped)  # E / ep local experts


def test_a_search_over_ep_captures_the_shared_parts_once():
    s = spec("qwen3_30b_a3b", seq_len=512)
    layer._attention_half.cache_clear()
    layer._other_parts.cache_clear()
    per_ep = {ep: split(s, 2, True, 1, False, None, ep) for ep in (2, 4, 8)}
    assert layer._attention_half.cache_info().misses == 1 and layer._other_parts.cache_info().misses == 1
    assert len({p["layer"].params for p in per_ep.values()}) == 3  # the experts' weights differ per ep
    assert per_ep[2]["head"] == dataclasses.replace(per_ep[8]["head"], name=per_ep[2]["head"].name)
    assert per_ep[2]["head"].name != per_ep[8]["head"].name  # each keeps its capture's tag
