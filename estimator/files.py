"""File helpers: atomic output (a reader never sees a half-written trace, figure or report) and
repository-relative input lookup.

Everything the project writes goes to a temporary file in the target's folder first and is renamed
over the target only when complete; on any error the temporary file is removed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def resolve_input(path: str | os.PathLike[str]) -> Path:
    """An input path as given when it exists (or is absolute); a relative path not found from the
    working directory is looked up from the repository root, so `traces/...` and `topologies/...`
    work from anywhere; otherwise the path as given (so errors and new files use it)."""
    path = Path(path)
    if path.is_absolute() or path.exists():
        return path
    alt = REPO_ROOT / path
    return alt if alt.exists() else path


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (same suffix, so tools infer the format); rename
    it to ``path`` when the block succeeds, delete it when it fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix or ".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return Path(path)
