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

# bytes per logit element (forward, backward) at 16-bit training, as the kernels' passes are counted in
# estimator/parallel/loss.py's docstring (reads + writes: 2-byte logits, 4-byte fp32 intermediates)
PASSES_16BIT = {
    "torch_fp32": (2 + 4 + 4 + 4, 4 + (4 + 4 + 4) + (4 + 2)),  # cast, log_softmax | zeroed grad, log_softmax bwd, cast
    "torch_bf16": (2 + 2, 2 + (2 + 2 + 2)),
    "megatron_fp32": ((2 + 4) + 4 + (4 + 4) + (4 + 4) + 4 + (4 + 4), (4 + 4) + (4 + 2)),  # cast max sub exp sum div | mul_, cast
    "megatron_fused": ((2 + 4) + (4 + 4) + (4 + 4), 4 + 2),
    "te_fused": (2 + (2 + 2), 2 + 2),
    "xentropy": (2 + 2, 2 + 2),
    "triton_fused": (2, 2 + 2),
}


def test_bytes_per_logit_are_the_kernels_passes():
    assert set(PASSES_16BIT) == set(LOSS_KERNELS)
    for kernel, (fwd, bwd) in PASSES_16BIT.items():
        assert (pass_bytes(kernel, "forward", 2), pass_bytes(kernel, "backward", 2)) == (fwd, bwd), kernel
    # fp32 training: the casts vanish (torch: 24 bytes, Megatron: 40); a fused kernel reads 4-byte logits
    assert pass_bytes("torch_fp32", "forward", 4) + pass_bytes("torch_fp32", "backward", 4) == 24
    assert pass_bytes("megatron_fp32", "forward", 4) + pass_bytes("megatron_fp32", "backward", 4) == 40
    assert pass_bytes("triton_fused", "forward", 4) + pass_bytes("triton_fused", "backward", 4) == 12
    total = {k: pass_bytes(k, "forward", 2) + pass_bytes(k, "backward", 2) for k in LOSS_KERNELS}
    assert max(total, key=total.get) == "megatron_fp32" and min(total, key=total.get) == "triton_fused"


def test_loss_time_is_memory_bound_on_the_logits():
    h100 = DeviceProfile.from_dict(estimator.resolve_config(["device=h100"])["device"])
    logits = 8192 * 128256  # one 8k sequence, Llama 3's vocabulary, tp 1
    f, b = loss_times("torch_fp32", logits, h100, "bf16")
    assert f + b == pytest.approx(logits * 36 / h100.memory_rate("softmax", "bf16"))  # 36: torch_fp32's bytes
    f2, b2 = loss_times("torch_fp32", logits / 8, h100, "bf16")  # tp 8: 1/8 of the vocabulary per rank
    assert (f2, b2) == pytest.approx((f / 8, b / 8))
    fm, bm = loss_times("torch_fp32", logits, h100, "bf16", metric_passes=1)  # a training metric's forward
    assert (fm - f, bm) == pytest.approx((f, b))
    assert loss_times("te_fused", logits, h100, "fp8") == loss_times("te_fused", logits, h100, "bf16")  # head stays BF16


def llama1b(kernel: str, *extra: str, pp: int = 1):
    return estimate(estimator.resolve_config([
        "model=llama2_7b", "model.hidden_size=2048", "model.num_layers=16", "model.num_heads=16", "model.num_kv_heads=16",
        "model.ffn_size=5632", "model.vocab_size=128256", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=8",
        "precision=bf16", "parallelism.tp=1", f"parallelism.pp={pp}", "parallelism.micro_batch_size=4",
        "parallelism.global_batch=64", "model.seq_len=4096", "framework=fsdp", f"framework.loss_kernel={kernel}",
        "parallelism.zero=3", "parallelism.recompute=none", "model.fused_kernels=te", *extra])).metrics


def test_kernel_changes_a_small_model_with_a_large_vocabulary():
    fused, torch, mega = (llama1b(k)["iter_time_s"] for k in ("triton_fused", "torch_fp32", "megatron_fp32"))
    assert fused < torch < mega
    assert torch / fused - 1 > 0.03  # 128k vocabulary, hidden 2048: the loss is a visible share of the step
    metric = llama1b("torch_fp32", "framework.loss_metric_passes=1")["iter_time_s"]
    assert torch < metric < mega
    # the step reports the loss it priced: one rank runs the whole step here, so the step grows by the loss's growth
    a, b = llama1b("triton_fused"), llama1b("torch_fp32")
    assert (a["loss_kernel"], b["loss_kernel"]) == ("triton_fused", "torch_fp32")
    assert b["loss_time_s"] / a["loss_time_s"] == pytest.approx(36 / 6)
    assert b["iter_time_s"] - a["iter_time_s"] == pytest.approx(b["loss_time_s"] - a["loss_time_s"], rel=1e-6)


def test_loss_sits_on_the_last_pipeline_stage():
    fused, torch = (llama1b(k, pp=2) for k in ("triton_fused", "torch_fp32"))
    assert fused["slowest_stage"] == torch["slowest_stage"] == 1  # the head and loss stage
    assert torch["iter_time_s"] > fused["iter_time_s"]


