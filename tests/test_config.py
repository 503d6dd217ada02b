import json
import subprocess
import sys

import pytest

from estimator import config
from estimator.errors import EstimatorError
from estimator.sweep import grid


def test_compose_defaults_and_overrides():
    cfg = config.compose(["fabric.nodes=64", "device=h100"])
    assert cfg.fabric.nodes == 64 and cfg.device.name == "h100" and cfg.model.name == "resnet50"
    assert "hydra" not in cfg


@pytest.mark.parametrize(
    "override, message",
    [
        ("model=nosuchmodel", "unknown model 'nosuchmodel'"),
        ("fabric=nosuchfabric", "unknown fabric 'nosuchfabric'"),
        ("fabric.nodez=3", "nodez"),
        ("device=", "device"),
    ],
)
def test_bad_overrides_are_one_line_errors(override, message):
    with pytest.raises(EstimatorError) as exc:
        config.compose([override])
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_multirun_expansion_is_a_product():
    points = config.expand_multirun(["fabric.nodes=8,64", "device=a100,h100", "output=json"])
    assert len(points) == 4
    assert ["fabric.nodes=8", "device=a100", "output=json"] in points
    assert config.expand_multirun(["fabric.nodes=range(8,33,8)"])[-1] == ["fabric.nodes=32"]


def test_flatten_and_hash_are_stable():
    a = {"fabric": {"name": "ideal", "nodes": 8}, "x": [1, 2]}
    b = {"x": [1, 2], "fabric": {"nodes": 8, "name": "ideal"}}
    assert config.flatten(a) == {"fabric.name": "ideal", "fabric.nodes": 8, "x": "[1, 2]"}
    assert config.config_hash(a) == config.config_hash(b)
    assert config.config_hash(a) != config.config_hash({**a, "x": [2, 1]})


def test_sweep_grid_expands_and_composes():
    pts = grid.expand({"fabric.nodes": [8, 16, 32], "device": ["a100", "h100"]})
    assert len(pts) == 6
    cfgs = grid.compose_points(pts)
    assert {(c["fabric"]["nodes"], c["device"]["name"]) for c in cfgs} == {
        (n, d) for n in (8, 16, 32) for d in ("a100", "h100")
    }
    zipped = grid.expand({"a.b": [1, 2], "a.c": [3, 4], "d": [5]}, zipped=[["a.b", "a.c"]])
    assert zipped == [{"a.b": 1, "a.c": 3, "d": 5}, {"a.b": 2, "a.c": 4, "d": 5}]


def test_sweep_grid_rejects_unknown_keys():
    with pytest.raises(EstimatorError, match="fabric.nodez"):
        grid.compose_points([{"fabric.nodez": 3}])


def test_composition_cache_equals_hydra_and_follows_conf_edits(tmp_path, monkeypatch):
    import shutil

    from omegaconf import OmegaConf

    conf = tmp_path / "conf"
    shutil.copytree(config.conf_dir(), conf)
    monkeypatch.setenv("ESTIMATOR_CONF", str(conf))
    monkeypatch.setenv("ESTIMATOR_CACHE", str(tmp_path / "cache"))
    overrides = ("model=resnet50", "fabric=lumorph", "fabric.nodes=64")
    hydra = config._hydra_compose(overrides, "config")
    config._compose_cached.cache_clear()
    config._compose_cached(overrides, "config")  # composes and writes the cache
    config._compose_cached.cache_clear()
    assert len(list((tmp_path / "cache" / "compose").glob("*.json"))) == 1
    cached = config._compose_cached(overrides, "config")
    assert OmegaConf.to_yaml(cached) == OmegaConf.to_yaml(hydra) and OmegaConf.is_struct(cached)
    text = (conf / "fabric" / "lumorph.yaml").read_text()
    (conf / "fabric" / "lumorph.yaml").write_text(text + "\n# edited: a longer file\n")
    config._compose_cached.cache_clear()
    config._compose_cached(overrides, "config")
    assert len(list((tmp_path / "cache" / "compose").glob("*.json"))) == 2  # an edit is a new key
    config._compose_cached.cache_clear()


