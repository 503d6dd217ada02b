"""model.fused_kernels for a data-parallel ResNet: NVIDIA's MLPerf MXNet kernels (estimator/workloads/cnn_fusion.py)."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

import pytest

from estimator.config import compose, to_container
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.workloads import cnn_fusion
from estimator.workloads.capture import ensure_workload
from estimator.workloads.graph import Workload

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    """The repository's traces/ when it holds ResNet-50's capture, else ResNet-50 captured once into a scratch dir
    (a fresh checkout, as CI runs it, has no captures)."""
    if (REPO / "traces" / "resnet50.workload.json").is_file():
        return REPO / "traces"
    tdir = tmp_path_factory.mktemp("traces")
    ensure_workload(compose(["model=resnet50", f"traces_dir={tdir}"]))
    return tdir


@pytest.fixture(scope="module")
def workload(traces) -> Workload:
    return Workload.from_dict(json.loads((traces / "resnet50.workload.json").read_text()))


def _fused(w: Workload, profile: str) -> collections.Counter:
    gone = cnn_fusion.fused_nodes(w, profile)
    return collections.Counter((n.phase, n.name.split("::")[-1]) for n in w.nodes if n.id in gone)


def test_norm_conv_fuses_every_block_batchnorm_and_every_relu(workload):
    c = _fused(workload, "nhwc_norm_conv")
    # ResNet-50: 53 BatchNorms (the stem's keeps its passes), 49 ReLUs, 53 num_batches_tracked counters
    assert c[("forward", "batch_norm")] == 52
    assert c[("forward", "relu_")] == 49 and c[("backward", "threshold_backward")] == 49
    assert c[("forward", "add_")] == 53
    assert c[("forward", "add")] == 0 and c[("backward", "native_batch_norm_backward")] == 0  # kept


def test_bn_relu_fuses_only_each_blocks_third_batchnorm(workload):
    c = _fused(workload, "nhwc_bn_relu")
    assert c[("forward", "batch_norm")] == 16  # 16 bottlenecks: bn3 into BatchNormAddRelu; bn1, bn2, shortcuts stay
    assert c[("forward", "relu_")] == 49 and c[("backward", "threshold_backward")] == 49


def test_none_keeps_the_capture(workload):
    w = workload
    assert cnn_fusion.apply(w, "none") is w and cnn_fusion.apply(w, None) is w


def test_fused_nodes_cost_nothing_and_the_rest_is_untouched(workload):
    w = workload
    f = cnn_fusion.apply(w, "nhwc_norm_conv")
    gone = cnn_fusion.fused_nodes(w, "nhwc_norm_conv")
    for a, b in zip(w.nodes, f.nodes, strict=True):
        if a.id in gone:
            assert b.mem_bytes == 0 and b.flops == 0
        else:
            assert b == a


def _rate(traces: Path, *overrides: str) -> float:
    cfg = to_container(compose(["system=dgx_h100", "fabric.nodes=8", "model=resnet50", "precision=amp",
                                "batch_size=400", "parallelism.input.decode=gpu", f"traces_dir={traces}", *overrides]))
    return estimate(cfg).metrics["samples_per_s"]


def test_fusion_orders_the_estimates(traces):
    eager, bn_relu, norm_conv = (_rate(traces, f"model.fused_kernels={k}") for k in ("none", "nhwc_bn_relu", "nhwc_norm_conv"))
    assert eager < bn_relu < norm_conv
    assert norm_conv / eager > 1.2  # a fifth of the step was BatchNorm / ReLU passes over the activations


def test_not_a_resnet_is_refused(workload):
    w = workload
    with pytest.raises(EstimatorError, match="not a ResNet"):
        cnn_fusion.fused_nodes(type(w)(**{**w.__dict__, "name": "vgg16"}), "nhwc_norm_conv")


@pytest.mark.parametrize("value", ["bogus", "te"])
def test_bad_value_is_a_one_line_error(value):
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", "model=resnet50",
                          f"model.fused_kernels={value}"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "model.fused_kernels must be one of" in out.stderr
    assert "Traceback" not in out.stderr
