"""The round-h36 blind held-out rows: mixture-of-experts training on H100 (issue #23 item 7), now in
validation/llm.csv (the four rows the memory model refuses: validation/pending/llm_refused.csv), and the preset they
add (conf/model/qwen3_235b_a22b.yaml).

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(3b910d2), then moved (validation/llm_rows.md, "Blind held-out rows, round h36 (mixture of experts)"). Five of the nine
rows need expert tensor parallelism 1 with TP > 1 (`parallelism.etp=1`, Megatron-core's "MoE parallel
folding", main 2067c0a). These checks price no step: every row parses with the project's loader, is an independent llm
row that repeats no run already described, shares no source with a calibration row, sets only facts of the run,
reproduces the published numbers it is derived from, composes into a config the hybrid model accepts and fits in memory
(the refused rows: is refused on memory), and is described in llm_rows.md. The new preset has its published
parameter count.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import estimator
from estimator.parallel.layout import Layout
from estimator.parallel.spec import TransformerSpec
from estimator.validation import load_rows
from tests.blind_checks import (
    MOE_ROUTER_KEYS,
    check_composes_and_fits,
    check_facts_only,
    check_new_runs,
    check_no_calibration_source,
    check_step_conversion,
    document,
    overrides,
    section,
)
from tests.helpers import transformers_qwen3_moe_params

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
# The three Qwen3-235B-A22B rows were refused on memory when the round was priced (3b910d2) and fit since 441654e
# (the MoE layer's activations keep TE's FP8 inputs): priced once then, and moved into llm.csv.
H36_MOE_IDS = ("mbridge2604-qwen3-30b-a3b-fp8-16gpu", "mbridge2606-qwen3-30b-a3b-fp8-16gpu",
               "dgxc250502-grok1-314b-bf16-512gpu", "dgxc250502-grok1-314b-fp8-512gpu",
               "mbridgemoeopt-qwen3-30b-a3b-bf16-16gpu", "mbridge2511-qwen3-235b-a22b-fp8-256gpu",
               "mbridge260201-qwen3-235b-a22b-fp8-256gpu", "mbridge260401-qwen3-235b-a22b-fp8-256gpu",
               # refused at 84.6 GB until the row stated its torch Adam on bf16 parameters (thirteenth stop): priced
               # once then and moved into llm.csv
               "automodel-qwen3-30b-a3b-bf16-8gpu")
H36_MOE_REFUSED_IDS: tuple[str, ...] = ()
ALL = load_rows(VALIDATION)
PENDING = load_rows(VALIDATION / "pending")
ROWS = [r for r in ALL if r.id in H36_MOE_IDS]
REFUSED = [r for r in PENDING if r.id in H36_MOE_REFUSED_IDS]
EVERY = ROWS + REFUSED
SEEN = [r for r in ALL + PENDING if r.kind == "llm" and r.id not in H36_MOE_IDS + H36_MOE_REFUSED_IDS]
SECTION = "## Blind held-out rows, round h36 (mixture of experts)"
GROK = "NVIDIA/dgxc-benchmarking:grok1/README.md"
MBRIDGE = "NVIDIA-NeMo/Megatron-Bridge:docs/performance-summary-archive.md"
MOE_DOC = "NVIDIA-NeMo/Megatron-Bridge:docs/training/moe-optimization.md"
AUTOMODEL = "NVIDIA-NeMo/Automodel:docs/performance-summary.md"
ETP_IDS = {"mbridge2511-qwen3-235b-a22b-fp8-256gpu", "mbridge260201-qwen3-235b-a22b-fp8-256gpu",
           "mbridge260401-qwen3-235b-a22b-fp8-256gpu", "dgxc250502-grok1-314b-bf16-512gpu",
           "dgxc250502-grok1-314b-fp8-512gpu"}
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "parallelism.ep", "parallelism.etp", "parallelism.zero", "parallelism.virtual_stages",
                "parallelism.sequence_parallel", "parallelism.dp_overlap", "parallelism.recompute",
                "parallelism.fp32_grads", "framework.tp_comm_overlap", "fabric.nvls", "model.vocab_size"}

# round h50 / thirteenth stop: the recipe's MoE dispatcher, EP all-to-all overlap and Adam state dtype (facts)
ALLOWED_KEYS |= {"framework.moe_dispatcher", "framework.moe_a2a_overlap", "framework.optimizer_state"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.moe_permute_fusion_into_hybridep", "framework.moe_a2a_delay_wgrad"}  # twenty-third stop (h90): the recipe's HybridEP permute fusion and EP overlap without delay_wgrad_compute, facts of the stack
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used


def _model(name: str) -> dict:
    return dict(estimator.resolve_config([f"model={name}"])["model"])


def _release(row) -> str:
    """The software release a row's id names (mbridge2604, dgxc250502, ...)."""
    return row.id.split("-", 1)[0]


