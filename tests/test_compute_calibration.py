"""Every row of validation/training.csv through the Python API, with the error pinned.

Public training throughput (NVIDIA DeepLearningExamples, see the csv's source column) against the
estimate. Rows marked `calibration` set a constant (named in conf/device/*.yaml,
conf/parallelism/data.yaml and conf/system/*.yaml); `same-source` rows share a table with one,
`independent` rows share no source (validation/README.md). The errors are deterministic (FLOPs and
bytes come from shapes, not from CPU timings), so pinning them is a legitimate regression test: a
change that moves any row by more than PIN_MARGIN fails.

The systems are the presets (system=dgx_a100 | dgx1_v100 | dgx_h100): device, fabric and the host's
JPEG input pipeline (CPU cores x per-core decode rate). Multi-GPU pins move when the collective
model changes (re-pin then).
"""

from __future__ import annotations

import csv

import pytest

import estimator
from estimator.config import compose
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.workloads import io
from estimator.workloads.capture import ensure_workload
from tests.conftest import REPO

ROWS = {r["id"]: r for r in csv.DictReader((REPO / "validation" / "training.csv").open())}
SYSTEMS = {name: [f"system={name}"] for name in ("dgx_a100", "dgx1_v100", "dgx_h100")}
PIN_MARGIN = 1.0  # percentage points
# predicted / measured - 1, in percent, as measured on branch `compute`; re-measured on branch `kernels` after
# the capture priced GPU kernel bytes (dropout fused, views free) and the BERT GEMM efficiencies were re-fitted
PINNED_ERROR_PCT = {
    "rn50-dgxa100-tf32-1gpu": +0.1,
    "rn50-dgxa100-amp-1gpu": -0.1,
    "rn50-dgxa100-tf32-8gpu": -0.1,
    "rn50-dgxa100-amp-8gpu": +0.2,  # input bound: 128 cores x 130.1 img/s (EfficientNet-B0's cap; conf/system)
    "rn50-dgx1v16-fp32-1gpu": +0.0,
    "rn50-dgx1v16-amp-1gpu": +0.0,  # calibration since V100 fp16 conv is its own (was -12.7 with A100's)
    "rn50-dgx1v16-fp32-8gpu": -0.8,
    "rn50-dgx1v16-amp-8gpu": -6.4,  # input bound: 40 cores x 194.7 (EfficientNet-B0's cap: AutoAugment, heavier)
    "rn50-dgx1v32-fp32-1gpu": +3.1,
    "rn50-dgx1v32-amp-1gpu": +3.8,
    "rn50-dgx1v32-fp32-8gpu": +2.4,
    "rn50-dgx1v32-amp-8gpu": -3.3,  # input bound at the DGX-1's 7788 img/s
    "bertl-dgxa100-tf32-1gpu": -0.0,
    "bertl-dgxa100-amp-1gpu": +0.0,
    "bertl-dgxa100-tf32-8gpu": +0.9,
    "bertl-dgxa100-amp-8gpu": +0.7,
    "bertl-dgxa100-amp-1node": +1.6,
    "bertl-dgxa100-amp-2node": +0.2,
    "bertl-dgxa100-amp-4node": +1.0,
    "bertl-dgxa100-amp-8node": +1.0,
    "bertl-dgxa100-amp-16node": +0.3,
    "bertl-dgxa100-amp-32node": -1.6,
    "bertl-dgxa100-tf32-1node": +1.7,
    "bertl-dgxa100-tf32-2node": +1.3,
    "bertl-dgxa100-tf32-4node": +1.7,
    "bertl-dgxa100-tf32-8node": +0.2,
    "bertl-dgxa100-tf32-16node": +0.5,
    "bertl-dgxa100-tf32-32node": -0.0,  # calibration: BERT's straggler cv (parallelism.jitter_cv_by_input.tokenized)
    "bertl-dgx1v32-fp32-1gpu": -12.3,
    "bertl-dgx1v32-amp-1gpu": +6.5,
    "bertl-dgx1v32-fp32-8gpu": -9.5,
    "bertl-dgx1v32-amp-8gpu": +8.9,
    # MLPerf v3.0 ResNet-50 on DGX H100 (MXNet + DALI; model.fused_kernels = the network the run's config names:
    # estimator/workloads/cnn_fusion.py; -26.2 / -14.6 / -25.8 / -26.2 / -18.3 % priced as the PyTorch capture)
    "rn50-mlperf-dgxh100-amp-1node": +0.9,
    "rn50-mlperf-dgxh100-amp-8node": +7.1,
    "rn50-mlperf-azure-ndh100v5-amp-1node": +1.3,
    "rn50-mlperf-dell-xe9680-amp-1node": +0.9,
    "rn50-mlperf-dell-xe9680-amp-2node": +5.6,
}


