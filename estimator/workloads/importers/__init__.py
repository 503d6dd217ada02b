"""Importers: foreign workload traces -> canonical :class:`~estimator.workloads.graph.Workload`.

One module per format, each with ``FORMAT`` (its name), ``sniff(head, path) -> bool`` (cheap
detection from the first bytes) and ``load(data, name, options) -> Workload``. :func:`import_file`
detects or forces the format and turns every failure into one
:class:`~estimator.errors.EstimatorError` line that starts with the file name.
"""

from __future__ import annotations

import importlib
import re
import struct
from pathlib import Path
from typing import Any

from estimator.errors import EstimatorError
from estimator.workloads.graph import Workload
from estimator.workloads.importers._common import read_bytes, safe_name

#: format name -> module; detection tries them in this order (most specific first).
FORMATS = {
    "chakra": "estimator.workloads.importers.chakra",
    "kineto": "estimator.workloads.importers.kineto",
    "horovod": "estimator.workloads.importers.horovod",
    "flexflow": "estimator.workloads.importers.flexflow",
    "topoopt": "estimator.workloads.importers.topoopt",
}
HEAD_BYTES = 1 << 16


def _module(fmt: str) -> Any:
    return importlib.import_module(FORMATS[fmt])


def available() -> list[str]:
    """Formats whose importer module is present."""
    out = []
    for fmt in FORMATS:
        try:
            _module(fmt)
        except ModuleNotFoundError:
            continue
        out.append(fmt)
    return out


def detect(path: Path, head: bytes) -> str:
    """The format of ``path`` from its first bytes (and name), or an error naming the file."""
    for fmt in available():
        if _module(fmt).sniff(head, path):
            return fmt
    raise EstimatorError(f"{path}: cannot detect the trace format (known: {', '.join(available())}); "
                         "force one with importer.format=NAME")


def default_name(path: Path) -> str:
    stem = re.sub(r"\.\d+\.et$", "", path.name)  # Chakra rank files: <prefix>.<rank>.et
    for suffix in (".json.gz", ".json", ".fbuf", ".et", ".pt.trace"):
        stem = stem.removesuffix(suffix)
    return safe_name(stem)


def import_file(path: str | Path, fmt: str = "auto", name: str | None = None,
                options: dict[str, Any] | None = None) -> tuple[Workload, str]:
    """Read ``path`` as ``fmt`` (``auto`` = detect); return the workload and the format used."""
    path = Path(path)
    if fmt not in (None, "", "auto", *FORMATS):
        raise EstimatorError(f"importer.format: unknown format {fmt!r} (known: auto, {', '.join(FORMATS)})")
    opts = dict(options or {})
    opts["path"] = path
    name = safe_name(name) if name else default_name(path)
    if path.is_dir():  # a directory of per-rank Kineto traces
        if fmt not in (None, "", "auto", "kineto"):
            raise EstimatorError(f"{path}: is a directory; only importer.format=kineto reads a directory of rank traces")
        from estimator.workloads.importers.kineto_ranks import load_directory

        return _guarded(path, "kineto", lambda: load_directory(path, name, opts)), "kineto"
    data = read_bytes(path)
    if fmt in (None, "", "auto"):
        fmt = detect(path, data[:HEAD_BYTES])
    return _guarded(path, fmt, lambda: _module(fmt).load(data, name, opts)), fmt


def _guarded(path: Path, fmt: str, load: Any) -> Workload:
    """Run an importer; every failure becomes one line that starts with the file name."""
    try:
        return load()
    except EstimatorError as exc:
        raise EstimatorError(f"{path}: {exc}") from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, struct.error, OverflowError,
            RecursionError, MemoryError) as exc:
        # Safety net: a malformed file must never surface as a traceback.
        detail = " ".join(str(exc).split())[:200]
        raise EstimatorError(f"{path}: malformed {fmt} file ({type(exc).__name__}: {detail})") from None
