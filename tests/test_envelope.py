"""The class of run of a hybrid estimate and the validation record printed beside it
(estimator/validation/envelope.py)."""

from __future__ import annotations

import pytest

from estimator.config import compose, to_container
from estimator.errors import EstimatorError
from estimator.validation.envelope import (
    RECORD_FILE,
    Entry,
    describe,
    distance,
    nearest,
    read_record,
    run_class,
    trust,
    verdict,
    write_record,
)


def cls_of(*overrides: str) -> str | None:
    return run_class(to_container(compose(list(overrides))))


def test_classes_follow_stack_sequence_and_checkpointing():
    base = ("system=dgx_h100", "fabric.nodes=64", "model=llama3_8b", "parallelism=hybrid")
    assert cls_of(*base, "framework=megatron") == "megatron/le16k"
    assert cls_of(*base, "framework=megatron", "model.seq_len=32768") == "megatron/gt16k"
    assert cls_of(*base, "framework=fsdp", "parallelism.recompute=none") == "fsdp/le16k/no-ac"
    assert cls_of(*base, "framework=fsdp", "parallelism.recompute=full") == "fsdp/le16k/ac"
    assert cls_of(*base, "framework=fsdp", "parallelism.recompute=none", "model.seq_len=65536") == "fsdp/gt16k"
    assert cls_of(*base, "framework=deepspeed_2021", "parallelism.zero=3") == "deepspeed_2021/le16k/zero3"
    assert cls_of("model=resnet50", "system=dgx_a100", "fabric.nodes=8") is None  # not an LLM estimate
    moe = ("system=dgx_h100", "fabric.nodes=64", "model=mixtral_8x7b", "parallelism=hybrid", "parallelism.ep=8")
    assert cls_of(*moe) == "megatron/le16k/moe"
    assert cls_of(*moe, "model.num_experts=0") == "megatron/le16k"  # the same shape, dense


def test_describe_names_each_part():
    assert describe("fsdp/le16k/no-ac") == "PyTorch FSDP, up to 16k tokens, no activation checkpointing"
    assert describe("megatron/gt16k") == "Megatron-LM / NeMo, over 16k tokens"
    assert describe("megatron/le16k/moe") == "Megatron-LM / NeMo, up to 16k tokens, mixture of experts"


def entry(ident, cls, role, error, params=8.0, gpus=8, seq=8192, device="h100", precision="bf16"):
    return Entry(ident, cls, role, error, params, gpus, seq, device, precision)


def test_trust_counts_only_independent_rows_of_the_class(tmp_path):
    write_record(tmp_path / RECORD_FILE, [
        entry("a", "megatron/le16k", "independent", 4.0), entry("b", "megatron/le16k", "independent", -10.0),
        entry("c", "megatron/le16k", "calibration", 0.0), entry("d", "fsdp/gt16k", "independent", 60.0)])
    cfg = to_container(compose(["system=dgx_h100", "fabric.nodes=8", "model=llama3_8b", "parallelism=hybrid",
                                "framework=megatron"]))
    out = trust(cfg, tmp_path)
    assert out["validation_class"] == "Megatron-LM / NeMo, up to 16k tokens"
    assert out["validation_record"].startswith("2 independent published runs: mean |error| 7.0 %, range -10.0 .. +4.0 %")
    assert out["validation_record"].endswith(": too few rows")  # two rows: no verdict under issue #23's rule
    cfg["framework"]["name"] = "deepspeed"
    assert "unvalidated" in trust(cfg, tmp_path)["validation_record"]
    assert "not found" in trust(cfg, tmp_path / "missing")["validation_record"]


def test_verdict_applies_issue_23s_rule_both_ways():
    assert verdict([5.0, -8.0, 19.9]) == "fails"  # max under 20 % but mean (5 + 8 + 19.9) / 3 = 11.0 > 10 %
    assert verdict([2.0, -8.0, 19.9]) == "holds"  # mean 10.0, max 19.9
    assert verdict([1.0, -1.0, 20.5]) == "fails"  # max over 20 %
    assert verdict([12.0, -12.0, 12.0]) == "fails"  # mean over 10 %
    assert verdict([1.0, 2.0]) == "too few rows"


