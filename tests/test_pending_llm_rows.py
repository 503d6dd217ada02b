"""The held-out large-model rows (issue #23 item 7) where they live now, the rows added blind from
NVIDIA's performance tables (h28), and the published layouts the model refuses.

The 38 rows were staged in validation/pending/ while the large-model features were built and then
moved into validation/llm.csv (commit 064ef7e), where ``estimator validate`` predicts them and
tests/test_validation_suite.py pins their errors. Published runs that need more memory than an H100
has under the model (Llama 3 405B on 8,192 GPUs; Mixtral 8x7B and Nemotron-4 340B from NVIDIA's tables;
Qwen3-30B-A3B from Megatron-Bridge's 25.11 table, blind round h35; Qwen3-235B-A22B from the same archive and
NeMo AutoModel's Qwen3-30B-A3B, blind round h36; the 25.09 token-drop Qwen3-30B-A3B, blind round h41) sit in
validation/pending/llm_refused.csv
(``estimator validate`` reads no sub-folder). These tests check, without pricing a step unless said: the
coverage issue #23 asks for, every row's layout and overrides, the step-time conversions written in
``measured_what``, the same-source rule against every calibration row, that every published layout is
accepted and fits, and that each refused row stays refused for its stated
reason (a model change that accepts it fails here and must move the row into validation/llm.csv).
Where each number comes from: validation/llm_rows.md.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.validation import load_rows, predict
from estimator.validation import rows as rows_module
from estimator.validation.llm import (
    COLUMNS,
    megatron_flops,
    palm_flops,
    shares_source,
    source_keys,
)
from estimator.validation.predict import base_overrides
from tests.blind_checks import MOE_ROUTER_KEYS

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
PENDING = VALIDATION / "pending"
REFUSED_FILE = PENDING / "llm_refused.csv"
ROWS_DOC = VALIDATION / "llm_rows.md"
# The held-out runs moved in by 064ef7e, by id prefix (the other llm rows are Megatron-LM SC21 Table 1,
# GPT-3 175B and the NeMo Llama 3.1 8B/70B calibration set).
HELD_OUT_PREFIXES = ("llama3-", "nemotron4-", "mlperf31-", "dgxc-gpt3-", "dgxc-llama31-405b-", "dgxc-nemotron4-",
                     "narayanan21-t2-", "mtnlg-")
# What a held-out row's overrides may set: published layout, recipe and model-shape facts (never a
# measured or fitted value such as an efficiency or a bandwidth).
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "parallelism.zero", "parallelism.virtual_stages", "parallelism.recompute",
                "parallelism.sequence_parallel", "parallelism.dp_overlap", "parallelism.fp32_grads",
                "parallelism.cp_comm", "parallelism.ep", "framework.tp_comm_overlap", "fabric.nvls", "model.hidden_size",
                # the recipe's expert tensor-parallel degree (Megatron-core's expert_tensor_parallel_size; round h36's
                # refused Qwen3-235B-A22B rows: ETP 1 with TP 2)
                "parallelism.etp",
                # the recipe's attention backend (dgxc-benchmarking's NVTE_FUSED_ATTN=0: TE runs FlashAttention-2)
                "framework.attention_kernel",
                # the recipe's Adam state dtype (NeMo optim.dtype: bf16 for distributed_fused_adam)
                "framework.optimizer_state",
                # the recipe's MoE token dispatcher and EP all-to-all overlap (Megatron-core's flex dispatcher backend,
                # overlap_moe_expert_parallel_comm; estimator/parallel/moe_comm.py)
                "framework.moe_dispatcher", "framework.moe_a2a_overlap",
                "model.num_layers", "model.num_heads", "model.ffn_size", "model.num_kv_heads", "model.vocab_size",
                "model.fused_kernels", "model.dropout",
                # the GPU variant's datasheet capacity and bandwidth where the source states a non-standard part
                # (torchtitan's Grand Teton H100s: 96 GB HBM2e at 2.4 TB/s): hardware facts, not measurements
                "device.memory_bytes", "device.mem_bw_Bps",
                # round h48's refused DeepSeek-V3 rows: the recipe's stage split, recomputed modules and MTP depth
                "parallelism.first_stage_layers", "parallelism.last_stage_layers", "parallelism.recompute_modules",
                "model.mtp_layers"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED_KEYS |= {"parallelism.schedule", "framework.moe_dispatch_fp8"}  # twenty-third stop (h89): DeepSeek-V3's DualPipe and FP8 dispatch, stated by its report
DEFAULT_FRAMEWORK = "megatron"  # a row that names no framework (DeepSeek's HAI-LLM, unstated) runs the default
DERIVATION = re.compile(r"tokens/s per GPU = (\d+) x (\d+) / \((\d+(?:\.\d+)?) s x (\d+)\) = (\d+(?:\.\d+)?)")

ALL_ROWS = load_rows(VALIDATION)
# A later row that shares a prefix but is not one of the 38 staged ones (round h31, not blind: llm_rows.md, "Round h31")
LATER = ("mlperf31-gpt3-eos-512gpu", "mlperf31-gpt3-eos-768gpu",  # the second: blind round h34
         "llama3-405b-8192gpu-tp8pp16dp64")  # refused until h83 (FITS_SINCE_H83), moved in at the twenty-second stop
HELD_OUT = [r for r in ALL_ROWS if r.kind == "llm" and r.id.startswith(HELD_OUT_PREFIXES) and r.id not in LATER]
# Rows added blind from NVIDIA's published performance tables (h28, issue #23 item 7; llm_rows.md, "NVIDIA
# performance tables"): Megatron-Bridge's archive (H100 Llama 3 70B / 3.1 405B) and more lines of the NeMo 24.07
# table, and the Mixtral 8x7B runs (Megatron-LM's MoE README; refused on memory by the eager MoE layer until
# model.fused_kernels=te covered MoE, a change made after the refusal was seen: llm_rows.md); NeMo's
# Nemotron-4 340B line is in the refused file.
TABLE_PREFIXES = ("mbridge2511-", "mbridge2606-", "mbridge260401-", "nemo2407-gpt3-", "nemo2407-llama2-", "mcore0")  # round h28 (h30: test_blind_h30_rows.py)
# Later rows that share a prefix: round h31's 405B line (test_blind_h31_rows.py), blind round h35's Qwen3-30B-A3B
# line (test_blind_h35_moe_rows.py) and blind round h36's 26.06 Qwen3-30B-A3B and 25.11 / 26.04.01 Qwen3-235B-A22B
# lines (test_blind_h36_moe_rows.py).
TABLE_LATER = ("mbridge260401-llama31-405b-fp8-1024gpu", "mbridge260401-qwen3-30b-a3b-fp8-16gpu",
               "mbridge2606-qwen3-30b-a3b-fp8-16gpu", "mbridge2511-qwen3-235b-a22b-fp8-256gpu",
               "mbridge260401-qwen3-235b-a22b-fp8-256gpu", "mbridge2511-qwen3-30b-a3b-fp8-16gpu")  # the last: FITS_SINCE_H53
TABLE_ROWS = [r for r in ALL_ROWS if r.kind == "llm" and r.id.startswith(TABLE_PREFIXES) and r.id not in TABLE_LATER]
REFUSED_ROWS = load_rows(PENDING)  # every model a row names exists (an unknown one is a load error)
# The rows whose published layout the model refuses, and why (validation/llm_rows.md, "Refused"):
# Llama 3 405B on 8,192 GPUs holds 32 microbatches, so the interleaved warm-up keeps 141 one-layer
# chunks on stage 1; Meta's own schedule (Dubey et al. 2024 Sec. 3.3.2, Fig. 6) tunes the number N of
# consecutive microbatches per chunk, and N is not published.
# Megatron-Bridge 25.11's Qwen3-30B-A3B on 16 H100 (blind round h35; llm_rows.md, "round h35 (mixture of experts)")
# interleaves 24 one-layer chunks per rank at MBS 2: stage 1 holds 50.9 GB of activations under the model (59.6
# before the MoE layer's activations kept TE's FP8 inputs, 441654e).
REFUSED = {"llama3-405b-8192gpu-tp8pp16dp64": r"needs 82\.\d GB per GPU on pipeline stage 1",
           # 81.7 GB since the last stage keeps what Transformer Engine's loss keeps (the 16-bit logits, not fp32): 84.1 before
           "mbridge2511-qwen3-30b-a3b-fp8-16gpu": r"needs 81\.\d GB per GPU on pipeline stage 1"}
# The device memory each refused row states (GB) and a capacity that lets its layout fit.
REFUSED_DEVICE = {"llama3-405b-8192gpu-tp8pp16dp64": ("80.0", "84e9"),
                  "mbridge2511-qwen3-30b-a3b-fp8-16gpu": ("80.0", "86e9")}
# Blind round h36 (llm_rows.md, "round h36 (mixture of experts)"): the round's three Qwen3-235B-A22B rows (refused at
# 80.4 GB) fit since the MoE layer's activations keep TE's FP8 inputs (441654e), and NeMo AutoModel's Qwen3-30B-A3B on
# 8 H100 (84.6 GB with fp32 Adam state) since it states its torch Adam on bf16 parameters (thirteenth stop): in llm.csv.
# Blind round h41 (llm_rows.md, "round h41 (NVIDIA release tables ...)"): Megatron-Bridge 25.09's token-drop
# Qwen3-30B-A3B on 16 H100 has the layout of round h35's 25.11 row (PP 2, VP 24, EP 8, MBS 2): refused at 84.1 GB too.
REFUSED |= {"mbridge2509-qwen3-30b-a3b-fp8-16gpu-tokendrop": r"needs 81\.\d GB per GPU on pipeline stage 1"}  # as above
REFUSED_DEVICE |= {"mbridge2509-qwen3-30b-a3b-fp8-16gpu-tokendrop": ("80.0", "86e9")}
# Blind round h48 (llm_rows.md, "round h48 (DeepSeek-V3 on H100 and H800)"): DeepSeek-V3 on 512 H100 (dgxc v25.05.04)
# needs 84.1 GB on stage 1 (activations 52.4 GB of it). Round h48 blamed an 8-byte Adam state; the thirteenth stop read
# the run's code path and found fp32 state (12 bytes: NeMo@7a8f1cc7 sets only use_precision_aware_optimizer, whose
# dtypes default to fp32 in Megatron-core@7094270c), so the over-estimate is the memory model's and unexplained. The
# DeepSeek-V3 report's 2,048 H800 run (DualPipe, not expressible) holds 94.0 GB on stage 2 as 1F1B, 81.3 GB of it
# activations (95.4 GB before it stated the report's BF16 Adam moments, framework.optimizer_state=bf16_moments).
REFUSED |= {"dgxc250504-deepseek-v3-bf16-512gpu": r"needs 84\.\d GB per GPU on pipeline stage 1",
            "deepseek24-v3-h800-fp8-2048gpu": r"needs 94\.\d GB per GPU on pipeline stage 2"}
REFUSED_DEVICE |= {"dgxc250504-deepseek-v3-bf16-512gpu": ("80.0", "90e9"),
                   "deepseek24-v3-h800-fp8-2048gpu": ("80.0", "100e9")}
# Round h53 (docs/research/h53-moe-memory.md) read what Megatron-core's MoE layer keeps: the combine's unpermute keeps
# nothing (the probabilities are applied in the experts' activation since core 0.12), no dropout mask without dropout,
# a shared expert's fc1 keeps the router's tensor. These four rows fit now, at the GB below on the stage named (the
# stated capacity is 80.0 GB for each): they moved from llm_refused.csv to validation/llm.csv (fifteenth stop).
# The DeepSeek-V3 rows need 0.2 / 0.7 GB more since the twentieth stop counts the one layer recomputed in its backward
# (memory.recomputed_bytes; the Qwen3 rows recompute nothing). The Qwen3 rows need 71.9 GB since their q/k RMSNorms keep their inputs and 1/rms (model.qk_norm, round h61): 68.3 before.
FITS_SINCE_H53 = {"mbridge2511-qwen3-30b-a3b-fp8-16gpu": ("71.9", 1),
                  "mbridge2509-qwen3-30b-a3b-fp8-16gpu-tokendrop": ("71.9", 1),
                  "dgxc250504-deepseek-v3-bf16-512gpu": ("68.7", 1),
                  # DualPipe since the twenty-third stop (h89): each rank holds two stages' weights and (pp + 1) / 2
                  # microbatches of their activations, 84.1 GB on rank 2 (66.7 as 1F1B)
                  "deepseek24-v3-h800-fp8-2048gpu": ("84.1", 2)}
for _ident in FITS_SINCE_H53:
    del REFUSED[_ident], REFUSED_DEVICE[_ident]
# Round h83 (docs/research/h83-capacity.md): the memory check takes the capacity a process can allocate, the 80 GB
# datasheet as CUDA reports it less the CUDA context and one NCCL communicator (84.33 GB on H100, conf/device/h100.yaml),
# not the datasheet's 80.0 GB. The rows below fit that capacity and are refused at 80.0 GB only: moved from
# llm_refused.csv to validation/llm.csv (twenty-second stop), with the stage and GB the datasheet refusal names.
FITS_SINCE_H83 = {"llama3-405b-8192gpu-tp8pp16dp64": r"needs 82\.\d GB per GPU on pipeline stage 1"}
for _ident in FITS_SINCE_H83:
    del REFUSED[_ident], REFUSED_DEVICE[_ident]
FITTED = [r for r in ALL_ROWS if r.id in FITS_SINCE_H53 or r.id in FITS_SINCE_H83]
# Nemotron-4 340B on 128 H100 (NeMo 24.07 table) was refused at 80.4 GB (85.3 GB until round h30 counted TE's
# FP8-saved GEMM inputs in 1 byte) until round h32 read the recipe's Adam state dtype (optim.dtype: bf16,
# framework.optimizer_state=bf16): it is in llm.csv now, and with fp32 state it is refused again.
NEMOTRON_340B_128 = "nemo2407-nemotron4-340b-fp8-128gpu"


def _overrides(row) -> dict[str, str]:
    return dict(ov.split("=", 1) for ov in row.overrides)


def _by_id(ident: str):
    return next(r for r in HELD_OUT + TABLE_ROWS + FITTED + REFUSED_ROWS if r.id == ident)


def test_held_out_rows_live_in_the_llm_file():
    assert len(HELD_OUT) == 38 and {r.file for r in HELD_OUT} == {"validation/llm.csv"}
    assert {r.role for r in HELD_OUT} == {"independent"}
    files = rows_module.csv_files(VALIDATION)
    assert files and all(f.parent == VALIDATION for f in files) and REFUSED_FILE not in files
    assert not {r.id for r in ALL_ROWS} & {r.id for r in REFUSED_ROWS}, "a refused row is not predicted"
    assert not (PENDING / "llm_heldout.csv").exists()


def test_refused_file_parses_with_the_loader():
    header = next(csv.reader(io.StringIO(REFUSED_FILE.read_text(encoding="utf-8"))))
    assert tuple(header) == COLUMNS
    assert [r.id for r in REFUSED_ROWS] == list(REFUSED)
    assert [r.id for r in FITTED] == [*FITS_SINCE_H53, *FITS_SINCE_H83] and {r.file for r in FITTED} == {"validation/llm.csv"}
    assert {r.role for r in FITTED} == {"independent"}


@pytest.mark.parametrize("row", HELD_OUT + TABLE_ROWS + FITTED + REFUSED_ROWS, ids=lambda r: r.id)
def test_row_columns_are_complete(row):
    assert row.source and row.hardware and row.software and row.measured_what
    assert row.raw["metric"] in ("tflops_per_gpu", "tokens_per_s_per_gpu")
    assert (row.raw["flops_formula"] != "") == (row.raw["metric"] == "tflops_per_gpu")


def test_coverage_required_by_issue_23():
    rows = HELD_OUT + FITTED + REFUSED_ROWS
    big_h100 = [r for r in rows if r.system == "dgx_h100" and r.gpus >= 1000 and r.role == "independent"]
    documents = {min(source_keys(r.source)) for r in big_h100}
    assert len(documents) >= 5, documents  # five published runs on H100 at >= 1,000 GPUs, from distinct sources
    frameworks = {_overrides(r).get("framework", DEFAULT_FRAMEWORK).split("_")[0] for r in rows}  # deepspeed_2021: DeepSpeed
    assert {"megatron", "deepspeed", "fsdp"} <= frameworks
    zero3 = [r for r in rows if _overrides(r).get("parallelism.zero") == "3"]
    assert zero3 and all(r.layout["tp"] == r.layout["pp"] == 1 for r in zero3)
    # the 530B layout (TP 8, PP 35) under DeepSpeed (MT-NLG) and under Megatron-LM
    layout_530b = {_overrides(r)["framework"].split("_")[0] for r in rows
                   if (r.layout["tp"], r.layout["pp"]) == (8, 35) and _overrides(r)["model.num_layers"] == "105"}
    assert layout_530b == {"deepspeed", "megatron"}


@pytest.mark.parametrize("row", HELD_OUT + TABLE_ROWS + FITTED + REFUSED_ROWS, ids=lambda r: r.id)
def test_layout_is_consistent(row):
    lay = row.layout
    model_parallel = lay["tp"] * lay["pp"] * lay["cp"]
    assert row.gpus % model_parallel == 0, "GPUs must be a multiple of tp x pp x cp"
    dp = row.gpus // model_parallel
    assert lay["global_batch"] % (dp * lay["micro_batch_size"]) == 0, "global batch = dp x micro-batch x microbatches"
    assert "seq_len" in lay
    keys = set(_overrides(row))
    assert keys <= ALLOWED_KEYS, keys - ALLOWED_KEYS
    assert all(k not in keys for k in row.raw["unstated"].split() if k.startswith("model."))


def test_a_measured_value_in_the_overrides_would_fail():
    row = _by_id("nemotron4-15b-768gpu")
    assert not {"device.compute_efficiency", "fabric.link_bw_Bps"} & ALLOWED_KEYS
    assert "framework" in _overrides(row) and set(_overrides(row)) <= ALLOWED_KEYS


def test_step_time_conversions_reproduce_the_measured_values():
    converted = [r for r in HELD_OUT if r.raw["metric"] == "tokens_per_s_per_gpu"]
    assert len(converted) >= 25
    for r in converted:
        found = DERIVATION.search(r.measured_what)
        assert found, f"{r.id}: measured_what must show the conversion from the published step time"
        gb, seq, step, gpus, value = found.groups()
        assert (int(gb), int(seq), int(gpus)) == (r.layout["global_batch"], r.layout["seq_len"], r.gpus), r.id
        assert float(value) == r.measured, r.id
        assert r.measured == pytest.approx(int(gb) * int(seq) / (float(step) * int(gpus)), rel=5e-6), r.id


def test_nvidia_table_rows_are_independent_and_blind():
    """Ten rows predicted, one refused; all independent (no calibration row cites these documents)."""
    assert len(TABLE_ROWS) == 10 and {r.role for r in TABLE_ROWS} == {"independent"}
    assert all(r.raw["metric"] == "tokens_per_s_per_gpu" and "Chosen before any prediction was seen" in r.measured_what
               for r in TABLE_ROWS)
    moe = [r for r in TABLE_ROWS if r.model == "mixtral_8x7b"]
    assert [_overrides(r)["parallelism.ep"] for r in moe] == ["8", "8"]


@pytest.mark.parametrize("ident, tflops", [("mcore09-mixtral-8x7b-bf16-64gpu", 468),
                                           ("mcore08-mixtral-8x7b-bf16-64gpu", 438)])
def test_mixtral_tokens_are_the_readme_tflops_over_megatron_lm_flop_count(ident, tflops):
    """Megatron-LM's num_floating_point_operations (core v0.8 / v0.9 megatron/training/training.py), per
    token: 12 l h^2 ((1 + g/a + s/h) + (ffn/h) x topk x 3/2 + V / (2 l h)), from the preset's shape."""
    row = _by_id(ident)
    m = estimator.resolve_config(base_overrides(row))["model"]
    layers, h, s = m["num_layers"], m["hidden_size"], m["seq_len"]
    per_token = 12 * layers * h * h * ((1 + m["num_kv_heads"] / m["num_heads"] + s / h) + m["ffn_size"] / h
                                       * m["experts_top_k"] * 1.5 + m["vocab_size"] / (2 * layers * h))
    assert row.measured == pytest.approx(tflops * 1e12 / per_token, abs=0.06)
    assert f"'{tflops} TFLOPS'" in row.source and f"{row.measured}" in row.measured_what


