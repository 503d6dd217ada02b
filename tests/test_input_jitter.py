"""The straggler cv follows what the model reads (model.input -> parallelism.jitter_cv_by_input), in a
single estimate and in a cluster's jobs; parallelism.sync_jitter_cv, when set, overrides it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.timeline.dataparallel import BucketPolicy, expected_max_normal
from estimator.workloads import io
from tests.helpers import chain_workload

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "traces"


def _policy_and_input(*overrides: str) -> tuple[BucketPolicy, str | None]:
    cfg = estimator.resolve_config(list(overrides))
    return BucketPolicy.from_dict(cfg["parallelism"]), cfg["model"].get("input")


def _needs(model: str) -> None:
    if not (TRACES / f"{model}.workload.json").exists():
        pytest.skip(f"traces/{model}.workload.json not captured")


@pytest.mark.parametrize("model, kind, cv", [("bert_large", "tokenized", 0.0126), ("bert_base", "tokenized", 0.0126),
                                             ("resnet50", "imagenet_jpeg", 0.025), ("lenet5", None, 0.025)])
def test_presets_give_each_model_its_input_kind_and_cv(model, kind, cv):
    policy, model_input = _policy_and_input(f"model={model}")
    assert policy.sync_jitter_cv is None  # null in conf/parallelism/data.yaml: the input kind decides
    assert model_input == kind
    assert policy.jitter_cv(model_input) == cv  # lenet5 names no input: 'other' (ResNet-50's value)
    explicit, _ = _policy_and_input(f"model={model}", "parallelism.sync_jitter_cv=0.1")
    assert explicit.jitter_cv(model_input) == 0.1  # an explicit value wins for every model


def test_lookup_order_and_an_empty_table():
    table = {"imagenet_jpeg": 0.03, "tokenized": 0.01, "other": 0.02}
    policy = BucketPolicy(jitter_cv_by_input=table)
    assert policy.jitter_cv("tokenized") == 0.01 and policy.jitter_cv("imagenet_jpeg") == 0.03
    assert policy.jitter_cv(None) == 0.02 and policy.jitter_cv("audio") == 0.02  # unknown kind: 'other'
    assert BucketPolicy(jitter_cv_by_input={"tokenized": 0.01}).jitter_cv("audio") == 0.0  # no 'other'
    assert BucketPolicy().jitter_cv("tokenized") == 0.0  # the plain mechanics: no straggler wait
    assert hash(policy) == hash(BucketPolicy.from_dict({"jitter_cv_by_input": dict(reversed(table.items()))}))


@pytest.mark.parametrize("par, needle", [
    ({"jitter_cv_by_input": {"tokenized": -0.1}}, "parallelism.jitter_cv_by_input.tokenized must be a number >= 0"),
    ({"jitter_cv_by_input": {"other": "high"}}, "parallelism.jitter_cv_by_input.other must be a number >= 0"),
    ({"jitter_cv_by_input": [0.1]}, "parallelism.jitter_cv_by_input must be a mapping"),
    ({"sync_jitter_cv": -1}, "parallelism.sync_jitter_cv must be a number >= 0"),
])
def test_bad_cvs_are_one_line_errors(par, needle):
    with pytest.raises(EstimatorError, match=needle.replace(".", r"\.")) as err:
        BucketPolicy.from_dict(par)
    assert "\n" not in str(err.value)


def test_cli_negative_cv_in_the_table_exits_2(tmp_path):
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", "model=bert_large",
                          "parallelism.jitter_cv_by_input.tokenized=-0.1", f"traces_dir={tmp_path}"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1 and "parallelism.jitter_cv_by_input.tokenized must be a number >= 0" in out.stderr


def test_an_imported_workload_gets_the_other_cv(tmp_path):
    """``workload=`` replaces the model: its input is unknown, so the default model's (ResNet-50's
    JPEGs) kind must not leak in."""
    from estimator.estimate import estimate

    path = io.save(chain_workload([1e-3], [1e-3] * 4, 0.0, [10**6] * 4), tmp_path / "chain.workload.json")
    base = ["+device.replay=true", "fabric=ideal", "fabric.nodes=8", f"workload={path}",
            "parallelism.jitter_cv_by_input.other=0.2"]
    m = estimate(estimator.resolve_config(base)).metrics
    assert m["straggler_s"] == pytest.approx(m["compute_time_s"] * 0.2 * expected_max_normal(8))


def test_bert_gets_its_own_cv_without_an_override():
    """The README-level BERT command: the validation rows' former override is now the preset."""
    from estimator.estimate import estimate

    _needs("bert_large")
    cmd = ["model=bert_large", "system=dgx_a100", "fabric.nodes=32", "precision=tf32"]
    plain = estimate(estimator.resolve_config(cmd)).metrics
    pinned = estimate(estimator.resolve_config([*cmd, "parallelism.sync_jitter_cv=0.0126"])).metrics
    jpeg_cv = estimate(estimator.resolve_config([*cmd, "parallelism.sync_jitter_cv=0.025"])).metrics
    assert plain["straggler_s"] == pinned["straggler_s"] > 0
    assert plain["samples_per_s"] == pinned["samples_per_s"] > jpeg_cv["samples_per_s"]


def _pricer(*overrides: str):
    from estimator.cluster.pricing import JobPricer
    from estimator.fabrics.registry import make_fabric

    cfg = estimator.resolve_config(["fabric=ideal", "fabric.nodes=16", *overrides])
    return JobPricer(cfg, make_fabric(cfg["fabric"]))


def test_a_cluster_resnet50_job_is_capped_by_its_jpeg_pipeline():
    """A cluster job reads its model's input kind: ResNet-50 on hosts of 1 core x 1 img/s is input
    bound (16 GPUs x batch 32 over 2 nodes x 1 img/s = 256 s per step); BERT reads tokens: no cap."""
    _needs("resnet50")
    host = ["parallelism.input.cpu_cores=1", "parallelism.input.cpu_decode_per_core_per_s=1.0"]
    pricer = _pricer(*host)
    spec = pricer.spec("resnet50", "", None)
    assert spec.model_input == "imagenet_jpeg"
    assert pricer.iteration(spec, 16).iter_s == pytest.approx(16 * 32 / 2)
    assert _pricer().iteration(_pricer().spec("resnet50", "", None), 16).iter_s < 1.0  # no host: no cap


def test_a_cluster_bert_job_gets_the_tokenized_cv():
    _needs("bert_large")
    pricer = _pricer()
    spec = pricer.spec("bert_large", "", None)
    assert spec.model_input == "tokenized"
    mine = pricer.iteration(spec, 16).iter_s
    pinned = _pricer("parallelism.sync_jitter_cv=0.0126")
    assert mine == pinned.iteration(pinned.spec("bert_large", "", None), 16).iter_s
    jpeg = _pricer("parallelism.sync_jitter_cv=0.025")
    assert mine < jpeg.iteration(jpeg.spec("bert_large", "", None), 16).iter_s
