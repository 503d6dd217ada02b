"""``estimator estimate ... ops=true``: the per-op breakdown of a parallelism=hybrid step (estimator/parallel/ops.py)
adds up to the step's compute time, lists the MoE layer's grouped GEMMs and dispatch ops, keeps the default output
unchanged, and refuses what it cannot break down in one line (exit 2)."""

from __future__ import annotations

import json

import pytest

import estimator
from estimator import cli
from estimator.estimate import estimate, estimate_config
from estimator.parallel.estimate import op_breakdown, setup_hybrid
from estimator.parallel.step import part_args, part_times, step_time

LLAMA = ["system=dgx_h100", "fabric.nodes=64", "model=llama3_70b", "parallelism=hybrid", "precision=bf16",
         "parallelism.tp=8", "parallelism.pp=4", "parallelism.global_batch=128"]
MIXTRAL = ["model=mixtral_8x7b", "system=dgx_h100", "fabric.nodes=64", "precision=bf16", "parallelism=hybrid",
           "parallelism.tp=1", "parallelism.pp=4", "parallelism.ep=8", "parallelism.global_batch=256"]


def ops_of(overrides):
    cfg = estimator.resolve_config(overrides)
    metrics = estimate(cfg).metrics
    return metrics, op_breakdown(estimate_config(cfg), metrics)


def part_sum(rows, part, phase):
    return sum(r["time_s"] for r in rows if r["part"] == part and r["phase"] == phase)


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_per_op_times_sum_to_the_layer_part_time_the_step_uses(recompute):
    overrides = [*LLAMA, f"parallelism.recompute={recompute}"]
    metrics, out = ops_of(overrides)
    s = setup_hybrid(estimate_config(estimator.resolve_config(overrides)))
    parts = part_times(s.spec, *part_args(s.spec, s.layout, s.framework, s.device, s.precision))
    rows = out["ops"]
    assert part_sum(rows, "layer", "forward") == pytest.approx(parts["layer"].fwd, rel=1e-9)
    assert part_sum(rows, "layer", "backward") == pytest.approx(parts["layer"].bwd, rel=1e-9)
    assert part_sum(rows, "head", "forward") == pytest.approx(parts["head"].fwd, rel=1e-9)
    assert part_sum(rows, "embedding", "backward") == pytest.approx(parts["embedding"].bwd, rel=1e-9)
    redo = part_sum(rows, "layer", "recompute")
    rerun = {"none": 0.0, "selective": parts["attention"].fwd, "full": parts["layer"].fwd}[recompute]
    assert redo == pytest.approx(rerun, rel=1e-9)
    tot = out["ops_totals"]
    assert tot["check"] == "ok"
    assert tot["rows_s"] + tot["outside_s"] == pytest.approx(metrics["compute_time_s"], rel=1e-9)
    # per step on the slowest stage: layers per stage x microbatches
    m, n = metrics["microbatches"], int(metrics["stage_layers"].split(",")[metrics["slowest_stage"]])
    assert {r["count_per_step"] for r in rows if r["part"] == "layer"} == {m * n}
    fwd = sum(r["step_time_s"] for r in rows if r["phase"] == "forward")
    assert fwd == pytest.approx(metrics["forward_s"], rel=1e-9)


def test_bounds_name_compute_memory_or_launch_floor():
    _, out = ops_of(LLAMA)
    bounds = {r["bound"].split()[0] for r in out["ops"]}
    assert {"compute", "memory", "launch", "no"} <= bounds
    gemm = next(r for r in out["ops"] if r["op"] == "aten::linear" and r["part"] == "layer")
    assert gemm["bound"].startswith("compute") and "TFLOP/s" in gemm["bound"] and gemm["flops"] > 0


def test_moe_layer_lists_grouped_gemms_and_dispatch_ops():
    metrics, out = ops_of([*MIXTRAL, "parallelism.recompute=selective"])
    ops = {(r["part"], r["op"]) for r in out["ops"]}
    for op in ("te::grouped_linear", "te::grouped_linear_dgrad", "te::grouped_linear_wgrad", "te::moe_permute",
               "te::moe_unpermute", "aten::topk"):
        assert ("moe_layer", op) in ops, op
    assert out["ops_totals"]["rows_s"] + out["ops_totals"]["outside_s"] == pytest.approx(metrics["compute_time_s"],
                                                                                         rel=1e-9)
    assert {r["phase"] for r in out["ops"] if r["part"] == "moe_layer"} == {"forward", "backward", "recompute"}


def test_formula_recompute_is_listed_outside_the_rows():
    metrics, out = ops_of([*LLAMA, "parallelism.recompute=selective", "parallelism.recompute_modules=[core_attn,mlp]"])
    assert any("recompute" in o["term"] for o in out["ops_outside"])
    assert out["ops_totals"]["rows_s"] + out["ops_totals"]["outside_s"] == pytest.approx(metrics["compute_time_s"],
                                                                                         rel=1e-9)


def test_json_shape(capsys):
    assert cli.run(["estimate", *LLAMA, "ops=true", "output=json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert isinstance(result["ops"], list) and result["ops"]
    assert set(result["ops"][0]) == {"part", "phase", "op", "op_class", "flops", "bytes", "time_s", "bound",
                                     "count_per_step", "step_time_s"}
    assert {o["term"] for o in result["ops_outside"]} == {"optimizer step"}
    tot = result["ops_totals"]
    assert tot["check"] == "ok" and tot["compute_time_s"] == result["compute_time_s"]
    assert set(tot["by_part"]) == {"layer", "embedding", "head", "loss"}
    assert "matmul" in tot["by_op_class"]


def test_text_table_and_default_output_unchanged(capsys):
    assert cli.run(["estimate", *LLAMA, "ops=true"]) == 0
    with_ops = capsys.readouterr().out
    assert "where the compute time goes" in with_ops and "by op class" in with_ops and "(ok)" in with_ops
    assert cli.run(["estimate", *LLAMA]) == 0
    plain = capsys.readouterr().out
    assert "where the compute time goes" not in plain
    assert with_ops.startswith(plain.rstrip("\n"))
    assert cli.run(["estimate", *LLAMA, "output=json"]) == 0
    assert not {"ops", "ops_outside", "ops_totals"} & set(json.loads(capsys.readouterr().out))


def test_step_time_unchanged_by_collecting_terms():
    s = setup_hybrid(estimate_config(estimator.resolve_config(LLAMA)))
    args = (s.spec, s.layout, s.fabric, s.device, s.precision, "default", s.overlap, s.framework, s.interference,
            s.interference_stated)
    terms = {}
    assert step_time(*args)[0] == step_time(*args, parts_out=terms)[0]
    assert terms["compute"] > 0


def _error(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and err.startswith("error: ")
    return err


def test_non_hybrid_model_is_refused_in_one_line(capsys):
    err = _error(["estimate", "model=resnet50", "fabric.nodes=8", "ops=true"], capsys)
    assert "ops=true" in err and "estimator inspect model=resnet50" in err


def test_bad_value_is_one_line(capsys):
    err = _error(["estimate", *LLAMA, "ops=maybe"], capsys)
    assert "ops must be true or false" in err


def test_searched_layout_is_refused_in_one_line(capsys):
    err = _error(["estimate", "model=llama3_8b", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=8",
                  "precision=bf16", "parallelism.placement=auto", "parallelism.global_batch=64", "ops=true"], capsys)
    assert "ops=true" in err and "parallelism.tp" in err
