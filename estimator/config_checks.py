"""Checks of the command line and of the top-level settings every command shares, run by the CLI
before any command runs (so nothing is captured, imported or written on a bad value), plus
did-you-mean suggestions.

* :func:`check_overrides` (before composing): no interpolation (``${...}``) in any command-line
  value — a value given on the command line is data, never a request to read the environment,
  the clock, Hydra's runtime or another key — and no ``hydra.*`` settings (the CLI composes
  configs itself: nothing of Hydra's runtime, such as ``hydra.run.dir`` or ``hydra.searchpath``,
  is used, so they are refused rather than silently ignored).
* :func:`check_override_values` (after composing): every overridden value has the type of the
  key's default (a boolean is ``true`` or ``false``, a number a number) and lies in the key's range
  (:data:`RANGES`, :data:`COUNTS`); ``model.name`` names a model option or an existing trace. The
  sweep grid applies :func:`check_value` to every axis value too.
* :func:`check_common`: the shared top-level keys of a composed config.

Each problem is one :class:`~estimator.errors.EstimatorError` line naming the key.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from estimator import limits
from estimator.errors import EstimatorError, did_you_mean

__all__ = ["did_you_mean", "check_overrides", "check_override_values", "check_value", "check_common",
           "check_output_file", "check_output_dir"]

OUTPUTS = ("text", "json")
#: a name that becomes a file name (model names, export prefixes): no path separators, no "..".
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,119}")

#: numeric keys with a lower bound: key -> (lowest allowed value, whole numbers only)
RANGES: dict[str, tuple[float, bool]] = {
    "sql_rows": (1, True),
    "ray.in_process_below": (0, True),
    "validation.margin_pct": (0, False),
    "bytes": (0, False),
    "capture.warmup_iters": (0, True),
}
# keys whose profile default is a number but that also take null (framework.fsdp_version: null = not PyTorch FSDP;
# framework.zero1_group / adam_step_bytes: null = the whole dp x cp group / the fused Adam; internlm.yaml sets
# adam_step_bytes 92, rows zero1_group 8;
# model.moe_router_num_groups / moe_router_group_topk: null = no group-limited routing, set in conf/model/deepseek_v3.yaml)
NULLABLE = frozenset({"framework.fsdp_version", "framework.zero1_group", "framework.adam_step_bytes",
                      "model.moe_router_num_groups", "model.moe_router_group_topk"})
#: counts bounded by a configurable limit: key -> name in :class:`estimator.limits.Limits`
COUNTS: dict[str, str] = {
    "batch_size": "batch", "capture.batch": "capture_batch", "fabric.nodes": "devices", "compare.nodes": "devices",
    "allocation.gpus": "devices", "group_size": "devices", "ray.batch_size": "sweep_points",
    "ray.num_cpus": "sweep_points", "allocation.requests": "alloc_requests",
}


def check_overrides(overrides: Iterable[str]) -> None:
    """Refuse interpolation in command-line values and Hydra runtime settings (see the module
    docstring); runs before anything is composed."""
    for ov in overrides:
        key, _, value = ov.partition("=")
        bare = key.lstrip("+~")
        if bare == "hydra" or bare.startswith(("hydra.", "hydra/")):
            raise EstimatorError(f"override {bare}: Hydra's runtime settings are not used (estimator composes the "
                                 "configs itself and writes no outputs/ folder; another conf/ folder: $ESTIMATOR_CONF)")
        if "${" in value:
            raise EstimatorError(f"override {bare}: interpolation (${{...}}) is not allowed in command-line values "
                                 "(environment, clock, Hydra or other keys); give the value itself")


_MISSING = object()


def _lookup(cfg: Any, dotted: str) -> Any:
    """``cfg[a][b]`` for ``"a.b"`` (a DictConfig or a plain dict), or :data:`_MISSING`."""
    if not isinstance(cfg, dict):
        from omegaconf import OmegaConf

        return OmegaConf.select(cfg, dotted, default=_MISSING, throw_on_missing=False)
    from estimator.config import dotted_get

    return dotted_get(cfg, dotted, _MISSING)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_value(key: str, value: Any, default: Any, where: str = "") -> None:
    """``value`` for ``key`` has the type of the key's ``default`` (a boolean ``true``/``false``;
    a finite number for a numeric default — whole numbers where :data:`RANGES` or :data:`COUNTS`
    say so; ``null`` only where the default is ``null``) and lies in the key's range. ``where``
    prefixes the key in the message (``"sweep.grid "``)."""
    label = f"{where}{key}"
    if value is None and key in NULLABLE:
        return
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise EstimatorError(f"{label} must be true or false, got {_short(value)}")
        return
    if isinstance(default, int | float) and key not in COUNTS:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise EstimatorError(f"{label} must be a number, got {_short(value)}")
    if key in RANGES and value is not None:
        lowest, whole = RANGES[key]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        what = f"a {'non-negative ' if lowest == 0 else ''}{'whole ' if whole else ''}number" + \
            (f" >= {lowest:g}" if lowest else "")
        if not number or not math.isfinite(value) or (whole and not float(value).is_integer()) or value < lowest:
            raise EstimatorError(f"{label} must be {what}, got {_short(value)}")
    if key in COUNTS and (value is not None or default is not None):
        limits.check_count(value, COUNTS[key], label)


def check_override_values(overrides: Iterable[str], cfg: Any, defaults: Any) -> None:
    """Every ``key=value`` override that was composed into ``cfg`` against the key's value in
    ``defaults`` (the same config group choices without the value overrides): see :func:`check_value`;
    ``model.name`` must keep the model option's name or name an existing trace."""
    from estimator.config import config_groups

    groups = config_groups()
    for ov in overrides:
        key, sep, _ = ov.partition("=")
        bare = key.lstrip("+")
        if not sep or key.startswith("~") or bare in groups:
            continue
        default = _lookup(defaults, bare)
        value = _lookup(cfg, bare)
        if default is _MISSING or value is _MISSING:
            continue
        check_value(bare, value, default)
        if bare == "model.name" and value != default:
            check_model_name(cfg, default)


