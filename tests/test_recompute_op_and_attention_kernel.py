"""torchtitan's per-op selective checkpointing (``parallelism.recompute=op``, estimator/parallel/sac.py) and the
framework's fused-attention kernel (``framework.attention_kernel``, estimator/compute/device.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import estimator
from estimator.compute.device import DeviceProfile
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.sac import recomputed_gemm_fraction, saved_bytes_per_token
from estimator.parallel.spec import TransformerSpec
from estimator.validation import load_rows
from tests.blind_checks import document

VALIDATION = Path(__file__).resolve().parents[1] / "validation"


def spec(model):
    return TransformerSpec.from_cfg(estimator.resolve_config([f"model={model}"])["model"])


def device_cfg(name: str) -> dict:
    return estimator.resolve_config([f"device={name}"])["device"]


def profile(name: str) -> DeviceProfile:
    return DeviceProfile.from_dict(device_cfg(name))


def efficiencies(*names: str) -> dict:
    """compute_efficiency tables of the named device presets."""
    return {d: device_cfg(d)["compute_efficiency"] for d in names}


def llama8b(*extra, rc="op", n=8):
    return estimate(estimator.resolve_config([
        "model=llama3_8b", "parallelism=hybrid", "system=dgx_h100", f"fabric.nodes={n}", "precision=bf16",
        "parallelism.tp=1", "parallelism.pp=1", "parallelism.micro_batch_size=1", f"parallelism.global_batch={n}",
        "framework=fsdp", "parallelism.zero=3", f"parallelism.recompute={rc}", *extra]))


def test_every_second_gemm_is_recomputed():
    s = spec("llama3_8b")  # h 4096, 8 KV heads of 128, SwiGLU ffn 14336
    h, kv, f = 4096, 1024, 14336
    wq, wk, wv, wo, w1, w3, w2 = h * h, h * kv, h * kv, h * h, h * f, h * f, h * f
    assert recomputed_gemm_fraction(s, 1) == pytest.approx((wk + wo + w3) / (wq + wk + wv + wo + w1 + w3 + w2))
    assert recomputed_gemm_fraction(s, 1) == pytest.approx(0.3654, abs=1e-4)
    # TP narrows every GEMM by tp (the KV ones to max(1, kv_heads / tp) heads): at tp 8 one KV head per rank
    assert recomputed_gemm_fraction(s, 8) == pytest.approx((wk + wo + w3) / (wq + wk + wv + wo + w1 + w3 + w2))
    # block input, wq and wv outputs, attention output, w1's output: 2 bytes each
    assert saved_bytes_per_token(s, 1, False) == 2 * (h + h + kv + h + f)
    assert saved_bytes_per_token(s, 8, True) == 2 * (h / 8 + h / 8 + 128 + h / 8 + f / 8)


def test_op_sits_between_selective_and_full():
    sel, op, full = (llama8b(rc=rc) for rc in ("selective", "op", "full"))
    t = [r.metrics["iter_time_s"] for r in (sel, op, full)]
    mem = [r.metrics["memory_total_bytes"] for r in (sel, op, full)]
    assert t[0] < t[1] < t[2]
    assert mem[0] > mem[1] > mem[2]


def test_op_repeats_the_sequence_all_gathers_under_tensor_parallelism():
    base = ["parallelism.tp=8", "parallelism.sequence_parallel=true"]
    sel = llama8b(*base, rc="selective", n=64)
    op = llama8b(*base, rc="op", n=64)

    def gathers(r):
        return sum(c["count_per_step"] for c in r.collectives if c["group"] == "tp" and c["collective"] == "all_gather")

    def scatters(r):
        return sum(c["count_per_step"] for c in r.collectives if c["group"] == "tp" and c["collective"] == "reduce_scatter")

    layers_x_mb = spec("llama3_8b").layers * sel.metrics["microbatches"]
    assert gathers(op) - gathers(sel) == 2 * layers_x_mb  # the recompute's two all-gathers per layer
    assert scatters(op) == scatters(sel)  # reduce-scatter outputs are saved
    assert op.metrics["tp_comm_time_s"] > sel.metrics["tp_comm_time_s"]


def test_op_refuses_moe_layers():
    with pytest.raises(EstimatorError, match="dense layers of ordinary attention only"):
        estimate(estimator.resolve_config([
            "model=mixtral_8x7b", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=64", "precision=bf16",
            "parallelism.tp=1", "parallelism.pp=4", "parallelism.ep=8", "parallelism.recompute=op"]))


def test_attention_kernel_prices_the_fused_attention_op_only():
    cudnn = llama8b("framework.attention_kernel=cudnn", rc="selective")
    flash2 = llama8b(rc="selective")  # fsdp's preset: flash2
    assert estimator.resolve_config(["parallelism=hybrid", "framework=fsdp"])["framework"]["attention_kernel"] == "flash2"
    assert estimator.resolve_config(["parallelism=hybrid", "framework=megatron"])["framework"]["attention_kernel"] == "cudnn"
    assert flash2.metrics["iter_time_s"] > cudnn.metrics["iter_time_s"]
    # the eager layer has no fused attention op: the kernel changes nothing
    eager = [llama8b("model.fused_kernels=none", "model.seq_len=1024", f"framework.attention_kernel={k}", rc="full")
             for k in ("cudnn", "flash2")]
    assert eager[0].metrics["iter_time_s"] == eager[1].metrics["iter_time_s"]


def test_attention_kernel_efficiency_lookup_and_fallback():
    cfg = device_cfg("h100")
    h100 = DeviceProfile.from_dict(cfg)
    cudnn, flash2 = (cfg["compute_efficiency"]["bf16"][k] for k in ("attention", "attention_flash2"))
    assert flash2 < cudnn  # FA2 below cuDNN on H100 (the FA3 paper's bars; conf/device/h100.yaml)
    assert h100.efficiency("compute_efficiency", "attention", "bf16") == cudnn
    assert h100.efficiency("compute_efficiency", "attention_flash2", "bf16") == flash2
    assert h100.efficiency("compute_efficiency", "attention_flash2", "fp8") == flash2  # attention stays bf16 under fp8
    a100 = profile("a100")  # no cuDNN attention entry
    assert a100.efficiency("compute_efficiency", "attention", "bf16") == a100.efficiency(
        "compute_efficiency", "matmul", "bf16")
    v100 = profile("v100")  # no attention entries
    assert v100.efficiency("compute_efficiency", "attention_flash2", "fp16") == v100.efficiency(
        "compute_efficiency", "matmul", "fp16")


def test_unknown_attention_kernel_is_a_one_line_error():
    with pytest.raises(EstimatorError, match="framework.attention_kernel must be one of cudnn, flash2, flash1, triton"):
        llama8b("framework.attention_kernel=flash9")


def test_triton_kernel_rates_come_from_flash_attentions_charts():
    """llm-foundry's ``attn_impl: triton``: A100 measured (78 TFLOPS of 312, causal, head dim 128, 8k); H100 is
    FlashAttention-2's H100 rate scaled by the A100 ratio Triton / FA2 (78 / 182) (conf/device/*.yaml)."""
    eff = efficiencies("a100", "h100", "h200")
    assert eff["a100"]["bf16"]["attention_triton"] == eff["a100"]["fp16"]["attention_triton"] == round(78 / 312, 3)
    for d in ("h100", "h200"):
        assert eff[d]["bf16"]["attention_triton"] == round(eff[d]["bf16"]["attention_flash2"] * 78 / 182, 3)
    v100 = profile("v100")  # no entry: matmul's
    assert v100.efficiency("compute_efficiency", "attention_triton", "fp16") == v100.efficiency(
        "compute_efficiency", "matmul", "fp16")