def test_independent_rows_share_no_source_with_a_calibration_row():
    rows = ALL_ROWS + REFUSED_ROWS
    calibration = [r for r in rows if r.role == "calibration"]
    assert any(c.kind == "llm" for c in calibration)
    held_out = {r.id for r in HELD_OUT + FITTED + REFUSED_ROWS}
    for r in (r for r in rows if r.kind == "llm"):
        shared = [c.id for c in calibration if shares_source(r.source, c.source)]
        if r.role == "independent":
            assert not shared, f"{r.id} shares its table/curve/run with calibration row(s) {shared}: mark it same-source"
        elif r.id in held_out:  # (a calibration campaign's other tables may be marked same-source conservatively)
            assert r.role != "same-source" or shared, f"{r.id} is marked same-source but no calibration row shares its source"


@pytest.mark.parametrize("a, b, same", [
    ("Narayanan et al. 2021, arXiv 2104.04473, Table 1", "arXiv 2104.04473 Table 2 + Sec. 5.2", False),
    ("arXiv 2104.04473 Table 2", "Narayanan et al. 2021 (arXiv:2104.04473), Table 2 and Fig. 10", True),
    ("arXiv 2104.04473", "arXiv 2104.04473 Table 2", True),  # a paper cited without a table: any of its tables
    ("NVIDIA/dgxc-benchmarking@143b90dd:llama3.1/README_405b.md", "NVIDIA/dgxc-benchmarking@0b71cfda:llama3.1/README_405b.md", True),
    ("NVIDIA/dgxc-benchmarking@143b90dd:llama3.1/README_405b.md", "NVIDIA/dgxc-benchmarking@143b90dd:nemotron/README_340b.md", False),
    ("mlcommons/training_results_v3.1@d06288b:NVIDIA/results/eos_n64_ngc23.09_nemo/gpt3/result_0.txt",
     "mlcommons/training_results_v3.1@d06288b:NVIDIA/results/eos-dfw_n1344_ngc23.09_nemo/gpt3/result_1.txt", True),
    ("mlcommons/training_results_v3.1@d06288b:NVIDIA/results/eos_n64_ngc23.09_nemo/bert/result_0.txt",
     "mlcommons/training_results_v3.1@d06288b:NVIDIA/results/eos-dfw_n1344_ngc23.09_nemo/gpt3/result_1.txt", False),
    ("mlcommons/training_results_v3.1@d06288b:Azure+NVIDIA/results/ND_H100_v5_n1344_pytorch/gpt3/result_0.txt",
     "mlcommons/training_results_v3.1@d06288b:NVIDIA/results/eos-dfw_n1344_ngc23.09_nemo/gpt3/result_1.txt", False),
    ("https://research.nvidia.com/publication/2024-06_nemotron-4-340b Table 2",
     "see https://www.research.nvidia.com/publication/2024-06_nemotron-4-340b/", True),
])
def test_same_source_rule(a, b, same):
    assert shares_source(a, b) is same and shares_source(b, a) is same