def test_malformed_record_is_one_line_naming_the_line(tmp_path):
    path = tmp_path / RECORD_FILE
    head = "id,class,role,error_pct,params_b,gpus,seq_len,device,precision\n"
    path.write_text(head + "a,megatron/le16k,independent,abc,8,8,8192,h100,bf16\n")
    with pytest.raises(EstimatorError, match=r"record.csv:2: column error_pct: 'abc' is not a valid number"):
        read_record(path)
    path.write_text(head + "a,megatron/le16k,independent,1.0,0,8,8192,h100,bf16\n")
    with pytest.raises(EstimatorError, match=r"record.csv:2: column params_b: '0' is not a valid number"):
        read_record(path)
    path.write_text("id,error_pct\n")
    with pytest.raises(EstimatorError, match=r"record.csv:1: header must be"):
        read_record(path)


def test_estimate_prints_the_record_of_its_class():
    from estimator.commands import estimate

    out = estimate.run(to_container(compose([
        "system=dgx_h100", "fabric.nodes=8", "model=llama3_8b", "parallelism=hybrid", "framework=megatron",
        "precision=bf16", "parallelism.global_batch=16"])))
    assert out["validation_class"] == "Megatron-LM / NeMo, up to 16k tokens"
    assert "independent published runs" in out["validation_record"]  # validation/record.csv is committed
    assert "validation_record" in estimate.format_text(out)


def test_nearest_runs_are_the_most_alike_independent_ones():
    """Model size weighs most, then GPU count and sequence length, class, GPU generation and precision."""
    me = entry("me", "megatron/le16k", "", 0.0, params=70.0, gpus=512)
    assert distance(me, me) == 0
    same_size_more_gpus = entry("x", "megatron/le16k", "independent", 1.0, params=70.0, gpus=2048)
    other_size = entry("y", "megatron/le16k", "independent", 2.0, params=8.0, gpus=512)
    other_stack = entry("z", "fsdp/le16k/ac", "independent", 3.0, params=70.0, gpus=512)
    a100 = entry("w", "megatron/le16k", "independent", 4.0, params=70.0, gpus=512, device="a100")
    gt = entry("v", "megatron/le16k", "independent", 5.0, params=70.0, gpus=512, device="h100_gt")  # still an H100
    calib = entry("u", "megatron/le16k", "calibration", 0.0, params=70.0, gpus=512)
    assert distance(me, gt) == 0 < distance(me, a100) < distance(me, same_size_more_gpus) < distance(me, other_stack)
    assert distance(me, other_stack) < distance(me, other_size)
    cfg = to_container(compose(["system=dgx_h100", "fabric.nodes=512", "model=llama3_70b", "parallelism=hybrid",
                                "framework=megatron", "precision=bf16", "parallelism.tp=8"]))
    pool = [same_size_more_gpus, other_size, other_stack, a100, gt, calib]
    assert [e.id for e in nearest(cfg, "megatron/le16k", pool)] == ["v", "w", "x"]  # never a calibration row


def test_estimate_lists_the_nearest_published_runs_with_their_errors():
    from estimator.commands import estimate
    from estimator.validation import load_rows
    from estimator.validation.rows import RECORD_FILE as RECORD

    out = estimate.run(to_container(compose([
        "system=dgx_h100", "fabric.nodes=512", "model=llama3_70b", "parallelism=hybrid", "framework=megatron",
        "precision=bf16", "parallelism.tp=8", "parallelism.pp=2", "parallelism.global_batch=512"])))
    listed = [part.rsplit(" ", 2)[0] for part in out["validation_nearest"].split("; ")]
    assert len(listed) == 3 and "validation_nearest" in estimate.format_text(out)
    from pathlib import Path
    folder = Path(__file__).resolve().parents[1] / "validation"
    rows = {r.id: r for r in load_rows(folder)}
    recorded = {e.id: e for e in read_record(folder / RECORD)}
    for ident in listed:  # real independent rows, printed with the error the record holds
        assert rows[ident].role == "independent" and f"{ident} {recorded[ident].error_pct:+.1f} %" in out["validation_nearest"]
