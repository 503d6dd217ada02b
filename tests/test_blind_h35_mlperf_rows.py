"""The round-h35 blind held-out MLPerf rows (issue #23 item 7), now in validation/llm.csv.

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(7330199), then moved into llm.csv (validation/llm_rows.md, "Blind held-out rows, round h35 (MLPerf)"). These checks
price no step: every row parses with the project's loader, is a run no other row describes (and not a resubmission of
logs another row already converted), shares no source with a calibration row, sets only facts of the run, reproduces
its step-time -> throughput conversion and the layout its config file name states, composes into a config the hybrid
model accepts and fits in memory, and is described in llm_rows.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from estimator.validation import load_rows
from estimator.validation.llm import source_keys
from tests.blind_checks import (
    MOE_ROUTER_KEYS,
    check_composes_and_fits,
    check_described,
    check_facts_only,
    check_new_runs,
    check_no_calibration_source,
    check_rows_in_llm_file,
    check_step_conversion,
    document,
    overrides,
    run_key,
)

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H35_MLPERF_IDS = ("mlperf30-gpt3-nvidia-512gpu", "mlperf30-gpt3-nvidia-768gpu", "mlperf30-gpt3-coreweave-768gpu",
                  "mlperf30-gpt3-coreweave-1536gpu", "mlperf30-gpt3-coreweave-3584gpu", "mlperf40-gpt3-smc-512gpu",
                  "mlperf51-llama31-8b-hpe-h200-64gpu")
ALL = load_rows(VALIDATION)
ROWS = [r for r in ALL if r.id in H35_MLPERF_IDS]
SEEN = [r for r in ALL + load_rows(VALIDATION / "pending") if r.kind == "llm" and r.id not in H35_MLPERF_IDS]
SECTION = "## Blind held-out rows, round h35 (MLPerf)"
V30_NVIDIA = "mlcommons/training_results_v3.0:NVIDIA/results/*/gpt3"
V30_COREWEAVE = "mlcommons/training_results_v3.0:NVIDIA_CoreWeave/results/*/gpt3"
V40_SMC = "mlcommons/training_results_v4.0:smc/results/*/gpt3"
V51_HPE = "mlcommons/training_results_v5.1:HPE/results/*/llama31_8b"
DOCUMENTS = {V30_NVIDIA: 2, V30_COREWEAVE: 3, V40_SMC: 1, V51_HPE: 1}
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "parallelism.zero", "parallelism.virtual_stages", "parallelism.sequence_parallel",
                "parallelism.dp_overlap", "parallelism.recompute", "parallelism.fp32_grads", "framework.tp_comm_overlap",
                "fabric.nvls", "model.fused_kernels", "model.dropout"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
GPT3_ROWS = [r for r in ROWS if r.model == "gpt3_175b"]
# config_DGXH100_<nodes>x8x<MINIBS>x<TP>x<PP>_mbs<MBS>.sh (NVIDIA's GPT-3 naming; SMC's config_SMCH100_... has no mbs).
GPT3_CONFIG = re.compile(r"config_(?:DGXH100|SMCH100)_(\d+)x8x(\d+)x(\d+)x(\d+)(?:_mbs(\d+))?\.sh")
# config_XD670_<nodes>x8x<MINIBS>xtp<TP>pp<PP>cp<CP>_8b.sh (NVIDIA's Llama 3.1 naming as HPE uses it).
LLAMA_CONFIG = re.compile(r"config_XD670_(\d+)x8x(\d+)xtp(\d+)pp(\d+)cp(\d+)_8b\.sh")


def _release(row) -> str:
    """The software a row ran: the NGC release its software column names first (container tag or release)."""
    return re.search(r"(?:pytorch:|Release |Framework )(\d\d\.\d\d)", row.software).group(1)


def _resubmitted(row, seen) -> list[str]:
    """Rows of ``seen`` whose published number this row's logs repeat: the same model, GPUs and global batch with the
    same measured value (a round that re-files another round's logs gives the same median to the last digit)."""
    return [s.id for s in seen if (s.model, s.gpus, s.layout["global_batch"], s.measured)
            == (row.model, row.gpus, row.layout["global_batch"], row.measured)]


def test_rows_parse_are_independent_and_come_from_four_documents():
    check_rows_in_llm_file(ROWS, DOCUMENTS, 7)
    assert {r.system for r in ROWS} == {"dgx_h100", "dgx_h200"}


def test_estimator_validate_reads_the_rows_from_llm_csv():
    """Priced once, the rows are in the default validation folder's llm.csv: every id of the round is there."""
    assert set(H35_MLPERF_IDS) <= {r.id for r in ALL} and {r.file for r in ROWS} == {"validation/llm.csv"}


def test_rows_are_runs_no_other_row_describes():
    check_new_runs(ROWS, SEEN, _release)
    for row in ROWS:
        assert not [s.id for s in SEEN if run_key(s) == run_key(row) and document(row) in source_keys(s.source)]
        assert not _resubmitted(row, SEEN), f"{row.id} repeats the logs of {_resubmitted(row, SEEN)}"
    # No row of llm.csv or pending/ cites any of the four documents.
    for doc in DOCUMENTS:
        assert not [s.id for s in SEEN if doc in source_keys(s.source)], doc


def test_the_resubmission_check_can_fail():
    """Nebius' v5.1 llama31_405b logs give the v5.0 row's median exactly: a row built from them is caught; the
    v3.0 NVIDIA 512-GPU row (same layout and batch as the v3.1 Eos row, other software and run) is not."""
    (nebius,) = [s for s in SEEN if s.id == "mlperf50-llama31-405b-nebius-h200-512gpu"]
    assert _resubmitted(nebius, [nebius]) == [nebius.id]
    (v30,) = [r for r in ROWS if r.id == "mlperf30-gpt3-nvidia-512gpu"]
    (v31,) = [s for s in SEEN if s.id == "mlperf31-gpt3-eos-512gpu"]
    assert run_key(v30) == run_key(v31) and _release(v30) != _release(v31)
    assert not _resubmitted(v30, [v31])


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_of_the_run(row):
    keys = check_facts_only(row, ALLOWED_KEYS)
    assert keys["framework"] == "megatron" and keys["parallelism.zero"] == "1" and row.precision == "fp8"
    assert keys["parallelism.fp32_grads"] == "false" and keys["parallelism.recompute"] == "none"
    # NVLS is set only where a file states NCCL_NVLS_ENABLE; otherwise it is listed as unstated.
    assert ("fabric.nvls" in keys) != ("fabric.nvls" in row.raw["unstated"].split())


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_step_time_rows_reproduce_their_conversion(row):
    check_step_conversion(row)


@pytest.mark.parametrize("row", GPT3_ROWS, ids=lambda r: r.id)
def test_gpt3_layout_is_the_config_file_name(row):
    """nodes x 8 = GPUs, TP x PP from the name, GBS = MINIBS x DP; v3.0 rows carry the name's mbs, SMC's mbs 2 is
    set in its config_common.sh; the GPT-3 recipe's interleave is 12 in every row."""
    nodes, minibs, tp, pp, mbs = GPT3_CONFIG.search(row.source).groups()
    lay = row.layout
    dp = row.gpus // (lay["tp"] * lay["pp"])
    assert int(nodes) * 8 == row.gpus and (int(tp), int(pp)) == (lay["tp"], lay["pp"]) == (4, 8)
    assert int(minibs) * dp == lay["global_batch"] and lay["seq_len"] == 2048 and lay["cp"] == 1
    assert lay["micro_batch_size"] == (int(mbs) if mbs else 2)
    assert f"gradient_accumulation_steps {int(minibs) // lay['micro_batch_size']}" in row.measured_what
    assert overrides(row)["parallelism.virtual_stages"] == "12" and "model.vocab_size" in row.raw["unstated"]


def test_hpe_layout_is_the_config_file_name():
    (row,) = [r for r in ROWS if document(r) == V51_HPE]
    nodes, minibs, tp, pp, cp = (int(x) for x in LLAMA_CONFIG.search(row.source).groups())
    lay = row.layout
    assert nodes * 8 == row.gpus and (tp, pp, cp) == (lay["tp"], lay["pp"], lay["cp"]) == (1, 1, 2)
    assert minibs * row.gpus // (tp * pp * cp) == lay["global_batch"] == 32
    ov = overrides(row)
    assert ov["parallelism.sequence_parallel"] == "false" and ov["framework.tp_comm_overlap"] == "false"
    assert row.system == "dgx_h200" and row.model == "llama3_8b" and lay["seq_len"] == 8192


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_every_row_is_described():
    check_described(ROWS, SECTION, measured=True)