@pytest.mark.parametrize("row", HELD_OUT + TABLE_ROWS + FITTED, ids=lambda r: r.id)
def test_published_layout_is_accepted_and_fits(row):
    """Layout and memory only (``validate_hybrid`` prices no step)."""
    from estimator.parallel.estimate import validate_hybrid

    validate_hybrid(estimator.resolve_config(base_overrides(row)))


@pytest.mark.parametrize("ident", list(FITS_SINCE_H83))
def test_rows_that_fit_since_h83_are_refused_at_the_datasheet_capacity_only(ident):
    """Refused with one line naming the stage when the device is stated at the datasheet's 80.0 GB; fits at the
    device's usable capacity (the default)."""
    from estimator.parallel.estimate import validate_hybrid

    row = _by_id(ident)
    with pytest.raises(EstimatorError, match=FITS_SINCE_H83[ident]) as err:
        validate_hybrid(estimator.resolve_config([*base_overrides(row), "parallelism.device_memory_bytes=80e9"]))
    assert "\n" not in str(err.value) and "but the device has 80.0 GB" in str(err.value)
    validate_hybrid(estimator.resolve_config(base_overrides(row)))



@pytest.mark.parametrize("ident", list(REFUSED))
def test_refused_row_stays_refused_for_its_reason(ident):
    """The row is refused by the memory check with one line naming the stage; if a model change makes it
    fit, this fails: move the row into validation/llm.csv, pin it and drop it from REFUSED. (A row of
    FITS_SINCE_H83 moved out: refused at its datasheet capacity only.)"""
    from estimator.parallel.estimate import validate_hybrid

    row = _by_id(ident)
    device_gb, roomy = REFUSED_DEVICE[ident]
    with pytest.raises(EstimatorError, match=REFUSED[ident]) as err:
        validate_hybrid(estimator.resolve_config(base_overrides(row)))
    assert "\n" not in str(err.value) and f"but the device has {device_gb} GB" in str(err.value)
    with pytest.raises(EstimatorError, match=rf"llm_refused\.csv:\d+: row {ident}: .*{REFUSED[ident]}"):
        predict(row)  # what `estimator validate validation.dir=validation/pending` reports
    roomier = estimator.resolve_config([*base_overrides(row), f"parallelism.device_memory_bytes={roomy}"])
    validate_hybrid(roomier)  # the check can also say "fits": only the memory is short


