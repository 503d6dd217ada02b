"""Checks of the top-level settings every command shares, run by the CLI right after composing and
before any command runs (so nothing is captured or written on a bad value), plus the refusal of
environment interpolation in command-line values and did-you-mean suggestions.

Each problem is one :class:`~estimator.errors.EstimatorError` line naming the key.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from estimator import limits
from estimator.errors import EstimatorError

OUTPUTS = ("text", "json")
#: a name that becomes a file name (model names, export prefixes): no path separators, no "..".
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,119}")
#: OmegaConf resolvers that read the process environment or evaluate text.
_ENV_INTERPOLATION = re.compile(r"\$\{\s*(oc\.env|oc\.decode|env)\s*:")


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest choice, or nothing."""
    close = difflib.get_close_matches(str(name), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_overrides(overrides: Iterable[str]) -> None:
    """Refuse ``${oc.env:...}``-style interpolation in command-line values: a value given on the
    command line is data, never a request to read the environment."""
    for ov in overrides:
        if _ENV_INTERPOLATION.search(ov):
            raise EstimatorError(f"override {ov.partition('=')[0]}: environment interpolation "
                                 "(${oc.env:...}) is not allowed in command-line values")


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
    _optional_count(cfg, "batch_size", "batch")
    _optional_count(cfg, "capture.batch", "capture_batch")
    _optional_count(cfg, "fabric.nodes", "devices")
    _optional_count(cfg, "compare.nodes", "devices")
    _optional_count(cfg, "allocation.gpus", "devices")
    for key in ("ray.batch_size", "ray.num_cpus"):
        value = _get(cfg, key)
        if value is not None:
            limits.check_count(value, "sweep_points", key)
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
