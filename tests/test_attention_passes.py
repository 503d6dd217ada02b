"""FlashAttention-2 priced by pass and mask (device.attention_passes) and PyTorch ring attention's causal share
(docs/research/h100-cp-attn.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

import estimator
from estimator.compute.device import DeviceProfile, attention_pass_efficiency
from estimator.errors import EstimatorError
from estimator.parallel.layout import Layout
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.step import attention_causal_share, part_times

H100_SXM_BF16 = 989e12  # the fractions' denominator (conf/device/h100.yaml)


def device(name="h100"):
    return DeviceProfile.from_dict(dict(estimator.resolve_config([f"device={name}"])["device"]))


def spec(model="llama3_8b", **kw):
    return replace(TransformerSpec.from_cfg(estimator.resolve_config([f"model={model}"])["model"]), **kw)


def test_h100_flash2_passes_are_the_fa3_papers_fa2_bars():
    """FA3 paper (arXiv 2407.08608) Figs. 5c / 5d / 6, FA2 at head dim 128, 16k: 370 unmasked forward, 335 causal
    forward, 322 backward (TFLOPS on 989); and they agree with FA2's own README chart (fwd+bwd 338 / 328 at 16k)."""
    passes = dict((k, p) for k, *p in device().attention_passes)["flash2"]
    causal, unmasked, backward = (round(f * H100_SXM_BF16 / 1e12) for f in passes)
    assert (causal, unmasked, backward) == (335, 370, 322)
    for fwd, chart in ((passes[1], 338), (passes[0], 328)):  # fwd+bwd as the chart counts it: 3.5 / (1/fwd + 2.5/bwd)
        both = 3.5 / (1 / fwd + 2.5 / passes[2]) * H100_SXM_BF16 / 1e12
        assert 0.985 * chart < both < chart
    # inherited by the Grand Teton part and H200; the A100 keeps its one value
    assert device("h100_gt").attention_passes == device("h200").attention_passes == device().attention_passes
    assert device("a100").attention_passes == ()


def test_pass_efficiency_mixes_causal_and_unmasked_forward_by_time():
    p = (0.3, 0.4, 0.25)
    assert attention_pass_efficiency(p, "backward", 0.5) == 0.25
    assert attention_pass_efficiency(p, "forward", 1.0) == pytest.approx(0.3)
    assert attention_pass_efficiency(p, "forward", 0.0) == pytest.approx(0.4)
    # one causal step of four: time = FLOPs x (1/4 / 0.3 + 3/4 / 0.4)
    assert attention_pass_efficiency(p, "forward", 0.25) == pytest.approx(1 / (0.25 / 0.3 + 0.75 / 0.4))
    with pytest.raises(EstimatorError, match="causal_share"):
        attention_pass_efficiency(p, "forward", 1.5)


def test_torch_ring_runs_one_causal_step_of_cp():
    """_templated_ring_attention: step 0 causal (2c x 2c), every later step unmasked with the same FLOPs."""
    base = Layout(tp=1, pp=1, dp=1, ep=1, micro_batch_size=1, microbatches=1, zero=3, sequence_parallel=False,
                  recompute="full", cp=8, cp_comm="torch")
    assert attention_causal_share(base) == 1 / 8
    assert attention_causal_share(replace(base, cp_comm="torch_alltoall", cp=4)) == 1 / 4
    assert attention_causal_share(replace(base, cp_comm="ring")) == 1.0  # TE's ring: not read here
    assert attention_causal_share(replace(base, cp=1)) == 1.0


def test_part_times_price_flash2_attention_by_pass():
    h100, s = device(), spec(seq_len=262144)
    peak = h100.peak_flops_bf16
    causal, unmasked, backward = dict((k, p) for k, *p in h100.attention_passes)["flash2"]
    ring = part_times(s, 1, False, 1, h100, "fp8", 8, "flash2", causal_share=1 / 8)["attention"]
    one_call = part_times(s, 1, False, 1, h100, "fp8", 8, "flash2")["attention"]
    mixed = 1 / (1 / 8 / causal + 7 / 8 / unmasked)
    # the core attention part is the flash kernel plus small memory-bound ops: its rate sits just under the kernel's
    assert 0.97 * mixed * peak < ring.fwd_flops / ring.fwd <= mixed * peak
    assert 0.97 * backward * peak < ring.bwd_flops / ring.bwd <= backward * peak
    assert 0.97 * causal * peak < one_call.fwd_flops / one_call.fwd <= causal * peak
    assert ring.bwd == one_call.bwd and ring.fwd < one_call.fwd
    # cuDNN (TE) has no pass split on H100: the flat attention value, whatever the share
    assert part_times(s, 1, False, 1, h100, "fp8", 8, "cudnn", causal_share=1 / 8) == \
        part_times(s, 1, False, 1, h100, "fp8", 8, "cudnn")


@pytest.mark.parametrize("passes, match", [
    ({"flash3": {"forward_causal": 0.3, "forward": 0.3, "backward": 0.3}}, "unknown kernel"),
    ({"flash2": {"forward": 0.3, "backward": 0.3}}, "exactly forward_causal, forward, backward"),
    ({"flash2": {"forward_causal": 0.3, "forward": 1.3, "backward": 0.3}}, r"must be in \(0, 1\]"),
    (0.3, "must map a kernel"),
])
def test_bad_attention_passes_are_refused(passes, match):
    data = dict(estimator.resolve_config(["device=h100"])["device"])
    data["attention_passes"] = passes
    with pytest.raises(EstimatorError, match=match):
        DeviceProfile.from_dict(data)