@pytest.mark.parametrize("ident", list(FITS_SINCE_H53))
def test_rows_that_fit_since_h53_fit_at_their_stated_memory(ident):
    """The published layout is accepted and fits the stated 80 GB (84.33 usable), needing the GB pinned above on the
    stage named."""
    from estimator.parallel.estimate import setup_hybrid, validate_hybrid
    from estimator.parallel.memory import memory

    cfg = estimator.resolve_config(base_overrides(_by_id(ident)))
    validate_hybrid(cfg)
    s = setup_hybrid(cfg)
    spec, precision, layout, capacity, fw = s.spec, s.precision, s.layout, s.capacity, s.framework
    mem = memory(spec, layout, fw.grad_bytes(precision), fw, precision == "fp8")
    # the usable capacity of H100 / H800 (conf/device/h100.yaml, round h83): 80 GB stated, 84.33 GB usable
    assert capacity == pytest.approx(84.33e9) and (f"{mem['total'] / 1e9:.1f}", mem["stage"]) == FITS_SINCE_H53[ident]


def test_nemotron_340b_fits_with_its_recipes_bf16_adam_state():
    """NeMo 24.07's Nemotron-4 340B recipe keeps Adam's state in bf16 (optim.dtype: bf16): 6 bytes per
    parameter instead of 12, so the published TP8 PP8 DP2 layout fits; with an fp32 state the same
    layout is refused on stage 0 at the datasheet's 80 GB, by the 0.4 GB it was refused by before round h32 (it fits
    the usable 84.33 GB of conf/device/h100.yaml, round h83)."""
    from estimator.parallel.estimate import validate_hybrid

    row = next(r for r in ALL_ROWS if r.id == NEMOTRON_340B_128)
    assert "framework.optimizer_state=bf16" in row.overrides and row.role == "independent"
    validate_hybrid(estimator.resolve_config(base_overrides(row)))
    fp32 = [*base_overrides(row), "framework.optimizer_state=fp32"]
    # against the datasheet's 80 GB: the 80.4 GB of fp32 state fits H100's usable 84.33 GB (round h83)
    with pytest.raises(EstimatorError, match=r"needs 80\.4 GB per GPU on pipeline stage 0 .*optimizer 34\.6"):
        validate_hybrid(estimator.resolve_config([*fp32, "parallelism.device_memory_bytes=80e9"]))
    validate_hybrid(estimator.resolve_config(fp32))


