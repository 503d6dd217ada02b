"""Sweep grids: ``conf/sweep/<name>.yaml`` declares ``grid: {override_key: [values...]}``.

A grid key is any Hydra override key: a config-group choice (``fabric``, ``model``, ``device``)
or a dotted key (``fabric.nodes``, ``parallelism.bucket_cap_bytes``). The sweep is the cartesian
product. ``zip`` (optional) lists groups of keys that vary together instead of as a product.
Composition is cached per distinct set of group choices, so a 5,000-point grid composes a handful
of Hydra configs, not 5,000.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from estimator import config as config_mod
from estimator.errors import EstimatorError


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if v is None:
        return "null"
    return str(v)


def expand(grid: dict[str, list[Any]], zipped: list[list[str]] | None = None) -> list[dict[str, Any]]:
    """Grid -> list of ``{key: value}`` points (product, except ``zipped`` key groups)."""
    if not isinstance(grid, dict) or not grid:
        raise EstimatorError("sweep.grid must be a non-empty mapping of override key -> list of values")
    zipped = [list(z) for z in (zipped or [])]
    in_zip = {k for z in zipped for k in z}
    axes: list[list[dict[str, Any]]] = []
    for z in zipped:
        lengths = {len(grid[k]) for k in z if k in grid}
        if any(k not in grid for k in z) or len(lengths) != 1:
            raise EstimatorError(f"sweep.zip group {z}: every key must be in the grid with equal-length lists")
        axes.append([dict(zip(z, vals, strict=True)) for vals in zip(*(grid[k] for k in z), strict=True)])
    for key, values in grid.items():
        if key in in_zip:
            continue
        if not isinstance(values, list) or not values:
            raise EstimatorError(f"sweep.grid.{key} must be a non-empty list, got {values!r}")
        axes.append([{key: v} for v in values])
    points = []
    for combo in itertools.product(*axes):
        point: dict[str, Any] = {}
        for part in combo:
            point.update(part)
        points.append(point)
    return points


def _parse_override(text: str) -> tuple[str, Any]:
    """``key=value`` with Hydra's value grammar (``10e-6`` is a float, ``[1,2]`` a list)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        ov = OverridesParser.create().parse_override(text)
    except Exception as exc:
        raise EstimatorError(f"bad override {text!r}: {str(exc).splitlines()[0]}") from None
    return ov.get_key_element().lstrip("+~"), ov.value()


def compose_points(
    points: list[dict[str, Any]], base_overrides: list[str] | None = None, used: dict[str, bool] | None = None
) -> list[dict[str, Any]]:
    """Resolve each point to a full config dict.

    Group choices (``fabric=lumorph``) go through Hydra, once per distinct set of choices; dotted
    keys are then set on a plain copy of that resolved config (the configs use no interpolation
    that depends on a swept key, so resolving once is exact and ~100x faster than OmegaConf per
    point). A point's own keys must exist in its config. ``base_overrides`` (from the command line)
    apply to every point where their key exists — ``fabric.reconfig_s=10e-6`` changes the Lumorph
    points of a sweep that also has ideal-switch points — and must apply to at least one point (of
    this call, or, when ``used`` is given, of all the calls sharing it: an experiment's sweeps).
    """
    groups = config_mod.config_groups()
    base_groups = [o for o in (base_overrides or []) if o.partition("=")[0].lstrip("+~") in groups]
    base_keys = [_parse_override(o) for o in (base_overrides or []) if o not in base_groups]
    check_here = used is None  # a caller composing several sweeps passes `used` and checks at the end
    used = {} if used is None else used
    for k, _ in base_keys:
        used.setdefault(k, False)
    cache: dict[tuple[str, ...], dict[str, Any]] = {}
    out = []
    for point in points:
        group_ov = tuple(sorted(f"{k}={_value(v)}" for k, v in point.items() if k in groups))
        key = (*base_groups, *group_ov)
        if key not in cache:
            cache[key] = config_mod.to_container(config_mod.compose(list(key)))
        cfg = copy.deepcopy(cache[key])
        for k, value in base_keys:
            if k not in point and _has(cfg, k):
                _set(cfg, k, value)
                used[k] = True
        for k, value in point.items():
            if k in groups:
                continue
            if not _has(cfg, k):
                raise EstimatorError(f"sweep override {k}={value!r}: key {k!r} is not in the config")
            _set(cfg, k, value)
        out.append(cfg)
    if check_here and points:
        check_used(used, "this sweep")
    return out


def check_used(used: dict[str, bool], where: str) -> None:
    """Raise when a command-line override applied to no point at all."""
    unused = [k for k, ok in used.items() if not ok]
    if unused:
        raise EstimatorError(f"override {unused[0]} matches no point of {where}")


def _has(tree: dict[str, Any], dotted: str) -> bool:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = tree
    for part in parents:
        node = node[part]
    node[leaf] = value


