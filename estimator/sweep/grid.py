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
import math
from collections.abc import Iterable, Iterator
from typing import Any

from estimator import config as config_mod
from estimator.config_checks import check_value
from estimator.errors import EstimatorError


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if v is None:
        return "null"
    return str(v)


def expand(grid: dict[str, list[Any]], zipped: list[list[str]] | None = None) -> list[dict[str, Any]]:
    """Grid -> list of ``{key: value}`` points (product, except ``zipped`` key groups)."""
    points = []
    for combo in itertools.product(*_axes(grid, zipped)):
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
            if k not in point and config_mod.has_dotted(cfg, k):
                _set(cfg, k, value)
                used[k] = True
        for k, value in point.items():
            if k in groups:
                continue
            if not config_mod.has_dotted(cfg, k):
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



def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = tree
    for part in parents:
        node = node[part]
    node[leaf] = value




# ---- lazy grids --------------------------------------------------------------------------------
class Grid:
    """A sweep's points, generated on demand by index (nothing per point is stored).

    Point ``i`` is the ``i``-th element of the cartesian product of the axes (the order of
    :func:`expand`). Its config is the composed config of its group choices (composed once per
    distinct choice set, with the command-line ``base_overrides`` applied) with the point's dotted
    keys set on a copy of just the dicts on their paths; everything else is shared with the
    composed config, so callers must treat a point's config as read-only. A ``Grid`` is plain data
    and pickles small (Ray ships it to every worker once).
    """

    def __init__(self, grid: dict[str, list[Any]], zipped: list[list[str]] | None = None,
                 base_overrides: list[str] | None = None, used: dict[str, bool] | None = None) -> None:
        groups = config_mod.config_groups()
        self.axes = _axes(grid, zipped)
        self.size = math.prod(len(axis) for axis in self.axes)
        self.keys = [k for axis in self.axes for k in axis[0]]
        self.settings_keys = [k for k in self.keys if k not in groups]  # set on the composed config
        base_groups = [o for o in (base_overrides or []) if o.partition("=")[0].lstrip("+~") in groups]
        base_keys = [_parse_override(o) for o in (base_overrides or []) if o not in base_groups]
        check_here = used is None
        used = {} if used is None else used
        for k, _ in base_keys:
            used.setdefault(k, False)
        # per axis entry: its group-choice overrides and its dotted (path, value) settings
        self._entries = [[(tuple(f"{k}={_value(v)}" for k, v in e.items() if k in groups),
                           tuple((k, v) for k, v in e.items() if k not in groups)) for e in axis] for axis in self.axes]
        self._base_groups = tuple(base_groups)
        self.bases: dict[tuple[str, ...], dict[str, Any]] = {}
        choice_sets = itertools.product(*[sorted({g for g, _ in axis}) for axis in self._entries])
        for combo in choice_sets:
            key = self._group_key(combo)
            if key in self.bases:
                continue
            cfg = config_mod.to_container(config_mod.compose(list(key)))
            for k, value in base_keys:
                if k not in self.keys and config_mod.has_dotted(cfg, k):
                    check_value(k, value, config_mod.dotted_get(cfg, k))
                    _set(cfg, k, value)
                    used[k] = True
            for k in self.keys:
                if k not in groups and not config_mod.has_dotted(cfg, k):
                    raise EstimatorError(f"sweep override {k}={_first_value(self.axes, k)!r}: key {k!r} is not in the config")
            self._check_values(cfg, groups)
            self.bases[key] = cfg
        if check_here:
            check_used(used, "this sweep")

    def _check_values(self, base: dict[str, Any], groups: Any) -> None:
        """Every axis value of a dotted key against the key's value in a composed config (type and
        range, :func:`estimator.config_checks.check_value`): a bad grid point fails before anything
        is captured or computed."""
        for axis in self.axes:
            for entry in axis:
                for k, value in entry.items():
                    if k not in groups:
                        check_value(k, value, config_mod.dotted_get(base, k), "sweep.grid ")

    def _group_key(self, parts: Any) -> tuple[str, ...]:
        return (*self._base_groups, *sorted(ov for part in parts for ov in part))

    def distinct(self, keys: Iterable[str]) -> bool:
        """Whether every point has its own config under ``keys``: each axis sets only keys under
        ``keys`` and has no repeated entry (then no two points share a config hash)."""
        keys = set(keys)
        for axis in self.axes:
            if any(k.split(".")[0] not in keys for k in axis[0]) or len({repr(e) for e in axis}) != len(axis):
                return False
        return True

    def __len__(self) -> int:
        return self.size

    def point(self, index: int) -> tuple[tuple[str, ...], list[tuple[str, Any]]]:
        """(group key, dotted settings) of point ``index`` (last axis varies fastest)."""
        picks = []
        for entries in reversed(self._entries):
            index, i = divmod(index, len(entries))
            picks.append(entries[i])
        picks.reverse()
        return self._group_key(g for g, _ in picks), [kv for _, dotted in picks for kv in dotted]

    def config(self, index: int) -> dict[str, Any]:
        key, dotted = self.point(index)
        return with_settings(self.bases[key], dotted)

    def configs(self, indices: Any) -> Iterator[dict[str, Any]]:
        for i in indices:
            yield self.config(i)

    def scoped_configs(self, tops: Iterable[str]) -> Iterator[dict[str, Any]]:
        """One config per distinct combination of group choices and of the settings under the
        top-level keys ``tops`` (other settings left at their first value): what a check that
        reads only those keys must see, without visiting every point."""
        tops = set(tops)
        projected = []
        for entries in self._entries:
            seen: dict[str, tuple[tuple[str, ...], tuple[tuple[str, Any], ...]]] = {}
            for groups, dotted in entries:
                part = (groups, tuple((k, v) for k, v in dotted if k.split(".")[0] in tops))
                seen.setdefault(repr(part), part)
            projected.append(list(seen.values()))
        for combo in itertools.product(*projected):
            key = self._group_key(g for g, _ in combo)
            yield with_settings(self.bases[key], [kv for _, dotted in combo for kv in dotted])


def with_settings(base: dict[str, Any], dotted: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """``base`` with dotted keys set, copying only the dicts on their paths (the rest is shared)."""
    cfg = dict(base)
    for key, value in dotted:
        *parents, leaf = key.split(".")
        node = cfg
        for part in parents:
            child = dict(node[part])
            node[part] = child
            node = child
        node[leaf] = value
    return cfg


def _first_value(axes: list[list[dict[str, Any]]], key: str) -> Any:
    return next(e[key] for axis in axes for e in axis if key in e)


def grid_size(grid: dict[str, list[Any]], zipped: list[list[str]] | None = None) -> int:
    """Points of a grid (the product of its axes, zipped keys one axis) without composing anything."""
    return math.prod(len(axis) for axis in _axes(grid, zipped))


def _axes(grid: dict[str, list[Any]], zipped: list[list[str]] | None) -> list[list[dict[str, Any]]]:
    """The product's axes: one per zip group (entries set several keys), one per other key."""
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
    return axes