def test_plain_composition_equals_the_resolved_config(tmp_path, monkeypatch):
    """The CLI's fast path (a plain dict straight from the cache) is the resolved DictConfig; it is
    refused (None) before anything is cached and when the config holds an interpolation."""
    monkeypatch.setenv("ESTIMATOR_CACHE", str(tmp_path / "cache"))
    overrides = ["model=resnet50", "fabric=ocs", "fabric.nodes=64"]
    config._compose_cached.cache_clear()
    assert config.compose_plain(overrides) is None  # nothing cached yet
    resolved = config.to_container(config.compose(overrides))
    assert config.compose_plain(overrides) == resolved
    interpolated = ["model=resnet50", "+note=${fabric.name}"]
    config.compose(interpolated)
    assert config.compose_plain(interpolated) is None
    config._compose_cached.cache_clear()


def test_cli_estimate_from_the_cache_imports_no_hydra_or_omegaconf(tmp_path):
    """A cached `estimator estimate` runs without Hydra, OmegaConf or importlib.metadata (their
    imports were ~0.2 s of a 0.45 s call) and prints the same result as the composed path."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "ESTIMATOR_CACHE": str(tmp_path / "cache")}
    probe = ("import sys, runpy; sys.argv = ['estimator'] + sys.argv[1:]; from estimator.cli import run; "
             "code = run(sys.argv[1:]); "
             "print('LOADED', sorted(m for m in ('hydra', 'omegaconf', 'importlib.metadata', 'duckdb', 'ray', "
             "'polars', 'torch') if m in sys.modules), file=sys.stderr)")
    args = ["estimate", "model=resnet50", "fabric=ideal", "fabric.nodes=8", "output=json"]
    outs = []
    for _ in range(2):  # the first composes (and caches), the second reads the cache
        got = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env,
                             check=True)
        outs.append((json.loads(got.stdout), got.stderr.strip().splitlines()[-1]))
    assert "omegaconf" in outs[0][1]
    assert outs[1][1] == "LOADED []"
    assert outs[0][0] == outs[1][0]


def test_a_decoder_only_model_implies_the_hybrid_layout():
    compose, implied_overrides = config.compose, config.implied_overrides
    assert compose(["model=llama3_8b"]).parallelism.strategy == "hybrid"  # not captured whole as a zoo model
    assert compose(["model=gpt3_175b", "parallelism.tp=4"]).parallelism.tp == 4
    assert compose(["model=resnet50"]).parallelism.strategy == "data"
    assert compose(["model=llama3_8b", "parallelism=data"]).parallelism.strategy == "data"  # the user's choice stands
    assert implied_overrides(["model=llama3_8b,resnet50"]) == ["model=llama3_8b,resnet50"]  # a multirun: per job
    assert implied_overrides(["model=llama3_8b"]) == ["model=llama3_8b", "parallelism=hybrid"]


def test_the_obvious_llm_command_estimates_a_layout():
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", "model=llama3_8b", "system=dgx_h100",
                          "fabric.nodes=8", "precision=bf16", "output=json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    # no tp / pp stated: the fastest layout that fits is searched (tests/test_default_layout.py)
    assert result["placement"] == "auto" and result["searched"] == "tp, pp, recompute" and 0 < result["mfu"] < 1
    assert result["tp"] * result["pp"] * result["dp"] == 8


def test_a_decoder_only_model_is_refused_as_data_parallel_before_any_capture(tmp_path):
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", "model=llama3_8b", "parallelism=data",
                          f"traces_dir={tmp_path}"], capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == ["error: model 'llama3_8b' is a decoder-only transformer: estimate it "
                                               "with parallelism=hybrid (its tp/cp/pp/dp layout), not parallelism=data"]
    assert not list(tmp_path.iterdir())  # nothing captured