def test_no_microbatch_group_lets_the_refused_llama3_row_fit():
    """Meta's schedule tunes N, the contiguous microbatches per model chunk (Dubey et al. 2024 Sec. 3.3.2),
    between the depth-first (N = pp) and breadth-first (N = M) schedules, as Megatron-core's
    microbatch_group does (pp <= N <= M): every N the row's 32 microbatches allow needs at least the
    depth-first schedule's memory, so the unpublished N cannot be what made the run fit."""
    from estimator.parallel.estimate import validate_hybrid

    row = _by_id("llama3-405b-8192gpu-tp8pp16dp64")
    pp, m = row.layout["pp"], row.layout["global_batch"] // (row.gpus // (row.layout["tp"] * row.layout["pp"]))
    allowed = [n for n in range(pp, m + 1) if m % n == 0 or m % n >= pp]
    assert (pp, m, allowed) == (16, 32, [16, 32])
    needs = []
    for n in allowed:  # against the datasheet's 80 GB (the row fits the usable 84.33 GB since h83: FITS_SINCE_H83)
        with pytest.raises(EstimatorError, match=r"needs (\d+\.\d) GB") as err:
            validate_hybrid(estimator.resolve_config([*base_overrides(row), f"parallelism.microbatch_group={n}",
                                                      "parallelism.device_memory_bytes=80e9"]))
        needs.append(float(re.search(r"needs (\d+\.\d) GB", str(err.value)).group(1)))
    assert needs[0] == pytest.approx(82.3, abs=0.05) and needs[1] > needs[0]


