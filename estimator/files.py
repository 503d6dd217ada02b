"""Atomic file output: a reader never sees a half-written trace, figure or report.

Everything the project writes goes to a temporary file in the target's folder first and is renamed
over the target only when complete; on any error the temporary file is removed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
