"""The round-h51 blind held-out rows (validation/blind_h51): MoE training runs on H100 that no row used -- Megatron-Bridge's
dispatcher / EP-overlap A/B runs of Qwen3-30B-A3B on 16 GPUs, its model-verification cards (Qwen3-30B-A3B with natural
routing, DeepSeek-V3 on 1,024 GPUs) and NeMo AutoModel's DeepSeek-V3 / Kimi K2 lines (256 and 1,024 GPUs). Written
before any prediction was seen; the lead priced them once (model frozen at 4468810) and moved them into
validation/llm.csv; validation/llm_rows.md, "round h51", has the errors as priced and the helper's notes.

These checks price no step: the rows parse with the project's loader, are independent tokens/s llm rows that repeat no
run already described, share no source with a calibration row, set only facts of their runs, reproduce their step-time
conversions and the layouts their sources print, and compose into configs the hybrid model accepts and fits.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import estimator
from estimator.validation.llm import source_keys
from estimator.validation.predict import base_overrides
from tests.blind_checks import (
    MOE_ROUTER_KEYS,
    check_composes_and_fits,
    check_described,
    check_facts_only,
    check_moved_once,
    check_no_calibration_source,
    check_step_conversion,
    document,
    overrides,
    round_rows,
    run_key,
    table_line,
)

REPO = Path(__file__).resolve().parents[1]
VALIDATION = REPO / "validation"
A2A = tuple(f"mbridge260518-qwen3-30b-a3b-bf16-16gpu-{s}" for s in ("a2a", "a2a-epoverlap", "a2a-epoverlap-dwgrad"))
HYBRIDEP = tuple(f"mbridge260725-qwen3-30b-a3b-bf16-16gpu-{s}" for s in ("hybridep", "hybridep-epoverlap"))
CARDS = ("mbridge260719-qwen3-30b-a3b-bf16-16gpu-natural", "mbridge260815-deepseek-v3-bf16-1024gpu")
AUTOMODEL = ("automodel2510-deepseek-v3-bf16-1024gpu", "automodel2510-deepseek-v3-bf16-256gpu",
             "automodel2510-kimi-k2-bf16-256gpu")
IDS = A2A + HYBRIDEP + CARDS + AUTOMODEL
# Kimi K2 was refused at 83.2 GB with the fp32 Adam state until the lead read AutoModel's optimizer (torch.optim.Adam on
# bf16 parameters: framework.optimizer_state=bf16, thirteenth stop, before any row was priced)
ALL, _moved, SEEN = round_rows(IDS)
ROWS = sorted(_moved, key=lambda r: IDS.index(r.id))
BY_ID = {r.id: r for r in ROWS}
SECTION = "## Blind held-out rows, round h51 (MoE on H100: dispatcher / EP-overlap A/B runs, DeepSeek-V3, Kimi K2)"
DOCUMENTS = {
    "NVIDIA-NeMo/Megatron-Bridge:skills/perf-moe-comm-overlap/SKILL.md": 3,
    "NVIDIA-NeMo/Megatron-Bridge:skills/nemo-mbridge-perf-expert-parallel-overlap/SKILL.md": 2,
    "NVIDIA-NeMo/Megatron-Bridge:examples/model_verification_cards/qwen3-30b-a3b/card.yaml": 1,
    "NVIDIA-NeMo/Megatron-Bridge:examples/model_verification_cards/deepseek-v3/card.yaml": 1,
    "NVIDIA-NeMo/Automodel:docs/performance-summary.md": 3,
}
ALLOWED = {"framework", "parallelism.ep", "parallelism.etp", "parallelism.virtual_stages", "parallelism.zero",
           "parallelism.sequence_parallel", "parallelism.dp_overlap", "parallelism.recompute",
           "parallelism.recompute_modules", "parallelism.fp32_grads", "framework.optimizer_state",
           "framework.tp_comm_overlap", "fabric.nvls", "framework.loss_kernel", "framework.moe_dispatcher",
           "framework.moe_a2a_overlap", "model.mtp_layers"}
ALLOWED |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED |= {"framework.moe_permute_fusion_into_hybridep", "framework.moe_a2a_delay_wgrad"}  # twenty-third stop (h90): the recipe's HybridEP permute fusion and EP overlap without delay_wgrad_compute, facts of the stack
ALLOWED |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
MOE_KEYS = ("framework.moe_dispatcher", "framework.moe_a2a_overlap")


def moe_identity(row) -> tuple:
    """A run's key plus what the A/B runs vary: dispatcher, EP overlap and the source's commit."""
    ov = overrides(row)
    commit = re.match(r"[\w.-]+/[\w.-]+@([0-9a-f]{40}):", row.source).group(1)
    return (*run_key(row), ov.get("framework.moe_dispatcher"), ov.get("framework.moe_a2a_overlap"), commit,
            row.id.endswith("-dwgrad"))


def test_rows_parse_as_independent_llm_rows():
    assert tuple(r.id for r in ROWS) == IDS
    assert all(r.kind == "llm" and r.role == "independent" and r.system == "dgx_h100" for r in ROWS)
    assert {r.id: r.model for r in ROWS} == {**dict.fromkeys(A2A + HYBRIDEP + CARDS[:1], "qwen3_30b_a3b"),
                                             CARDS[1]: "deepseek_v3", AUTOMODEL[0]: "deepseek_v3",
                                             AUTOMODEL[1]: "deepseek_v3", AUTOMODEL[2]: "kimi_k2"}
    assert {doc: sum(document(r) == doc for r in ROWS) for doc in DOCUMENTS} == DOCUMENTS
    assert sum(r.gpus >= 256 for r in ROWS) == 4


def test_rows_are_runs_no_other_row_describes():
    """No id of llm.csv / pending/, no seen row of the same model cites these documents, and no two runs share a key. The 16-GPU BF16
    Qwen3-30B-A3B layout is already a row (mbridgemoeopt, the card's tuned HybridEP + overlap run of 30297677); every
    row here differs in dispatcher, overlap or commit (and the check can fail: that row's own identity is caught)."""
    assert not {r.id for r in SEEN} & set(IDS)
    for row in ROWS:  # a seen row may cite the same page only for another model (AutoModel's Llama / Qwen3 lines)
        assert not [s.id for s in SEEN if document(row) in source_keys(s.source) and s.model == row.model], row.id
    cited = {s.id: s.model for s in SEEN if {document(r) for r in ROWS} & source_keys(s.source)}
    assert cited == {"automodel2604-llama31-70b-bf16-64gpu-cp2": "llama3_70b",
                     "automodel-qwen3-30b-a3b-bf16-8gpu": "qwen3_30b_a3b"}
    keys = [moe_identity(r) for r in ROWS]
    assert len(set(keys)) == len(keys)
    same_layout = [s for s in SEEN if run_key(s) == run_key(BY_ID[A2A[0]])]
    assert [s.id for s in same_layout] == ["mbridgemoeopt-qwen3-30b-a3b-bf16-16gpu"]
    assert "30297677" in same_layout[0].source and "20.14729" in same_layout[0].measured_what
    assert not [r.id for r in ROWS if r.measured == same_layout[0].measured]
    assert moe_identity(BY_ID[HYBRIDEP[1]])[-2] != "302976773079f5d4a474c70410b335a50ae11c5c"


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_of_the_run(row):
    keys = check_facts_only(row, ALLOWED)
    unstated = row.raw["unstated"].split()
    assert not set(keys) & set(unstated)
    assert all(k in keys for k in MOE_KEYS)  # every source states its dispatcher and whether the all-to-all overlaps
    if row.id.startswith("mbridge"):
        assert keys["framework"] == "megatron" and keys["framework.loss_kernel"] == "te_fused"
        assert keys["parallelism.fp32_grads"] == "false" and "grad_reduce_in_fp32 False" in row.measured_what
    if row.id in A2A:
        assert keys["framework.moe_dispatcher"] == "alltoall" and unstated == ["fabric.nvls"]
        assert "'--moe_flex_dispatcher_backend None' -> moe_token_dispatcher_type 'alltoall'" in row.source
    elif row.id in HYBRIDEP + CARDS:
        assert keys["framework.moe_dispatcher"] == "hybridep" and "'hybridep'" in row.source
    if row.id == CARDS[1]:
        assert keys["framework.optimizer_state"] == "bf16_moments" and "bf16 main grads / exp_avg / exp_avg_sq" in row.source
        assert keys["parallelism.recompute_modules"] == "[mla_up_proj,mlp]" and keys["parallelism.dp_overlap"] == "false"
        assert keys["model.mtp_layers"] == "1" and "mtp_num_layers 1" in row.source
    elif row.id.startswith("mbridge"):
        assert keys["framework.optimizer_state"] == "fp32" and "exp_avg" in row.source
    if row.id in AUTOMODEL:
        assert keys["framework"] == "fsdp" and keys["parallelism.zero"] == "2" and keys["parallelism.recompute"] == "full"
        assert keys["framework.moe_dispatcher"] == "deepep" and "enable_deepep true" in row.source
        assert keys["framework.loss_kernel"] == "torch_bf16" and "fp32_upcast false" in row.source
        assert keys.get("model.mtp_layers") == ("0" if row.model == "deepseek_v3" else None)
        assert unstated == ["framework.attention_kernel"]


def test_ab_pairs_differ_only_in_the_all_to_all_overlap():
    """Each A/B series holds everything but the EP overlap and, with it, whether the experts' weight gradients were
    delayed (``framework.moe_a2a_delay_wgrad``: false where the run's delay_wgrad_compute was False, the -dwgrad row
    keeps the default True)."""
    for series in (A2A, HYBRIDEP):
        base = overrides(BY_ID[series[0]])
        assert base["framework.moe_a2a_overlap"] == "false"
        for ident in series[1:]:
            ov = overrides(BY_ID[ident])
            delayed = "-dwgrad" in ident
            extra = {} if delayed else {"framework.moe_a2a_delay_wgrad": "false"}
            assert ov == {**base, "framework.moe_a2a_overlap": "true", **extra}
            assert BY_ID[ident].layout == BY_ID[series[0]].layout
            assert BY_ID[ident].measured > BY_ID[series[0]].measured  # as the sources print: overlap was faster


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_step_time_row_reproduces_its_conversion(row):
    check_step_conversion(row)


@pytest.mark.parametrize("ident", CARDS)
def test_card_rows_are_the_cards_own_throughput(ident):
    row = BY_ID[ident]
    card = re.search(r"'last_10_steps_tokens_per_second_per_gpu_avg: ([\d.]+)'", row.measured_what).group(1)
    step = re.search(r"'last_10_steps_step_time_ms_avg: ([\d.]+)'", row.measured_what).group(1)
    assert float(card) == row.measured and f"({float(step) / 1000:.6f}".rstrip("0") + " s x" in row.measured_what


@pytest.mark.parametrize("ident", AUTOMODEL)
def test_automodel_row_is_the_table_line(ident):
    """The table's columns give the row's layout: GPUs, GBS, MBS, local batch, GA, seq, TP, PP, CP, EP, VP, FSDP = DP,
    GBS = DP x local batch x GA, and its step time, and its tokens/s/GPU within 0.1 %."""
    row = BY_ID[ident]
    line = re.search(r"'(\| (?:DeepSeek V3 671B|Kimi K2) \|[^']+)'", row.source).group(1)
    cells = [c.strip() for c in line.strip("|").split("|")]
    gpus, gbs, mbs, lbs, ga, seq, tp, pp, cp, ep, vp, fsdp = map(int, cells[1:13])
    lay, ov = row.layout, overrides(row)
    assert (row.gpus, lay["global_batch"], lay["micro_batch_size"], lay["seq_len"]) == (gpus, gbs, mbs, seq)
    assert (lay["tp"], lay["pp"], lay["cp"]) == (tp, pp, cp)
    assert (ov["parallelism.ep"], ov["parallelism.virtual_stages"]) == (str(ep), str(vp))
    assert fsdp == gpus // (tp * pp * cp) and gbs == fsdp * lbs * ga and f"GA {ga}" in row.measured_what
    assert float(cells[14]) == float(re.search(r"'Time per Global Step \(s\)' ([\d.]+)", row.measured_what).group(1))
    assert abs(row.measured / int(cells[16].replace(",", "")) - 1) < 1e-3  # the table's tokens/s/GPU


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    """Memory only (no step is priced)."""
    check_composes_and_fits(row)
    assert estimator.resolve_config(base_overrides(row))["framework"]["moe_dispatcher"] == \
        overrides(row)["framework.moe_dispatcher"]


def test_priced_once_and_moved():
    check_moved_once(IDS, ALL)


def test_rows_are_described_with_their_values_and_errors():
    check_described(ROWS, SECTION, measured=True)
    text = (VALIDATION / "llm_rows.md").read_text(encoding="utf-8")
    for row in ROWS:
        assert re.search(r"\| [+-]\d+\.\d % \|$", table_line(text[text.index(SECTION):], row.id)), row.id
