"""Megatron's fused causal softmax eligibility by code version (``framework.fused_softmax``;
estimator/compute/megatron_softmax.py) and its fp32 torch fallback in the megatron layer (docs/research/h95-attn-shapes.md)."""

from __future__ import annotations

import pytest

import estimator
from estimator.compute.device import DeviceProfile
from estimator.compute.megatron_softmax import batch_per_block, fused_softmax_available
from estimator.errors import EstimatorError
from estimator.parallel.framework import Framework
from estimator.parallel.layer import capture_parts
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.step import part_times

SMALL = dict(name="small", family="gpt", hidden=256, layers=2, heads=4, kv_heads=4, ffn=1024, vocab=1024, seq_len=256,
             fused="megatron")


def test_batch_per_block_is_the_kernels():
    # scaled_masked_softmax.h get_batch_per_block: (128 / min(p2, 32)) warps x (2 rows if p2 <= 128 else 1)
    assert [batch_per_block(n) for n in (1, 2, 3, 4, 8, 12, 14, 16, 32, 64, 128, 129, 2048)] == \
        [256, 128, 64, 64, 32, 16, 16, 16, 8, 8, 8, 4, 4]


@pytest.mark.parametrize("b, heads, megatron, bigscience", [
    (4, 14, True, False),   # 14336 / 112 heads at tp 8, mbs 4: 56 batches; the fork's block from 14 heads is 16
    (4, 16, True, True),    # 128 heads: 64 % 16 == 0
    (4, 12, True, True),    # 96 heads, mbs 4: 48 % 16 == 0
    (1, 12, True, False),   # 96 heads, mbs 1: 12 % 16
    (2, 12, True, False),   # mbs 2: 24 % 16
    (4, 2, True, False),    # 16 heads: 8 % 128
    (4, 8, True, True),     # 64 heads: 32 % 32
    (4, 32, True, True),    # 256 heads: 128 % 8
    (1, 2, False, False),   # 2 batches: not a multiple of 4
])
def test_eligibility_at_seq_2048(b, heads, megatron, bigscience):
    assert fused_softmax_available("megatron", b, heads, 2048, 2048) is megatron
    assert fused_softmax_available("bigscience_2022", b, heads, 2048, 2048) is bigscience


def test_sequence_checks_and_short_rows():
    for rule in ("megatron", "bigscience_2022"):
        assert not fused_softmax_available(rule, 4, 16, 4096, 4096)  # sk <= 2048
        assert not fused_softmax_available(rule, 4, 16, 16, 16)  # 16 < s
        assert not fused_softmax_available(rule, 4, 16, 1026, 1026)  # s % 4
    # Megatron-LM: at sk <= 128 a block holds 8 rows, so b x np must divide by 8
    assert not fused_softmax_available("megatron", 1, 4, 64, 64) and fused_softmax_available("megatron", 2, 4, 64, 64)
    with pytest.raises(EstimatorError, match="framework.fused_softmax must be one of"):
        fused_softmax_available("apex", 1, 4, 64, 64)


def test_fallback_is_megatrons_fp32_torch_softmax():
    s = TransformerSpec(**SMALL)
    fused, torch_ = (capture_parts(s, 1, False, fused_softmax=f)["attention"] for f in (True, False))
    fwd = [(n.op, n.mem_bytes) for n in torch_.nodes if n.phase == "forward" and n.mem_bytes]
    n = s.heads * s.seq_len ** 2  # score elements of one sequence; capture units: 4 bytes for a 16-bit element
    ops = [op for op, _ in fwd]
    i = ops.index("aten::to")
    # cast up (2 + 4 real bytes: 4 + 8 in capture units), scale, mask in place, softmax in fp32, cast down
    assert ops[i:i + 2] == ["aten::to", "aten::mul"] and ops[-4:-2] == ["aten::softmax", "aten::to"]
    assert fwd[i][1] == 12 * n and fwd[i + 1][1] == 16 * n and fwd[-3][1] == 12 * n and dict(fwd)["aten::softmax"] == 16 * n
    assert "aten::masked_fill_" in ops and "megatron::scaled_upper_triang_masked_softmax" not in ops
    bwd = [n_.op for n_ in torch_.nodes if n_.phase == "backward" and n_.mem_bytes]
    assert bwd.count("aten::to") == 2 and "aten::_softmax_backward_data" in bwd
    assert sum(x.flops for x in fused.nodes) == sum(x.flops for x in torch_.nodes)
    assert sum(x.mem_bytes for x in torch_.nodes) > 2.5 * sum(x.mem_bytes for x in fused.nodes)
    assert torch_.name.endswith(".torch_softmax.attention") and not fused.name.endswith(".torch_softmax.attention")
    # only the megatron layer reads the flag
    eager = TransformerSpec(**{**SMALL, "fused": "none"})
    assert capture_parts(eager, 1, False, fused_softmax=False)["attention"].name == \
        capture_parts(eager, 1, False)["attention"].name


def test_part_times_pick_the_rule_by_micro_batch():
    cfg = estimator.resolve_config(["model=megatron_gpt", "parallelism=hybrid", "precision=fp16", "system=dgx_a100"])
    dev = DeviceProfile.from_dict(cfg["device"])
    s = TransformerSpec(**{**SMALL, "heads": 28, "kv_heads": 28, "hidden": 28 * 16})  # 14 heads per rank at tp 2
    meg, big = (part_times(s, 2, False, 4, dev, "fp16", softmax_rule=r) for r in ("megatron", "bigscience_2022"))
    assert big["attention"].fwd > 2 * meg["attention"].fwd and big["layer"].bwd > meg["layer"].bwd
    assert big["attention"].fwd_flops == meg["attention"].fwd_flops
    s16 = TransformerSpec(**{**SMALL, "heads": 32, "kv_heads": 32, "hidden": 32 * 16})  # 16 heads per rank: both fused
    assert part_times(s16, 2, False, 4, dev, "fp16", softmax_rule="bigscience_2022") == \
        part_times(s16, 2, False, 4, dev, "fp16", softmax_rule="megatron")


def test_framework_key():
    assert Framework.from_cfg(None).fused_softmax == "megatron"
    for name in ("megatron", "deepspeed", "deepspeed_2021", "fsdp", "internlm"):
        cfg = estimator.resolve_config(["model=megatron_gpt", "parallelism=hybrid", f"framework={name}"])
        assert Framework.from_cfg(cfg["framework"]).fused_softmax == "megatron"
    cfg = estimator.resolve_config(["model=megatron_gpt", "parallelism=hybrid", "framework=deepspeed",
                                    "framework.fused_softmax=bigscience_2022"])
    assert Framework.from_cfg(cfg["framework"]).fused_softmax == "bigscience_2022"
    with pytest.raises(EstimatorError, match="framework.fused_softmax must be one of"):
        Framework.from_cfg({**cfg["framework"], "fused_softmax": "apex"})