def test_every_name_and_framework_a_row_uses_is_documented():
    doc = ROWS_DOC.read_text(encoding="utf-8")
    from estimator.config import config_groups

    documented = HELD_OUT + TABLE_ROWS + FITTED + REFUSED_ROWS
    assert {r.model for r in documented} <= set(config_groups().get("model", []))
    for r in documented:
        assert f"`{r.id}`" in doc, f"{r.id} is not listed in validation/llm_rows.md"
    for name in {_overrides(r).get("framework", DEFAULT_FRAMEWORK) for r in documented}:
        assert f"`framework={name}`" in doc, f"framework={name} is not described in validation/llm_rows.md"


# ---- the llm row format (one header for every llm file), on a copy of a Megatron-LM SC21 row ------
def _row_copy(tmp_path, row_id: str, **change: str) -> Path:
    """A folder holding one validation/llm.csv row with ``change`` applied to its columns."""
    text = (VALIDATION / "llm.csv").read_text(encoding="utf-8")
    reader = csv.DictReader(io.StringIO(text))
    assert tuple(reader.fieldnames) == COLUMNS  # one llm format
    row = {r["id"]: r for r in reader}[row_id]
    row.update(change)
    folder = tmp_path / "v"
    folder.mkdir(parents=True)
    with (folder / "llm_x.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerow(row)
    return folder


def test_seq_len_column_equal_to_the_model_default_predicts_the_same(tmp_path):
    plain = next(r for r in ALL_ROWS if r.id == "megatron-sc21-gpt-1t-3072gpu")
    assert plain.raw["seq_len"] == "" and plain.metric == "tflops_per_gpu" and plain.unit == "TFLOP/s/GPU"
    explicit = load_rows(_row_copy(tmp_path, plain.id, seq_len="2048"))[0]
    assert base_overrides(explicit) == [*base_overrides(plain)[:-len(plain.overrides)], "model.seq_len=2048",
                                        *plain.overrides]
    assert predict(explicit).predicted == pytest.approx(predict(plain).predicted)
    longer = load_rows(_row_copy(tmp_path / "b", plain.id, seq_len="4096"))[0]
    assert predict(longer).predicted != pytest.approx(predict(plain).predicted)


def test_tokens_per_second_metric_is_tokens_over_predicted_step_time(tmp_path):
    from estimator.estimate import estimate

    folder = _row_copy(tmp_path, "megatron-sc21-gpt-1t-3072gpu", metric="tokens_per_s_per_gpu",
                       measured="100", flops_formula="")
    row = load_rows(folder)[0]
    res = predict(row)
    step = estimate(estimator.resolve_config(base_overrides(row))).metrics["iter_time_s"]
    assert row.unit == "tokens/s/GPU"
    assert res.predicted == pytest.approx(3072 * 2048 / step / 3072)
    tflops = megatron_flops(estimator.resolve_config(base_overrides(row))["model"], 3072) / step / 3072 / 1e12
    assert res.predicted * 2048 != pytest.approx(tflops)  # a different metric, not a relabelled one


def test_context_parallel_and_seq_len_columns_become_overrides(tmp_path):
    row = load_rows(_row_copy(tmp_path, "megatron-sc21-gpt-1t-3072gpu", cp="2", seq_len="4096"))[0]
    ov = base_overrides(row)
    assert "parallelism.cp=2" in ov and "model.seq_len=4096" in ov
    one = load_rows(_row_copy(tmp_path / "b", "megatron-sc21-gpt-1t-3072gpu"))[0]
    assert not any(o.startswith(("parallelism.cp=", "model.seq_len=")) for o in base_overrides(one))


def test_palm_flops_is_6n_plus_12lhs_per_token():
    cfg = estimator.resolve_config(["model=llama2_70b", "parallelism=hybrid"])["model"]
    from estimator.parallel.spec import TransformerSpec

    n = TransformerSpec.from_cfg(cfg).params()
    assert n == pytest.approx(cfg["published_params"], rel=1e-4)
    per_token = 6 * n + 12 * cfg["num_layers"] * cfg["hidden_size"] * cfg["seq_len"]
    assert palm_flops(cfg, 3) == pytest.approx(3 * cfg["seq_len"] * per_token)
    longer = dict(cfg, seq_len=2 * cfg["seq_len"])  # the attention term grows with s per token
    assert palm_flops(longer, 3) / palm_flops(cfg, 3) > 2


@pytest.mark.parametrize("change, needle", [
    ({"metric": "mfu"}, "column metric: 'mfu' is not one of"),
    ({"flops_formula": ""}, "column flops_formula: '' is not one of megatron_eq3, palm_6n_12lhqt"),
    ({"metric": "tokens_per_s_per_gpu"}, "column flops_formula: must be empty for metric tokens_per_s_per_gpu"),
    ({"cp": "0"}, "column cp: '0' is not a positive integer"),
    ({"seq_len": "8k"}, "column seq_len: '8k' is not a positive integer"),
    ({"unstated": "parallelism.micro-batch"}, "column unstated: 'parallelism.micro-batch' is not a config key"),
    ({"precision": "fp4"}, "column precision: 'fp4' is not one of"),
    ({"role": "holdout?"}, "column role"),
    ({"overrides": "parallelism.cp=4"}, "sets parallelism.cp, which this file sets through its columns"),
    ({"overrides": "model.seq_len=4096"}, "sets model.seq_len, which this file sets through its columns"),
    ({"measured": "-1"}, "column measured: '-1' is not a positive number"),
])
def test_bad_llm_rows_are_one_line_errors(tmp_path, change, needle):
    with pytest.raises(EstimatorError) as err:
        load_rows(_row_copy(tmp_path, "megatron-sc21-gpt-1t-3072gpu", **change))
    msg = str(err.value)
    assert "llm_x.csv:2:" in msg and needle in msg and "\n" not in msg


def test_fp8_is_an_llm_precision(tmp_path):
    assert load_rows(_row_copy(tmp_path, "megatron-sc21-gpt-1t-3072gpu", precision="fp8"))[0].precision == "fp8"
    assert "fp8" in rows_module.PRECISIONS  # one list of precisions for every kind
