"""scripts/attention_check.py: the paper's standard attention is captured with readable GEMM dims and priced."""

import importlib.util
from pathlib import Path

import pytest

from estimator.compute import gemm_shape

pytest.importorskip("torch")
_PATH = Path(__file__).resolve().parents[1] / "scripts" / "attention_check.py"
_spec = importlib.util.spec_from_file_location("attention_check", _PATH)
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


def test_attention_ops_have_readable_gemm_dims():
    w = check.workload(256, 0.1, True)
    gemms = [gemm_shape.node_dims(n) for n in w.nodes if n.op_class == "matmul"]
    # forward q k^T (K = head dim 64) and probs v, backward two GEMMs per forward GEMM
    assert len(gemms) == 6 and None not in gemms
    assert (128.0, 256.0, 256.0, 64.0) in gemms  # G = batch 16 x 8 heads
    ops = [n.op for n in w.nodes if n.op_class in ("elementwise", "softmax")]
    assert {"aten::masked_fill_", "aten::softmax", "aten::native_dropout", "aten::native_dropout_backward",
            "aten::_softmax_backward_data", "aten::masked_fill"} <= set(ops)


def test_dropout_and_mask_add_elementwise_time():
    from omegaconf import OmegaConf

    from estimator.compute.device import DeviceProfile

    dev = DeviceProfile.from_dict(OmegaConf.to_container(OmegaConf.load(Path(check.__file__).parents[1]
                                                                       / "conf/device/a100.yaml")))
    none, both = check.price(dev, 1024, "none"), check.price(dev, 1024, "drop+mask")
    assert both[("forward", "bmm")] == pytest.approx(none[("forward", "bmm")])
    assert both[("forward", "elementwise")] > 5 * none[("forward", "elementwise")]


def test_bad_bandwidth_exits_2():
    assert check.main(["--bw", "0"]) == 2