def test_flash_attention_rates_are_the_charts_bars():
    """FlashAttention-2's release README: A100 (causal, head dim 128, 8k, fwd+bwd) FA2 182 and FA1 80 TFLOPS of 312;
    H100 FA1 135 TFLOPS of 989 (conf/device/*.yaml)."""
    eff = efficiencies("a100", "h100", "h200")
    for prec in ("bf16", "fp16"):
        assert eff["a100"][prec]["attention_flash2"] == round(182 / 312, 3)
        assert eff["a100"][prec]["attention_flash1"] == round(80 / 312, 3)
    assert eff["h100"]["bf16"]["attention_flash1"] == eff["h200"]["bf16"]["attention_flash1"] == round(135 / 989, 3)
    # the kernels' order on both GPUs: FA1 and Triton alike, FA2 about twice as fast
    for d in ("a100", "h100"):
        e = eff[d]["bf16"]
        assert e["attention_flash2"] > 2 * max(e["attention_flash1"], e["attention_triton"])


def test_triton_attention_is_slower_than_flash2_and_grows_with_the_sequence():
    def step(kernel, seq):
        return llama8b(f"framework.attention_kernel={kernel}", f"model.seq_len={seq}", rc="full").metrics["iter_time_s"]
    short, long = (step("triton", s) / step("flash2", s) for s in (2048, 16384))
    assert 1.0 < short < long  # the attention's share of the step grows with the sequence


# llm-foundry's benchmark README by version: the tables of scripts/train/benchmarking/ ran attn_impl triton (the submit
# script's default when they were measured); the two earlier versions (Dec 2022 llm/throughput/, Feb 2023
# examples/llm/throughput/; round h40) ran attn_impl flash = flash-attn 0.2.x's FlashMHA, FlashAttention-1, and so did
# the Dec 2022 full sweep llm/throughput/FULL_TABLES.md (round h41: 17 rows). Round h41 added 11 rows of the
# benchmarking README (7 of the April-2023 A100 80GB table, 4 H100 lines): 54 -> 65.
FOUNDRY_KERNELS = {"mosaicml/llm-foundry:scripts/train/benchmarking/README.md": ("triton", 65),
                   "mosaicml/llm-foundry:llm/throughput/README.md": ("flash1", 14),
                   "mosaicml/llm-foundry:examples/llm/throughput/README.md": ("flash1", 7),
                   "mosaicml/llm-foundry:llm/throughput/FULL_TABLES.md": ("flash1", 17)}


def test_llm_foundry_rows_run_their_readme_versions_kernel():
    """Every row from llm-foundry's benchmark tables states the kernel its README version ran -- triton for the
    scripts/train/benchmarking tables, flash1 for the 2022-2023 throughput READMEs and the Dec 2022 FULL_TABLES.md --
    and prices it as such."""
    rows = [r for r in load_rows(VALIDATION) if r.kind == "llm" and "mosaicml/llm-foundry" in r.source]
    for doc, (kernel, at_least) in FOUNDRY_KERNELS.items():
        of_doc = [r for r in rows if document(r) == doc]
        assert len(of_doc) >= at_least, doc
        for r in of_doc:
            assert f"framework.attention_kernel={kernel}" in r.raw["overrides"].split(), r.id
    assert {document(r) for r in rows} == set(FOUNDRY_KERNELS)