@pytest.mark.parametrize("key, value, needle", [
    ("loss_kernel", "apex", "framework.loss_kernel must be one of torch_fp32, torch_bf16, megatron_fp32, megatron_fused, te_fused, xentropy, triton_fused"),
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


# The loss kernel each validation run states, by its stack and version (docs/research/h41-loss-kernels.md gives
# the file and line of every answer); rows of other stacks take their framework preset's default.
STACK_KERNELS = (
    (r"^(nemo2407|nemo2407rm)-llama3-|^dgxc-(llama31|nemotron4)|^dgxc2501-|^dgxc2502-(nemotron4|llama31)|^dgxc2503-"
     r"|^dgxc2504-(llama31|nemotron4)|^mlperf41-gpt3-eos|^mlperf50-|^mlperf51-llama31-8b-cisco", "megatron_fused"),
    (r"^dgxc250502-|^dgxc2505(04)?-deepseek|^dgxc2508-deepseek|^mlperf51-llama31-8b-hpe|^mlperf60-|^mbridge", "te_fused"),
    (r"^(internlm|tinyllama|fa2211|mpt0723)-", "xentropy"),
    (r"^olmocore-(olmo-7b|olmo-13b|llama-8b)|^(olmocore16|titan25|trainy)-", "triton_fused"),
    # NeMo AutoModel's MaskedCrossEntropy(fp32_upcast=False) on the bf16 logits (NVIDIA-NeMo/Automodel@89e3a9fd
    # examples/benchmark/configs/{deepseek_v3,kimi_k2}_te_deepep.yaml; @8d9bfb90 qwen3_moe_30b_te_deepep.yaml)
    (r"^fms240[23]-|^automodel2510-|^automodel-qwen3-", "torch_bf16"),
    # metaseq's OPT-175B: --criterion vocab_parallel_cross_entropy, Megatron's unfused fp32 vocabulary-parallel loss
    # (facebookresearch/metaseq@f7ffa5fd metaseq/launcher/opt_baselines.py), under framework=fsdp
    (r"^opt-", "megatron_fp32"),
    # HF transformers' LlamaForCausalLM casts the logits to fp32 before torch's cross-entropy (FlagPerf's DeepSpeed
    # case: FlagOpen/FlagPerf@1b5a0303 training/nvidia/llama2_7b-deepspeed, validation/llm_rows.md "Blind round h99")
    (r"^flagperf-llama2-7b-ds-", "torch_fp32"),
)


def stated_kernel(row) -> str | None:
    import re

    if row.id.startswith("mpt-"):  # the sweep's flash-attn 1.x xentropy, or flash-attn 2's Triton loss with .[gpu-flash2]
        return "triton_fused" if "flash2" in row.raw["software"] else "xentropy"
    return next((k for pattern, k in STACK_KERNELS if re.search(pattern, row.id)), None)


def test_validation_rows_state_the_loss_kernel_of_their_stack():
    from pathlib import Path

    from estimator.validation import load_rows

    root = Path(__file__).resolve().parents[1] / "validation"
    folders = (root, root / "pending", *root.glob("blind_*"), *root.glob("blind_*/refused"))
    rows = [r for p in folders for r in load_rows(p) if r.kind == "llm"]
    assert len(rows) > 370
    for row in rows:
        ov = dict(o.split("=", 1) for o in row.raw["overrides"].split())
        assert ov.get("framework.loss_kernel") == stated_kernel(row), row.id
        # Composer (llm-foundry) recomputes LanguageCrossEntropy and Perplexity on every training microbatch
        assert ov.get("framework.loss_metric_passes") == ("2" if row.id.startswith("mpt") else None), row.id
    calibration = [r for r in rows if r.role == "calibration"]
    assert {stated_kernel(r) for r in calibration} == {"megatron_fused"}  # NeMo 24.09: cross_entropy_loss_fusion: true


def test_last_stage_holds_the_loss_backward_peak():
    from estimator.parallel.layout import Layout
    from estimator.parallel.memory import stage_memory
    from estimator.parallel.spec import TransformerSpec

    spec = TransformerSpec.from_cfg(estimator.resolve_config(["model=llama3_8b"])["model"])
    lay = Layout(2, 2, 2, 1, 1, 8, 1, True, "none")  # tp 2, pp 2
    cfg = dict(estimator.resolve_config(["parallelism=hybrid", "framework=megatron"])["framework"])
    kernels = ("megatron_fp32", "te_fused", "torch_fp32", "torch_bf16", "triton_fused")
    fws = [Framework.from_cfg({**cfg, "loss_kernel": k}) for k in kernels]
    logits = spec.seq_len * lay.micro_batch_size * spec.padded_vocab(2) / 2
    last = [stage_memory(spec, lay, 1, framework=fw)["activations"] for fw in fws]
    # fp32 softmax + the 16-bit gradient written beside it, against TE's 16-bit buffer overwritten in place
    assert last[0] - last[1] == pytest.approx((4 + 2 - 2) * logits)
    # torch's fp32 loss: its fp32 log-softmax, nll_loss backward's fp32 gradient and log_softmax backward's output
    assert last[2] - last[1] == pytest.approx((3 * 4 - 2) * logits)
    assert last[3] - last[1] == pytest.approx((3 * 2 - 2) * logits)  # the same three at 16 bits
    assert last[4] - last[1] == pytest.approx((2 + 2 - 2) * logits)  # the logits kept and a new gradient
    first = [stage_memory(spec, lay, 0, framework=fw)["activations"] for fw in fws]
    assert len(set(first)) == 1  # the loss sits on the last stage only