def test_rows_parse_and_come_from_four_documents():
    assert len(ROWS) == 9 and len(REFUSED) == 0 and len({r.id for r in EVERY}) == 9
    assert {r.file for r in ROWS} == {"validation/llm.csv"}
    assert all(r.kind == "llm" and r.role == "independent" and r.system == "dgx_h100" for r in EVERY)
    assert {doc: sum(document(r) == doc for r in EVERY) for doc in (GROK, MBRIDGE, MOE_DOC, AUTOMODEL)} == {
        GROK: 2, MBRIDGE: 5, MOE_DOC: 1, AUTOMODEL: 1}
    assert {r.id for r in EVERY if "parallelism.etp" in overrides(r)} == ETP_IDS


def test_rows_are_runs_no_other_row_describes():
    """Same document and model as an earlier row only at another release (the Qwen3-30B-A3B rows repeat the 26.04.01
    layout at 26.04 and 26.06, as llm_rows.md says); the check fails on a row that repeats a release."""
    check_new_runs(EVERY, SEEN, _release)
    (earlier,) = [s for s in SEEN if s.id == "mbridge260401-qwen3-30b-a3b-fp8-16gpu"]
    with pytest.raises(AssertionError, match="repeats"):
        check_new_runs([dataclasses.replace(earlier, id="mbridge260401-qwen3-30b-a3b-copy")], SEEN, _release)


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(EVERY, SEEN)


@pytest.mark.parametrize("row", EVERY, ids=lambda r: r.id)
def test_row_sets_only_facts_of_the_run(row):
    keys = check_facts_only(row, ALLOWED_KEYS)
    if document(row) == AUTOMODEL:  # FSDP2 without resharding after forward, fp32 reduction, checkpointed blocks
        assert (keys["framework"], keys["parallelism.zero"], keys["parallelism.fp32_grads"]) == ("fsdp", "2", "true")
        assert keys["parallelism.recompute"] == "full"
    else:
        assert keys["framework"] == "megatron" and keys["parallelism.zero"] == "1"
        assert keys["parallelism.fp32_grads"] == "false" and keys["parallelism.recompute"] == "none"
    lay, model = row.layout, _model(row.model)
    dp = row.gpus // (lay["tp"] * lay["pp"] * lay["cp"])
    ep, etp = int(keys["parallelism.ep"]), int(keys.get("parallelism.etp", lay["tp"]))
    assert model["num_experts"] % ep == 0
    # Experts fold over the TP x CP x DP ranks of a stage as ETP x EP x expert-DP.
    assert (lay["tp"] * lay["cp"] * dp) % (etp * ep) == 0
    if row.id in ETP_IDS:
        assert etp == 1 < lay["tp"]
    else:
        assert dp % ep == 0 and lay["tp"] == 1


@pytest.mark.parametrize("row", [r for r in EVERY if r.model == "qwen3_235b_a22b"], ids=lambda r: r.id)
def test_qwen3_235b_rows_are_the_archive_line_and_split_as_published(row):
    lay, keys = row.layout, overrides(row)
    columns = "| 0 | 2 | 8 | 1 | 4 | 32 |"
    if row.id.startswith("mbridge2511"):
        line = f"| Qwen3_235B_a22B | 256 | FP8-CS | 2048 | 1 | 4096 {columns} 128 | {row.measured:g} |"
    else:
        line = f"| DGX-H100 | 256 | FP8 | 8192 | 1 | 4096 {columns} {row.measured:g} |"
    assert line in row.source and line in row.measured_what
    assert (lay["tp"], lay["pp"], lay["cp"], keys["parallelism.virtual_stages"], keys["parallelism.ep"]) == (
        2, 8, 1, "4", "32")
    # EP 32 > DP 16: only folding (ETP 1) makes the table's layout possible.
    assert int(keys["parallelism.ep"]) > row.gpus // 16
    # account_for_embedding/loss_in_pipeline_split: (94 + 2) / 32 chunks = 3, the first and last chunk 2 decoder layers;
    # the tool's uneven rule gives the same split.
    layout = Layout(tp=2, pp=8, dp=16, ep=1, micro_batch_size=1, microbatches=8, zero=1, sequence_parallel=True,
                    recompute="none", virtual_stages=4)
    chunks = layout.chunk_layers(_model(row.model)["num_layers"])
    assert chunks == (2,) + (3,) * 30 + (2,)


