"""Shared pieces of the model zoo: the built-model record and config helpers.

Every builder returns a :class:`ZooModel`: the ``torch.nn.Module`` that is trained, a function that
makes a synthetic input batch (random data with a fixed generator, so captures are reproducible),
and the loss used for the training iteration. Models are created with random weights on the CPU
(or on any device given to ``build``; the meta device is used to count FLOPs without memory).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from estimator.errors import EstimatorError

Inputs = tuple[tuple[Any, ...], Any]  # (positional args for forward, target for the loss)


@dataclass
class ZooModel:
    """A model ready for one training iteration.

    ``make_inputs(batch, device)`` returns ``(args, target)``; ``loss_fn(output, target)`` returns a
    scalar. ``core`` is the sub-module whose parameter count / FLOPs the reference numbers describe
    (the BERT encoder inside BertForPreTraining; the whole model for vision networks).
    """

    name: str
    module: nn.Module
    make_inputs: Callable[[int, torch.device | str], Inputs]
    loss_fn: Callable[[Any, Any], torch.Tensor]
    core: nn.Module
    core_kwargs: tuple[str, ...] = ()
    info: dict[str, Any] = field(default_factory=dict)

    def run_core(self, batch: int, device: torch.device | str = "cpu") -> Any:
        """One forward pass of ``core`` on a synthetic batch (inputs passed by ``core_kwargs``
        names when given, else positionally)."""
        args = self.make_inputs(batch, device)[0]
        if self.core_kwargs:
            return self.core(**dict(zip(self.core_kwargs, args, strict=True)))
        return self.core(*args)


def count_params(module: nn.Module) -> int:
    """Number of distinct trainable parameters (tied weights counted once)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def positive_int(cfg: Mapping[str, Any], key: str, where: str) -> int:
    """``cfg[key]`` as a positive int, or an EstimatorError naming ``where.key``."""
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EstimatorError(f"{where}.{key} must be a positive integer, got {value!r}")
    return value


def classification_inputs(channels: int, size: int, num_classes: int, seed: int = 0):
    """``make_inputs`` for image classifiers: N x C x H x W normal images + integer labels."""

    def make(batch: int, device: torch.device | str = "cpu") -> Inputs:
        gen = torch.Generator().manual_seed(seed)
        images = torch.randn(batch, channels, size, size, generator=gen).to(device)
        labels = torch.randint(0, num_classes, (batch,), generator=gen).to(device)
        return (images,), labels

    return make


def cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(output, target)
