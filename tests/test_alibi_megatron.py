"""ALiBi in the Megatron-LM 2021 layer (``model.position_embedding=alibi``, BigScience's Megatron-DeepSpeed;
docs/research/h85-ds-pipe.md): the broadcast bias copied into every score matrix and read back by the QK^T GEMM, no
position weights, refused elsewhere."""

from __future__ import annotations

import pytest

import estimator
from estimator.compute.device import DeviceProfile
from estimator.errors import EstimatorError
from estimator.parallel.layer import capture_parts
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.step import part_times

GPT = ["model=megatron_gpt", "parallelism=hybrid", "precision=fp16", "system=dgx_a100", "model.hidden_size=1024",
       "model.num_layers=2", "model.num_heads=16", "model.ffn_size=4096", "model.vocab_size=50304", "model.seq_len=1024"]


def _spec(*extra):
    cfg = estimator.resolve_config([*GPT, *extra])
    return cfg, TransformerSpec.from_cfg(cfg["model"])


def test_alibi_adds_one_pass_over_the_score_matrix():
    cfg, learned = _spec()
    _, alibi = _spec("model.position_embedding=alibi")
    tp = 2
    ops = [(n.phase, n.op) for n in capture_parts(alibi, tp, False)["layer"].nodes]
    base = [(n.phase, n.op) for n in capture_parts(learned, tp, False)["layer"].nodes]
    extra = [op for op in ops if op not in base or ops.count(op) != base.count(op)]
    assert ("forward", "aten::add") in extra and not [op for op in extra if op[0] == "backward"]
    (add,) = [n for n in capture_parts(alibi, tp, False)["attention"].nodes if n.op == "aten::add"]
    scores = 16 // tp * 1024 * 1024  # one sequence: heads / tp score matrices of s x s
    assert add.input_shapes[0] == (16 // tp, 1024, 1024) and add.input_shapes[1] == (16 // tp, 1, 1024)
    assert add.mem_bytes >= 2 * scores * 2  # read and written (at least 16-bit)
    dev = DeviceProfile.from_dict(cfg["device"])
    a, b = (part_times(s, tp, False, 1, dev, "fp16", 1, "flash2") for s in (alibi, learned))
    assert a["layer"].fwd > b["layer"].fwd and a["layer"].bwd == b["layer"].bwd
    assert a["attention"].fwd > b["attention"].fwd  # selective recompute reruns it too
    assert alibi.embedding_params() == learned.embedding_params() - 1024 * 1024  # no position table


@pytest.mark.parametrize("extra", [("model.fused_kernels=none",), ("model.fused_kernels=te",)])
def test_alibi_only_in_the_megatron_gpt_layer(extra):
    with pytest.raises(EstimatorError, match="position_embedding=alibi is modelled with family gpt and "
                                             "model.fused_kernels=megatron only"):
        _spec(*extra, "model.position_embedding=alibi")