def _current_capture(model: str) -> bool:
    """The repository's traces/<model>.workload.json exists and was captured as the tests need it
    (weight_bytes recorded, the model's capture batch); FLOPs and bytes depend only on shapes."""
    path = REPO / "traces" / f"{model}.workload.json"
    if not path.is_file():
        return False
    try:
        w = io.load(path)
    except EstimatorError:
        return False
    return "weight_bytes_estimate" in w.meta and w.batch_size == compose([f"model={model}"]).model.capture_batch


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """ResNet-50 and BERT-large with weight_bytes: the repository's captures when current, else
    captured once into a scratch dir (~1-4 min on a busy 2-core machine)."""
    models = ("resnet50", "bert_large")
    if all(_current_capture(m) for m in models):
        return REPO / "traces"
    tdir = tmp_path_factory.mktemp("traces")
    for model in models:
        ensure_workload(compose([f"model={model}", f"traces_dir={tdir}"]))
    return tdir


def predict(row: dict, traces, extra=()) -> dict:
    overrides = [
        *SYSTEMS[row["system"]], f"model={row['model']}", f"fabric.nodes={row['gpus']}",
        f"precision={row['precision']}", f"batch_size={row['batch_per_gpu']}", f"traces_dir={traces}",
        *row["overrides"].split(), *extra,
    ]  # fmt: skip
    return estimate(estimator.resolve_config(overrides)).metrics


def error_pct(row: dict, traces) -> float:
    return 100 * (predict(row, traces)["samples_per_s"] / float(row["measured_samples_per_s"]) - 1)


def test_rows_are_well_formed():
    assert set(ROWS) == set(PINNED_ERROR_PCT)
    for r in ROWS.values():
        assert r["role"] in ("calibration", "same-source", "independent")
        assert r["source"] and r["measured_what"] and r["hardware"]
        assert r["precision"] in ("fp32", "tf32", "fp16", "amp", "bf16") and int(r["gpus"]) >= 1
        assert "input_samples_per_s_per_node" not in r["overrides"]  # no row carries a measured loader rate
    assert sum(r["role"] == "calibration" for r in ROWS.values()) == 8  # the rest never set a constant


@pytest.mark.parametrize("row_id", sorted(PINNED_ERROR_PCT))
def test_row_error_is_pinned(traces, row_id):
    row = ROWS[row_id]
    err = error_pct(row, traces)
    assert err == pytest.approx(PINNED_ERROR_PCT[row_id], abs=PIN_MARGIN), f"{row_id} ({row['role']}): {err:+.1f} %"
    if row["role"] == "calibration":
        assert abs(err) < 3.5  # a calibration row is reproduced (the DGX-1 input limit is not reached)


def test_targets_single_gpu_within_15_percent(traces):
    singles = [r for r in ROWS.values() if r["gpus"] == "1"]
    errors = {r["id"]: error_pct(r, traces) for r in singles}
    assert all(abs(e) < 15 for e in errors.values()), errors


