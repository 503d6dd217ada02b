"""Captures kept on disk between processes: ``@disk_cached`` on a function that returns a
:class:`~estimator.workloads.graph.Workload` or a ``dict`` of them (the large-model layer capture,
``estimator.parallel.layer.capture_parts``: a torch import plus a meta-device profile, seconds of
CPU on every CLI call otherwise).

What the key holds — everything that can change a capture, taken generically so that a new
argument or a new module cannot be forgotten:

* the function's qualified name and **all** its arguments, bound to its signature with defaults
  applied (a call that names a default and one that does not share an entry; a parameter added
  later enters the key by itself). Dataclasses (the model spec), mappings, sequences, enums and
  scalars are turned into plain JSON field by field; an argument of any other type makes the call
  uncached (it is computed, never guessed);
* a digest of the source of every ``estimator`` module the function's module can import, directly
  or lazily inside a function, transitively (found by reading ``import`` lines, so a module added to
  the capture later is covered as soon as something in the chain imports it);
* the installed torch (its ``version.py``: FLOP formulas and dispatch change between versions)
  and the Python version.

An entry is one JSON file, ``<cache>/captures/<sha256 of the key>.json``, holding the key itself
and the workloads; it is written atomically (temporary file + rename), so a reader never sees half
of one. A file that cannot be read, is not valid JSON, holds another key or an invalid workload is
ignored and rewritten. ``<cache>`` is ``$ESTIMATOR_CACHE`` (default ``~/.cache/estimator``;
``ESTIMATOR_CACHE=off`` turns the cache off, as for the composition cache); at most
:data:`MAX_ENTRIES` entries are kept (least recently written dropped first).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from estimator.workloads.graph import Workload

FORMAT = "estimator.capture_cache"
VERSION = 1
MAX_ENTRIES = 512
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the estimator package
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(estimator(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)"
                     r"|import[ \t]+(estimator(?:\.\w+)*))", re.M)


class _Uncacheable(Exception):
    """An argument without a faithful plain form: the call is computed, not cached."""


def cache_root() -> Path | None:
    """``$ESTIMATOR_CACHE`` (default ``$XDG_CACHE_HOME/estimator`` or ``~/.cache/estimator``), or
    None when it is ``off``."""
    root = os.environ.get("ESTIMATOR_CACHE", "")
    if root.lower() in ("off", "0", "false", "none"):
        return None
    return Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "estimator"


def plain(value: Any) -> Any:
    """``value`` as JSON-able data that tells apart every value that could capture differently
    (type tags on containers and floats; dataclasses field by field)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return {"float": repr(value)}
    if isinstance(value, enum.Enum):
        return {"enum": f"{type(value).__module__}.{type(value).__qualname__}", "value": plain(value.value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"dataclass": f"{type(value).__module__}.{type(value).__qualname__}",
                "fields": {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, Mapping):
        items = [[plain(k), plain(v)] for k, v in value.items()]
        return {"mapping": sorted(items, key=lambda kv: json.dumps(kv[0], sort_keys=True))}
    if isinstance(value, list | tuple):
        return {type(value).__name__: [plain(v) for v in value]}
    if isinstance(value, set | frozenset):
        return {"set": sorted((plain(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))}
    raise _Uncacheable(type(value).__name__)


def _module_file(module: str) -> Path | None:
    base = PACKAGE_ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


@functools.cache
def source_files(module: str) -> tuple[Path, ...]:
    """Source files of ``module`` and of every ``estimator`` module it can import (top-level or
    inside a function), transitively, sorted."""
    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(name)
        if path is None:  # a name imported from a module, not a module itself
            continue
        seen[name] = path
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages run first
        for frm, names, imp in _IMPORT.findall(path.read_text(encoding="utf-8")):
            todo.append(frm or imp)
            todo.extend(f"{frm}.{n}" for n in re.split(r"[\s,()]+", names) if frm and n.isidentifier())
    return tuple(sorted(set(seen.values())))


@functools.cache
def _environment_digest(module: str) -> str:
    """Digest of the capture's sources, the installed torch and Python (once per process)."""
    from importlib.util import find_spec

    h = hashlib.sha256()
    for path in source_files(module):
        h.update(str(path.relative_to(PACKAGE_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    spec = find_spec("torch")
    torch_version = Path(spec.origin).with_name("version.py") if spec is not None and spec.origin else None
    h.update(torch_version.read_bytes() if torch_version is not None and torch_version.is_file() else b"no torch")
    h.update(sys.version.encode())
    return h.hexdigest()


def key_of(fn: Callable[..., Any], args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """The cache key of ``fn(*args, **kwargs)``, or None when an argument has no plain form."""
    import inspect

    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    try:
        arguments = {name: plain(value) for name, value in bound.arguments.items()}
    except _Uncacheable:
        return None
    return {"function": f"{fn.__module__}.{fn.__qualname__}", "arguments": arguments,
            "environment": _environment_digest(fn.__module__)}


def entry_path(key: dict[str, Any]) -> Path | None:
    root = cache_root()
    if root is None:
        return None
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return root / "captures" / f"{digest[:40]}.json"


def _encode(value: Any) -> Any:
    if isinstance(value, Workload):
        return {"workload": value.to_dict()}
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, Workload) for k, v in value.items()):
        return {"workloads": {k: v.to_dict() for k, v in value.items()}}
    raise _Uncacheable(type(value).__name__)


def _decode(doc: Any) -> Any:
    if "workload" in doc:
        return Workload.from_dict(doc["workload"]).validate()
    return {k: Workload.from_dict(v).validate() for k, v in doc["workloads"].items()}


def read(path: Path, key: dict[str, Any]) -> Any | None:
    """The value stored at ``path`` for ``key``, or None (missing, unreadable, corrupt, other key)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not (isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("version") == VERSION
                and doc.get("key") == key):
            return None
        return _decode(doc["value"])
    except Exception:  # any damage to a cache file means: compute again
        return None


def write(path: Path, key: dict[str, Any], value: Any) -> None:
    """Store ``value`` atomically; a cache that cannot be written (read-only home) is skipped."""
    from estimator.files import write_atomic

    try:
        text = json.dumps({"format": FORMAT, "version": VERSION, "key": key, "value": _encode(value)},
                          sort_keys=True, separators=(",", ":"), allow_nan=False)
        write_atomic(path, text)
        _prune(path.parent)
    except (OSError, ValueError, _Uncacheable):
        pass


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    for old in entries[: max(0, len(entries) - MAX_ENTRIES)]:
        old.unlink(missing_ok=True)


def disk_cached(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Keep ``fn``'s results on disk (see the module docstring); put ``functools.lru_cache`` above
    it to keep them in the process too."""

    @functools.wraps(fn)
    def cached(*args: Any, **kwargs: Any) -> Any:
        key = key_of(fn, args, kwargs)
        path = entry_path(key) if key is not None else None
        if path is None:
            return fn(*args, **kwargs)
        hit = read(path, key)
        if hit is not None:
            return hit
        value = fn(*args, **kwargs)
        write(path, key, value)
        return value

    return cached
