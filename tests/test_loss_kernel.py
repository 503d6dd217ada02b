"""The LM loss priced from the framework's kernel (``framework.loss_kernel``, estimator/parallel/loss.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import estimator
from estimator.compute.device import DeviceProfile
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.framework import Framework
from estimator.parallel.loss import LOSS_KERNELS, loss_times, pass_bytes


def test_bytes_per_logit_are_the_kernels_passes():
    # 16-bit logits: torch's fp32 cross-entropy = cast (2 + 4) + log_softmax (4 + 4) forward, zeroed
    # fp32 gradient (4) + log_softmax backward (4 + 4 + 4) + cast back (4 + 2): 36 bytes per logit
    assert (pass_bytes("torch_fp32", "forward", 2), pass_bytes("torch_fp32", "backward", 2)) == (14, 22)
    # Megatron's unfused vocabulary-parallel cross-entropy: cast, max, subtract, exp, sum, divide; scale, cast back
    assert (pass_bytes("megatron_fp32", "forward", 2), pass_bytes("megatron_fp32", "backward", 2)) == (38, 14)
    assert (pass_bytes("fused", "forward", 2), pass_bytes("fused", "backward", 2)) == (2, 4)
    # fp32 training: no casts, the fused kernel reads and writes 4-byte logits
    assert pass_bytes("torch_fp32", "forward", 4) + pass_bytes("torch_fp32", "backward", 4) == 24
    assert pass_bytes("megatron_fp32", "forward", 4) + pass_bytes("megatron_fp32", "backward", 4) == 40
    assert pass_bytes("fused", "forward", 4) + pass_bytes("fused", "backward", 4) == 12
    order = sorted(LOSS_KERNELS, key=lambda k: pass_bytes(k, "forward", 2) + pass_bytes(k, "backward", 2))
    assert order == ["fused", "torch_fp32", "megatron_fp32"]


def test_loss_time_is_memory_bound_on_the_logits():
    h100 = DeviceProfile.from_dict(estimator.resolve_config(["device=h100"])["device"])
    logits = 8192 * 128256  # one 8k sequence, Llama 3's vocabulary, tp 1
    f, b = loss_times("torch_fp32", logits, h100, "bf16")
    assert f + b == pytest.approx(logits * 36 / (3.35e12 * 0.83))
    f2, b2 = loss_times("torch_fp32", logits / 8, h100, "bf16")  # tp 8: 1/8 of the vocabulary per rank
    assert (f2, b2) == pytest.approx((f / 8, b / 8))
    fm, bm = loss_times("torch_fp32", logits, h100, "bf16", metric_passes=1)  # a training metric's forward
    assert (fm - f, bm) == pytest.approx((f, b))
    assert loss_times("fused", logits, h100, "fp8") == loss_times("fused", logits, h100, "bf16")  # head stays BF16


def llama1b(kernel: str, *extra: str, pp: int = 1):
    return estimate(estimator.resolve_config([
        "model=llama2_7b", "model.hidden_size=2048", "model.num_layers=16", "model.num_heads=16", "model.num_kv_heads=16",
        "model.ffn_size=5632", "model.vocab_size=128256", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=8",
        "precision=bf16", "parallelism.tp=1", f"parallelism.pp={pp}", "parallelism.micro_batch_size=4",
        "parallelism.global_batch=64", "model.seq_len=4096", "framework=fsdp", f"framework.loss_kernel={kernel}",
        "parallelism.zero=3", "parallelism.recompute=none", "model.fused_kernels=te", *extra])).metrics


def test_kernel_changes_a_small_model_with_a_large_vocabulary():
    fused, torch, mega = (llama1b(k)["iter_time_s"] for k in ("fused", "torch_fp32", "megatron_fp32"))
    assert fused < torch < mega
    assert torch / fused - 1 > 0.03  # 128k vocabulary, hidden 2048: the loss is a visible share of the step
    metric = llama1b("torch_fp32", "framework.loss_metric_passes=1")["iter_time_s"]
    assert torch < metric < mega


def test_loss_sits_on_the_last_pipeline_stage():
    fused, torch = (llama1b(k, pp=2) for k in ("fused", "torch_fp32"))
    assert fused["slowest_stage"] == torch["slowest_stage"] == 1  # the head and loss stage
    assert torch["iter_time_s"] > fused["iter_time_s"]


@pytest.mark.parametrize("key, value, needle", [
    ("loss_kernel", "apex", "framework.loss_kernel must be one of torch_fp32, megatron_fp32, fused"),
    ("loss_metric_passes", -1, "framework.loss_metric_passes must be a whole number >= 0"),
    ("loss_metric_passes", 1.5, "framework.loss_metric_passes must be a whole number >= 0"),
])
def test_bad_loss_settings_are_one_line_errors(key, value, needle):
    cfg = dict(estimator.resolve_config(["parallelism=hybrid", "framework=fsdp"])["framework"])
    cfg[key] = value
    with pytest.raises(EstimatorError, match=needle):
        Framework.from_cfg(cfg)


def test_cli_rejects_an_unknown_loss_kernel():
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", "model=llama3_8b", "parallelism=hybrid",
                          "system=dgx_h100", "framework.loss_kernel=liger"], capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "framework.loss_kernel must be one of" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_every_framework_preset_states_its_loss_kernel():
    for name in ("megatron", "deepspeed", "deepspeed_2021", "fsdp"):
        fw = Framework.from_cfg(estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])["framework"])
        assert fw.loss_kernel in LOSS_KERNELS and fw.loss_metric_passes >= 0