def scaling_points(rows, traces, one: str, many: str, n: int) -> float:
    """(predicted - measured) scaling efficiency in percentage points."""
    p = predict(rows[many], traces)["samples_per_s"] / predict(rows[one], traces)["samples_per_s"]
    m = float(rows[many]["measured_samples_per_s"]) / float(rows[one]["measured_samples_per_s"])
    return 100 * (p - m) / n


def test_targets_data_parallel_scaling(traces):
    # 8-GPU scaling within 5 points (the V100 AMP ResNet-50 pairs since V100 fp16 conv efficiency is
    # calibrated on a V100 row: with A100's value their 1-GPU estimates were 9-13 % low and the
    # 8-GPU data-loader limit never bound, so scaling looked 9-10 points too good). The DGX A100
    # AMP pair is input bound at the host's cores x per-core rate, a rate fitted on EfficientNet-B0,
    # not on this row (the plain `estimator estimate model=resnet50 system=dgx_a100 ...` command).
    for one, many in (("rn50-dgxa100-amp-1gpu", "rn50-dgxa100-amp-8gpu"),
                      ("bertl-dgxa100-tf32-1gpu", "bertl-dgxa100-tf32-8gpu"),
                      ("bertl-dgxa100-amp-1gpu", "bertl-dgxa100-amp-8gpu"),
                      ("rn50-dgx1v16-fp32-1gpu", "rn50-dgx1v16-fp32-8gpu"),
                      ("bertl-dgx1v32-amp-1gpu", "bertl-dgx1v32-amp-8gpu"),
                      ("bertl-dgx1v32-fp32-1gpu", "bertl-dgx1v32-fp32-8gpu")):  # fmt: skip
        assert abs(scaling_points(ROWS, traces, one, many, 8)) < 5, many
    # DGX-1 AMP: its per-core rate comes from EfficientNet-B0 (AutoAugment + bicubic: more CPU per image
    # than ResNet-50's pipeline), so the cap is low and the scaling 5.6-6.0 points pessimistic: a
    # stated miss of issue #10's 5-point target (validation/README.md), pinned here
    for one, many in (("rn50-dgx1v16-amp-1gpu", "rn50-dgx1v16-amp-8gpu"),
                      ("rn50-dgx1v32-amp-1gpu", "rn50-dgx1v32-amp-8gpu")):  # fmt: skip
        assert -6.5 < scaling_points(ROWS, traces, one, many, 8) < -5.0, many
    dgx_a100 = 100 * predict(ROWS["rn50-dgxa100-amp-8gpu"], traces)["samples_per_s"] / (
        8 * predict(ROWS["rn50-dgxa100-amp-1gpu"], traces)["samples_per_s"])
    assert abs(dgx_a100 - 84.1) < 5  # the published 16621 / (8 x 2470) = 84.1 % (was 96.3 % without the cap)
    # multi-node, 1 -> 2..32 DGX A100 nodes: the scaling (throughput ratio) within 5 % (#10's target).
    # No AMP row set anything (same-source: their table holds the calibration rows); tf32-32node set BERT's
    # straggler cv (validation/README.md).
    for p in ("amp", "tf32"):
        for nodes in (2, 4, 8, 16, 32):
            pct = scaling_points(ROWS, traces, f"bertl-dgxa100-{p}-1node", f"bertl-dgxa100-{p}-{nodes}node", nodes)
            pct *= nodes / (float(ROWS[f"bertl-dgxa100-{p}-{nodes}node"]["measured_samples_per_s"])
                            / float(ROWS[f"bertl-dgxa100-{p}-1node"]["measured_samples_per_s"]))
            assert abs(pct) < 5, (p, nodes, pct)


def test_weight_bytes_do_not_scale_with_the_batch(traces):
    """The batch-scaling bug: a GEMM's weight traffic must not grow with the batch."""
    w = io.load(traces / "bert_large.workload.json")
    assert w.batch_size == 1
    gemm = next(n for n in w.nodes if n.op == "aten::linear" and n.phase == "forward"
                and n.input_shapes[1] == (1024, 1024))  # fmt: skip
    assert gemm.weight_bytes >= 1024 * 1024 * 4  # the fp32 weight is read once
    big = w.scaled_to_batch(256).node_map()[gemm.id]
    activations = gemm.mem_bytes - gemm.weight_bytes
    assert big.mem_bytes == pytest.approx(gemm.weight_bytes + 256 * activations)
    assert big.mem_bytes < 0.25 * 256 * gemm.mem_bytes  # the old scaling read the weights 256 times