@pytest.mark.parametrize("row", [r for r in ROWS if r.model == "qwen3_30b_a3b" and document(r) == MBRIDGE],
                         ids=lambda r: r.id)
def test_qwen3_30b_rows_are_the_archive_line(row):
    release = "26.06" if row.id.startswith("mbridge2606") else "26.04"
    fsdp = "" if release == "26.06" else " 0 |"
    line = f"| DGX-H100 | 16 | FP8 | 1024 | 1 | 4096 |{fsdp} 1 | 1 | 1 | n/a | 16 | {row.measured:g} |"
    assert line in row.source and f"'{release} NeMo Container'" in row.source
    assert (row.layout["tp"], row.layout["pp"], overrides(row)["parallelism.ep"]) == (1, 1, "16")


@pytest.mark.parametrize("row", [r for r in ROWS if document(r) == GROK], ids=lambda r: r.id)
def test_grok_rows_reproduce_the_readme_step_time_and_launch_layout(row):
    check_step_conversion(row)
    keys, lay = overrides(row), row.layout
    # grok1/launch.sh GPU_TYPE=h100: TP 4, PP 8, CP 2, EP 8, VP 8, ET 1, MBS 1, GBS = 2 x GPUs; 64 layers, seq 8192.
    assert (lay["tp"], lay["pp"], lay["cp"], lay["micro_batch_size"], lay["seq_len"]) == (4, 8, 2, 1, 8192)
    assert lay["global_batch"] == 2 * row.gpus == 1024
    assert (keys["parallelism.ep"], keys["parallelism.etp"], keys["parallelism.virtual_stages"]) == ("8", "1", "8")
    assert keys["model.vocab_size"] == "128256" and keys["framework.tp_comm_overlap"] == "true"
    step = {"bf16": "15.933", "fp8": "13.433"}[row.precision]
    assert f"'Training step time (seconds per step)' {step}" in row.measured_what


def test_moe_optimization_row_reproduces_the_documented_step_time():
    """docs/training/moe-optimization.md: 'verified 50-step run averaged 20.14729 seconds' for the 16xH100 Qwen3
    30B-A3B BF16 recipe (TP 1, PP 1, EP 16, GBS 1024, seq 4096 at the same commit)."""
    (row,) = [r for r in ROWS if document(r) == MOE_DOC]
    check_step_conversion(row)
    assert "averaged 20.14729 seconds" in row.measured_what and row.precision == "bf16"
    assert (row.gpus, row.layout["global_batch"], overrides(row)["parallelism.ep"]) == (16, 1024, "16")


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_automodel_row_is_the_table_line():
    (row,) = [r for r in EVERY if document(r) == AUTOMODEL]
    check_step_conversion(row)
    line = "| Qwen3 MoE 30B | 8 | 512 | 4 | 4 | 16 | 4096 | 1 | 1 | 1 | 8 | - | 8 | TE + DeepEP | 21.773 | 277 | 12,040 |"
    assert line in row.source and overrides(row)["parallelism.ep"] == "8" and row.layout["micro_batch_size"] == 4


def test_every_row_is_described_with_its_value():
    text = section(VALIDATION / "llm_rows.md", SECTION)
    for row in EVERY:
        assert f"`{row.id}`" in text, row.id
        assert f"{row.measured:.10g}" in text, row.id


def test_qwen3_235b_a22b_preset_has_the_published_parameter_count():
    """235e9 published ("235B in total"); transformers' Qwen3-MoE at the preset's shapes, its q/k RMSNorm weights
    (2 x 128 per layer, model.qk_norm) included, is the tool's count exactly. Needs model.head_dim (128, not 4096 / 64 = 64)."""
    cfg = _model("qwen3_235b_a22b")
    s = TransformerSpec.from_cfg(cfg)
    assert s.head_dim == cfg["head_dim"] == 128 and s.hidden == 4096
    assert abs(s.params() / cfg["published_params"] - 1) < 0.005
    assert transformers_qwen3_moe_params(s) == s.params()
