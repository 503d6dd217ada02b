"""FSDP's unsharded unit gradient before its reduce-scatter (framework.zero3_unit_grad, conf/framework/fsdp.yaml) as
a layer-backward transient (estimator/parallel/memory.py): it comes once the layer's recomputed tensors are freed, so a
stage holds the larger of the recomputed layer and the unit gradient, and the last stage the larger of that and the
loss's backward peak."""

from __future__ import annotations

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout
from estimator.parallel.loss import logit_elements, peak_bytes
from estimator.parallel.memory import recomputed_bytes, stage_memory, zero3_unit_grad_bytes, zero3_units
from estimator.parallel.spec import TransformerSpec


def framework_cfg(name: str) -> dict:
    return dict(estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])["framework"])


def spec(model: str = "llama2_7b") -> TransformerSpec:
    return TransformerSpec.from_cfg(estimator.resolve_config([f"model={model}"])["model"])


def test_presets_state_the_key():
    assert framework_cfg("fsdp")["zero3_unit_grad"] is True
    for name in ("deepspeed", "deepspeed_2021", "megatron"):
        assert framework_cfg(name)["zero3_unit_grad"] is False, name


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_bad_value_is_a_one_line_error(value):
    with pytest.raises(EstimatorError, match="framework.zero3_unit_grad must be true or false") as err:
        Framework.from_cfg({**framework_cfg("fsdp"), "zero3_unit_grad": value})
    assert "\n" not in str(err.value)


def test_unit_gradient_is_16_bit_plus_the_fp32_reduce_copy():
    assert zero3_unit_grad_bytes(1e8, 4) == 6e8  # bf16 gradient + its fp32 copy (fp32 reduce)
    assert zero3_unit_grad_bytes(1e8, 2) == 2e8  # 16-bit reduce: no copy


def fsdp_pair():
    on = Framework.from_cfg(framework_cfg("fsdp"))
    return on, Framework.from_cfg({**framework_cfg("fsdp"), "zero3_unit_grad": False})


@pytest.mark.parametrize("recompute", ["full", "none"])
def test_a_stage_without_the_loss_holds_the_larger_of_the_recomputed_layer_and_the_unit_gradient(recompute):
    m = spec()
    on, off = fsdp_pair()
    unit_grad = zero3_unit_grad_bytes(max(zero3_units(m, Layout(1, 2, 8, 1, 1, 8, 3, False, recompute), "layer")), 4)
    seen = set()
    for mb in (1, 8):  # full recompute, mb 8: the recomputed layer is the larger
        lay = Layout(1, 2, 8, 1, mb, 8, 3, False, recompute)  # pp 2, ZeRO-3: stage 0 has no loss
        a, b = (stage_memory(m, lay, 0, 4, fw) for fw in (on, off))
        again = recomputed_bytes(m, lay, 0)
        assert (again > 0) == (recompute == "full")
        assert a["total"] - b["total"] == pytest.approx(max(0.0, unit_grad - again))
        assert a["gradients"] - b["gradients"] == pytest.approx(unit_grad if unit_grad > again else 0.0)
        seen.add(unit_grad > again)
    assert seen == ({True, False} if recompute == "full" else {True})


def test_last_stage_holds_the_largest_of_the_loss_peak_the_recomputed_layer_and_the_unit_gradient():
    m = spec()
    unit_grad = zero3_unit_grad_bytes(max(zero3_units(m, Layout(1, 1, 8, 1, 1, 8, 3, False, "full"), "layer")), 4)
    for mb, grows in ((1, False), (8, False), (1, True)):  # mb 1 / 8: torch's fp32 loss peak is the larger
        fw_on, fw_off = fsdp_pair() if not grows else (
            Framework.from_cfg({**framework_cfg("fsdp"), "loss_kernel": "te_fused"}),
            Framework.from_cfg({**framework_cfg("fsdp"), "loss_kernel": "te_fused", "zero3_unit_grad": False}))
        lay = Layout(1, 1, 8, 1, mb, 8, 3, False, "full")
        loss = peak_bytes(fw_on.loss_kernel) * logit_elements(m, lay)
        again = recomputed_bytes(m, lay, 0)
        a, b = (stage_memory(m, lay, 0, 4, fw)["total"] for fw in (fw_on, fw_off))
        assert a - b == pytest.approx(max(loss, again, unit_grad) - max(loss, again))
        assert (a > b) == grows == (unit_grad > loss), mb  # TE's in-place loss at mb 1: the unit gradient is larger