def test_grad_accum_gives_one_all_reduce_per_step_and_a_global_batch(traces):
    row = ROWS["rn50-dgxa100-tf32-8gpu"]
    one = predict(row, traces)
    four = predict(row, traces, ["parallelism.grad_accum=4"])
    assert four["global_batch"] == 256 * 4 * 8 and one["global_batch"] == 256 * 8
    assert four["num_collectives"] == one["num_collectives"] and four["comm_time_s"] == one["comm_time_s"]
    assert four["iter_time_s"] > 3 * one["iter_time_s"]
    assert four["samples_per_s"] > one["samples_per_s"]  # stragglers and comm amortised


def test_interference_and_host_overhead_slow_the_iteration(traces):
    row = ROWS["rn50-dgxa100-amp-8gpu"]
    free = ["parallelism.input.decode=none"]  # pre-decoded data: the host's loader is not a bound
    base = predict(row, traces, [*free, "parallelism.comm_interference=0"])
    more = predict(row, traces, [*free, "parallelism.comm_interference=1.0"])
    assert more["interference_s"] > 0 and more["iter_time_s"] > base["iter_time_s"]
    host = predict(row, traces, [*free, "parallelism.host_overhead_s=0.01"])
    assert host["iter_time_s"] == pytest.approx(base["iter_time_s"] + 0.01 * (1 + host["straggler_s"] / host["iter_time_s"]), rel=1e-2)
    limited = predict(row, traces)  # the preset's host: 128 cores x 130.1 img/s per DGX A100
    assert limited["input_bound"] and limited["samples_per_s"] == pytest.approx(128 * 130.1)
    fewer = predict(row, traces, ["parallelism.input.workers_per_gpu=4"])  # 32 workers on 128 cores
    assert fewer["samples_per_s"] == pytest.approx(32 * 130.1)
    bert = ROWS["bertl-dgxa100-amp-8gpu"]  # tokens, not JPEGs: the same host caps nothing
    assert not predict(bert, traces)["input_bound"]


def test_precisions_pick_their_peaks(traces):
    row = ROWS["bertl-dgxa100-amp-1gpu"]
    speeds = {p: predict(row, traces, [f"precision={p}"])["samples_per_s"] for p in ("fp32", "tf32", "fp16", "amp", "bf16")}
    assert speeds["amp"] == speeds["fp16"] == speeds["bf16"]  # A100: BF16 = FP16 tensor-core rate
    assert speeds["fp32"] < speeds["tf32"] < speeds["amp"]


@pytest.mark.parametrize(
    "overrides, needle",
    [
        (["device=v100", "precision=tf32"], "device v100 has no tf32"),
        (["device=v100", "precision=bf16"], "device v100 has no bf16"),
        (["precision=fp8"], "device a100 has no fp8"),  # FP8 tensor cores start with Hopper
        (["precision=fp4"], "precision must be one of"),
        (["parallelism.grad_accum=0"], "parallelism.grad_accum must be a positive integer"),
        (["parallelism.comm_interference=-1"], "parallelism.comm_interference"),
    ],
)
def test_bad_precision_and_parallelism_are_one_line_errors(tmp_path, overrides, needle):
    from tests.test_cli_errors import run_cli

    with pytest.raises(EstimatorError, match=needle.split()[0]):
        estimate(estimator.resolve_config([*overrides, f"traces_dir={tmp_path}"]))
    out = run_cli("estimate", *overrides, f"traces_dir={tmp_path}")
    assert out.returncode == 2 and needle in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr and not any(tmp_path.iterdir())