def check_model_name(cfg: Any, option_name: Any) -> None:
    """``model.name`` other than the model option's own names the trace to read
    (``<traces_dir>/<name>.workload.json``): it must exist, or the capture would record the
    option's model under another name."""
    from estimator.files import resolve_input

    name = _get(cfg, "model.name")
    if name is None or _get(cfg, "workload"):
        return
    if not SAFE_NAME.fullmatch(str(name)):
        raise EstimatorError(f"model.name must be a plain name (letters, digits, ._-), got {str(name)[:40]!r}")
    trace = Path(str(_get(cfg, "traces_dir") or "traces")) / f"{name}.workload.json"
    if resolve_input(trace).is_file():
        return
    from estimator.config import config_groups

    models = config_groups().get("model", [])
    raise EstimatorError(f"model.name={str(name)!r}: no trace {trace} to read, and capturing would record model "
                         f"{option_name!r} under that name; choose a model with model=NAME"
                         f"{did_you_mean(str(name), models)} (available: {', '.join(models)}) or import the trace first")


def _get(cfg: Any, dotted: str) -> Any:
    """``cfg[a][b]`` for ``"a.b"`` (a DictConfig or, on the CLI's cached fast path, a plain dict);
    None where a key is missing."""
    if not isinstance(cfg, dict):
        from omegaconf import OmegaConf

        return OmegaConf.select(cfg, dotted, default=None, throw_on_missing=False)
    from estimator.config import dotted_get

    return dotted_get(cfg, dotted)


def _is_list(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return True
    if type(value).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.is_list(value)
    return False


def _optional_count(cfg: Any, key: str, limit: str) -> None:
    value = _get(cfg, key)
    if value is not None:
        limits.check_count(value, limit, key)


def check_common(cfg: Any, command: str = "") -> None:
    """Validate the shared top-level keys of a composed config (raise on the first bad one)."""
    output = cfg.get("output", "text")
    if output not in OUTPUTS:
        raise EstimatorError(f"output must be one of {', '.join(OUTPUTS)}, got {output!r}{did_you_mean(output, OUTPUTS)}")
    for key, limit in COUNTS.items():
        _optional_count(cfg, key, limit)
    for key in RANGES:
        value = _get(cfg, key)
        if value is not None:
            check_value(key, value, None)
    name = _get(cfg, "model.name")
    if name is not None and not SAFE_NAME.fullmatch(str(name)):
        raise EstimatorError(f"model.name must be a plain name (letters, digits, ._-), got {str(name)[:40]!r}")
    fabrics = _get(cfg, "compare.fabrics")
    if fabrics is not None:
        _check_fabric_names(fabrics)
    sizes = _get(cfg, "allocation.sizes")
    if sizes is not None:
        if not _is_list(sizes) or len(sizes) == 0:
            raise EstimatorError("allocation.sizes must be null or a non-empty list of GPU counts")
        for i, s in enumerate(sizes):
            limits.check_count(s, "devices", f"allocation.sizes[{i}]")
    if _get(cfg, "write") is True and _get(cfg, "store"):  # refused before any work, not after it (nothing is lost)
        from estimator.store.duckdb_store import not_a_store

        problem = not_a_store(str(_get(cfg, "store")))
        if problem:
            raise EstimatorError(problem)
    if command == "collective" and _get(cfg, "busbw_plot"):
        check_output_file(str(_get(cfg, "busbw_plot")), "busbw_plot", (".png", ".svg", ".pdf"))


def _check_fabric_names(fabrics: Any) -> None:
    from estimator.config import config_groups
    from estimator.fabrics.registry import available

    if not _is_list(fabrics) or len(fabrics) == 0:
        raise EstimatorError("compare.fabrics must be null (every fabric) or a non-empty list of fabric names")
    known = sorted(set(available()) | set(config_groups().get("fabric", [])))
    for name in fabrics:
        if str(name) not in known:
            raise EstimatorError(f"compare.fabrics: unknown fabric {str(name)[:40]!r}{did_you_mean(str(name), known)}; "
                                 f"known: {', '.join(known)}")


def _can_create_in(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (tried, not guessed: root ignores mode bits)."""
    import tempfile

    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".estimator-probe."):
            return True
    except OSError:
        return False


def check_output_dir(value: str, key: str) -> Path:
    """An output folder that exists and is writable, or can be created under a writable parent;
    checked before any work is done."""
    path = Path(value)
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe == path and not path.is_dir():
        raise EstimatorError(f"{key}: {value!r} exists and is not a folder")
    if not probe.is_dir() or not _can_create_in(probe):
        raise EstimatorError(f"{key}: cannot write to {str(path)[:80]!r} (not a writable folder)")
    return path


def check_output_file(value: str, key: str, suffixes: tuple[str, ...] = ()) -> Path:
    """An output file path whose folder exists (or can be created under a writable parent) and is
    writable, with one of ``suffixes``; checked before any work is done."""
    path = Path(value)
    if suffixes and path.suffix.lower() not in suffixes:
        raise EstimatorError(f"{key}: {value!r} must end with one of {', '.join(suffixes)}")
    folder = path.parent if str(path.parent) else Path(".")
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir() or not _can_create_in(probe):
        raise EstimatorError(f"{key}: cannot write to {str(folder)[:80]!r} (not a writable folder)")
    if path.is_dir():
        raise EstimatorError(f"{key}: {value!r} is a folder, expected a file name")
    return path
