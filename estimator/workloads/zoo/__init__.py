"""The model zoo: ``build(model_cfg) -> ZooModel`` for every model in ``conf/model/``.

A model config names its architecture with ``arch`` (default: its ``name``); the builder reads the
shape keys it needs (``input_size``/``num_classes`` for vision networks; ``seq_len`` and the
transformer sizes for BERT) and raises :class:`~estimator.errors.EstimatorError` naming the key
when one is missing or invalid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from estimator.errors import EstimatorError
from estimator.workloads.zoo.common import ZooModel, count_params

__all__ = ["ARCHITECTURES", "ZooModel", "build", "count_params"]


def _builders() -> dict[str, Callable[..., ZooModel]]:
    from estimator.workloads.zoo.bert import build_bert
    from estimator.workloads.zoo.lenet import build_lenet5
    from estimator.workloads.zoo.mobilenet import build_mobilenet_v2
    from estimator.workloads.zoo.resnet import build_resnet50
    from estimator.workloads.zoo.vgg import build_vgg

    return {
        "resnet50": build_resnet50,
        "vgg13": partial(build_vgg, arch="vgg13"),
        "vgg16": partial(build_vgg, arch="vgg16"),
        "mobilenet_v2": build_mobilenet_v2,
        "lenet5": build_lenet5,
        "bert": build_bert,
    }


ARCHITECTURES = ("resnet50", "vgg13", "vgg16", "mobilenet_v2", "lenet5", "bert")


def architecture(model_cfg: Mapping[str, Any]) -> str:
    arch = model_cfg.get("arch") or model_cfg.get("name")
    if arch not in ARCHITECTURES:
        raise EstimatorError(
            f"model {model_cfg.get('name')!r}: unknown architecture {arch!r}; zoo has {', '.join(ARCHITECTURES)}"
        )
    return str(arch)


def build(model_cfg: Mapping[str, Any], device: str | None = None) -> ZooModel:
    """Build the model described by ``model_cfg`` (a ``conf/model/*.yaml`` mapping) with random
    weights, on ``device`` (default CPU; ``"meta"`` allocates nothing, for FLOP counting)."""
    try:
        import torch
    except ImportError:
        raise EstimatorError("building zoo models needs PyTorch: pip install 'estimator[capture]'") from None

    cfg = dict(model_cfg)
    if not cfg.get("name"):
        raise EstimatorError("model.name is missing")
    arch = architecture(cfg)
    with torch.device(device or "cpu"):
        return _builders()[arch](cfg, where="model")
