"""The first hour of "the obvious command" (docs/research/h96-obvious-commands.md): refusals that name the input and
a hint that is itself accepted, layout searches that start from what was stated, and a handful of the cheapest
commands of scripts/obvious_commands.py through the CLI."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate, validate
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout
from estimator.parallel.search import _first_fit, candidates
from estimator.parallel.spec import TransformerSpec

ROOT = Path(__file__).resolve().parent.parent


def cfg(*overrides: str) -> dict:
    return estimator.resolve_config(["parallelism=hybrid", "precision=bf16", *overrides])


QWEN = ("model=qwen3_235b_a22b", "system=dgx_h100", "fabric.nodes=256", "model.seq_len=4096", "parallelism.tp=2",
        "parallelism.pp=8", "parallelism.ep=32", "parallelism.global_batch=512")


def test_ep_over_tp_ranks_refusal_names_etp_1_which_is_accepted():
    # Megatron-Bridge's Qwen3 / DeepSeek-V3 recipes: tp > 1 with expert_tensor_parallel_size 1 (layout.py cites them)
    with pytest.raises(EstimatorError, match=r"parallelism.ep=32 must divide .*dp=16.*parallelism\.etp=1"):
        validate(cfg(*QWEN))
    validate(cfg(*QWEN, "parallelism.etp=1"))


def test_ep_refusal_without_a_working_etp_1_gives_no_hint():
    # ep 16 over 8 experts: etp=1 does not help, so it is not offered
    with pytest.raises(EstimatorError) as err:
        validate(cfg("model=mixtral_8x7b", "system=dgx_h100", "fabric.nodes=64", "parallelism.tp=2", "parallelism.pp=4",
                     "parallelism.ep=16", "parallelism.global_batch=256"))
    assert "etp=1" not in str(err.value)


@pytest.mark.parametrize("extra", [
    # a stated pp with interleaving: the search's base layout used to hold 1 microbatch and was refused for it
    ("parallelism.tp=4", "parallelism.pp=4", "parallelism.cp=2", "parallelism.virtual_stages=5", "parallelism.placement=auto"),
    # interleaving with tp / pp unstated: the base layout used pp=1 and was refused ("needs pp >= 2, got pp=1")
    ("parallelism.virtual_stages=5",),
])
def test_layout_search_starts_from_a_base_its_schedule_accepts(extra):
    validate(cfg("model=llama3_70b", "system=dgx_h100", "fabric.nodes=512", "model.seq_len=8192",
                 "parallelism.global_batch=512", *extra))


def test_dualpipe_search_base_is_accepted_and_its_no_fit_names_the_modes_tried():
    args = ("model=deepseek_v3", "system=dgx_h800", "fabric.nodes=2048", "model.seq_len=4096", "parallelism.tp=1",
            "parallelism.pp=16", "parallelism.ep=64", "parallelism.global_batch=15360", "parallelism.schedule=dualpipe",
            "parallelism.placement=auto")
    # in the memory model DeepSeek-V3's DualPipe layout needs recompute_modules (tests/test_dualpipe.py ROW); the
    # search's "no layout" names the modes it could try (not full, which DualPipe refuses)
    validate(cfg(*args))  # the base layout used to hold 1 microbatch, which DualPipe refuses
    with pytest.raises(EstimatorError, match=r"recompute none/selective$"):
        estimate(cfg(*args))


def test_search_does_not_give_dualpipe_a_full_recompute():
    # Layout.check refuses DualPipe with recompute=full; the search used to swap the mode in unchecked
    c = cfg("model=deepseek_v3", "system=dgx_h800", "fabric.nodes=2048", "parallelism.tp=1", "parallelism.pp=16",
            "parallelism.ep=64", "parallelism.global_batch=15360", "parallelism.schedule=dualpipe", "parallelism.recompute=none")
    spec = TransformerSpec.from_cfg(c["model"])
    shape = Layout.from_cfg(c["parallelism"], spec, 2048)
    refusals: list[EstimatorError] = []
    assert _first_fit(spec, shape, ("full",), None, Framework.from_cfg(c["framework"]), "bf16", refusals) is None
    assert "dualpipe" in str(refusals[0])


def test_memory_refusal_offers_the_search_only_when_it_finds_a_layout():
    base = ("model=llama3_8b", "system=dgx_h100", "fabric.nodes=8", "parallelism.tp=1", "parallelism.pp=1")
    with pytest.raises(EstimatorError) as err:  # 128k tokens on one GPU each: no micro-batch or recompute fits
        validate(cfg(*base, "model.seq_len=131072", "parallelism.global_batch=8"))
    assert "searches the tp/pp/dp layouts that fit" not in str(err.value)
    assert "finds none either with the stated tp=1, pp=1" in str(err.value)
    with pytest.raises(EstimatorError, match="searches the tp/pp/dp layouts that fit"):  # full recompute fits
        validate(cfg(*base, "model.seq_len=8192", "parallelism.global_batch=128"))
    validate(cfg(*base, "model.seq_len=8192", "parallelism.global_batch=128", "parallelism.placement=auto"))


def _script():
    spec = importlib.util.spec_from_file_location("obvious_commands", ROOT / "scripts" / "obvious_commands.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_script_ids_are_unique():
    ids = [c[0] for c in _script().COMMANDS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("cid", ["bad-tp0", "bad-misspelled-key", "bad-fp4", "bad-unknown-model"])
def test_cheapest_bad_inputs_are_one_line_errors(cid):
    mod = _script()
    (overrides, expect), = [(o, e) for i, o, e in mod.COMMANDS if i == cid]
    rec = mod.run_one(cid, overrides, expect, timeout=120)
    assert rec["rc"] == 2 and not rec["traceback"] and rec["error"].startswith("error: ")
    assert rec["flags"] == []


def test_search_skips_tp_x_cp_above_the_gpu_count():
    # 16 GPUs with cp 4: tp 8 x cp 4 is 32 ranks, dp would be 0 (a ZeroDivisionError in candidates before h98)
    c = cfg("model=llama3_8b", "system=dgx_h100", "fabric.nodes=16", "model.seq_len=32768", "parallelism.cp=4",
            "parallelism.global_batch=16")
    spec = TransformerSpec.from_cfg(c["model"])
    base = Layout.from_cfg({**c["parallelism"], "tp": 1, "pp": 1, "dp": None, "microbatches": 1, "recompute": "none"},
                           spec, 16)
    shapes = candidates(spec, base, 16, 8, 16, (1,))
    assert shapes and all(s.dp >= 1 and s.tp * s.cp * s.pp * s.dp == 16 for s in shapes)
