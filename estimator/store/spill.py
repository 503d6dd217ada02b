"""Spilled writes: rows that could not go into the store, kept as Parquet beside it.

When a write cannot reach the store (another process holds its lock for too long, the disk is
full, the folder is read-only, the file is damaged), the rows are written as one folder per write
under ``<store>.spill/``: ``<table>.parquet`` per table and ``keys.json`` (``{table: [key
columns]}``). The folder is built under a hidden name, every file and the folder are fsync'd, and
only then is it renamed into place, so a reader sees a complete spill or none. The next write that
gets the store merges the spills (oldest first) and deletes them.

A spill folder that cannot be read back (a bad ``keys.json``, a missing or unreadable Parquet file,
a table without its key column) is *quarantined*: moved to ``<store>.spill.bad/`` with a message on
stderr, so it never blocks a later write; its rows are not merged (inspect them with any Parquet
reader).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from estimator.errors import EstimatorError

KEYS_FILE = "keys.json"


def spill_dir(store: str | Path) -> Path:
    return Path(f"{store}.spill")


def quarantine_dir(store: str | Path) -> Path:
    return Path(f"{store}.spill.bad")


class DamagedSpill(Exception):
    """A spill folder that cannot be read back (the message says why)."""


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_spill(store: str | Path, tables: dict[str, tuple[list[str], Any]]) -> int:
    """Write ``{table: (key columns, pyarrow.Table)}`` as a new spill folder (atomically, fsync'd);
    returns the number of rows of the first (parent) table. An error here is one line naming the
    spill folder."""
    import pyarrow.parquet as pq

    root = spill_dir(store)
    name = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}-{time.monotonic_ns()}"
    tmp = root / f".{name}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        keys: dict[str, list[str]] = {}
        for table, (key, data) in tables.items():
            if data.num_rows:
                pq.write_table(data, tmp / f"{table}.parquet")
                _fsync(tmp / f"{table}.parquet")
                keys[table] = list(key)
        (tmp / KEYS_FILE).write_text(json.dumps(keys))
        _fsync(tmp / KEYS_FILE)
        _fsync(tmp)
        os.replace(tmp, root / name)
        _fsync(root)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise EstimatorError(f"{root}: cannot save the rows there either ({exc.strerror or exc})") from None
    return next(iter(tables.values()))[1].num_rows if tables else 0


def pending(store: str | Path) -> list[Path]:
    """Complete spill folders of ``store``, oldest first."""
    root = spill_dir(store)
    try:
        return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []


def read_spill(folder: Path, columns: dict[str, list[str]] | None = None) -> dict[str, tuple[list[str], Any]]:
    """``{table: (key columns, pyarrow.Table)}`` of a spill folder (``columns``: read only these
    columns of these tables); :class:`DamagedSpill` when it cannot be read back."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        keys = json.loads((folder / KEYS_FILE).read_bytes())
    except (OSError, ValueError) as exc:
        raise DamagedSpill(f"{KEYS_FILE} unreadable ({_reason(exc)})") from None
    if not isinstance(keys, dict) or not all(
            isinstance(t, str) and isinstance(k, list) and k and all(isinstance(c, str) for c in k) for t, k in keys.items()):
        raise DamagedSpill(f"{KEYS_FILE} is not {{table: [key columns]}}")
    out = {}
    for table, key in keys.items():
        if columns is not None and table not in columns:
            continue
        path = folder / f"{table}.parquet"
        try:
            data = pq.read_table(path, columns=columns[table] if columns is not None else None)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise DamagedSpill(f"{path.name} unreadable ({_reason(exc)})") from None
        missing = [k for k in (columns[table] if columns is not None else key) if k not in data.column_names]
        if missing:
            raise DamagedSpill(f"{path.name} lacks the key column(s) {missing}")
        out[table] = (key, data)
    return out


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:120]


def quarantine(store: str | Path, folder: Path, why: str) -> None:
    """Move a damaged spill folder out of the way (to ``<store>.spill.bad/``) and say so."""
    bad = quarantine_dir(store)
    target = bad / folder.name
    try:
        bad.mkdir(exist_ok=True)
        os.replace(folder, target)
        where = f"moved to {target}"
    except OSError as exc:
        where = f"could not be moved ({exc.strerror or exc}); remove it by hand"
    print(f"warning: {folder}: damaged spill ({why}); {where}; its rows are not merged", file=sys.stderr)


def remove(store: str | Path, folder: Path) -> None:
    """Delete a merged spill folder (and the spill root once empty)."""
    shutil.rmtree(folder, ignore_errors=True)
    root = spill_dir(store)
    try:
        root.rmdir()  # only when empty
    except OSError:
        pass


def spilled_keys(store: str | Path, table: str, key: str) -> set[Any]:
    """Values of ``key`` in the spilled rows of ``table`` (damaged folders are quarantined)."""
    found: set[Any] = set()
    for folder in pending(store):
        try:
            data = read_spill(folder, {table: [key]}) if (folder / f"{table}.parquet").exists() else {}
        except DamagedSpill as exc:
            quarantine(store, folder, str(exc))
            continue
        if table in data:
            found.update(data[table][1].column(key).to_pylist())
    return found
