"""File helpers: atomic output (a reader never sees a half-written trace, figure or report),
bounded input reading (regular files only, size-limited before reading) and repository-relative
input lookup.

Everything the project writes goes to a temporary file in the target's folder first and is renamed
over the target only when complete; on any error the temporary file is removed.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from estimator import limits
from estimator.errors import EstimatorError

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
    it to ``path`` when the block succeeds, delete it when it fails — also when SIGTERM or SIGHUP
    ends the process meanwhile (see :func:`_signals_unwind`); a SIGKILL's temporary is removed by
    the next atomic write into that folder (:func:`remove_stale_temps`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _clean_once(path.parent)  # temporaries of killed writers (their pid is in the name)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.{os.getpid()}.", suffix=path.suffix or ".tmp")
    os.close(fd)
    try:
        with _signals_unwind():
            yield Path(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextmanager
def _signals_unwind() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP that would end the process silently (their
    default action) raise ``KeyboardInterrupt`` instead, so ``finally`` blocks run and no
    temporary is left behind (the process still ends: the CLI exits 130). Other handlers stay."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            previous[sig] = signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 (where C++ libraries such as Ray's core log) for the block."""
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically. A file that already holds
    exactly these bytes is not touched (its mtime stays, so Snakemake reruns nothing)."""
    blob = data.encode() if isinstance(data, str) else data
    path = Path(path)
    try:
        if path.is_file() and path.stat().st_size == len(blob) and path.read_bytes() == blob:
            return path
    except OSError:
        pass
    with atomic_path(path) as tmp:
        tmp.write_bytes(blob)
    return path


def check_regular_file(path: str | os.PathLike[str], what: str = "input", limit: str = "input_mb") -> int:
    """The size of ``path`` if it is a regular file of at most ``limits.<limit>`` MiB; otherwise
    one error line. Never opens the file, so a FIFO or a device (``/dev/zero``) cannot block or
    flood the reader."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise EstimatorError(f"{path}: no such file: cannot read {what} (no such {what} file)") from None
    except OSError as exc:
        raise EstimatorError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise EstimatorError(f"{path}: is a directory, not a {what} file")
    if not stat.S_ISREG(st.st_mode):
        raise EstimatorError(f"{path}: not a regular file (a FIFO, socket or device); {what} must be a file")
    mb = getattr(limits.get(), limit)
    if st.st_size > int(mb * 2**20):
        raise EstimatorError(f"{path}: {st.st_size / 2**20:.1f} MiB exceeds the {what} size limit of "
                             f"{mb:g} MiB (raise limits.{limit} if this is real)")
    return st.st_size


def read_input(path: str | os.PathLike[str], what: str = "input", limit: str = "input_mb") -> bytes:
    """All bytes of a regular input file, size-checked before reading (see :func:`check_regular_file`)."""
    check_regular_file(path, what, limit)
    mb = getattr(limits.get(), limit)
    cap = int(mb * 2**20)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # swapped after the check
                raise EstimatorError(f"{path}: not a regular file; {what} must be a file")
            data = fh.read(cap + 1)
    except OSError as exc:
        raise EstimatorError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if len(data) > cap:
        raise EstimatorError(f"{path}: exceeds the {what} size limit of {mb:g} MiB (limits.{limit})")
    return data


def decode_text(data: bytes, path: str | os.PathLike[str] | None, what: str = "input") -> str:
    """UTF-8 text (a UTF-8 BOM is dropped); UTF-16/32 and other bytes are one error line."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or data[:4] in (b"\x00\x00\xfe\xff",):
        raise EstimatorError(f"{_prefix(path)}{what} is UTF-16/32 encoded; save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EstimatorError(f"{_prefix(path)}{what} is not UTF-8 text (invalid byte at offset {exc.start})") from None


def excerpt(value: object, width: int = 40) -> str:
    """A short, escaped excerpt of file contents for an error message (never more than ``width``
    characters of the original, control characters and non-ASCII escaped)."""
    text = value if isinstance(value, str) else repr(value)
    cut = text[:width]
    out = cut.encode("ascii", "backslashreplace").decode("ascii")
    out = re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", out)
    return repr(out) + ("..." if len(text) > width else "") if isinstance(value, str) else out + ("..." if len(text) > width else "")


def remove_stale_temps(folder: str | os.PathLike[str]) -> int:
    """Delete the hidden temporaries (files or folders) that :func:`atomic_path` /
    :func:`atomic_dir` left in ``folder`` when their process was killed (the name carries the
    writer's pid; a temporary of a live process is left alone). Returns how many were removed."""
    import shutil

    folder = Path(folder)
    if not folder.is_dir():
        return 0
    removed = 0
    for p in folder.iterdir():
        m = _TEMP_NAME.match(p.name)
        if not m or _pid_alive(int(m["pid"])):
            continue
        try:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            removed += 1
        except OSError:
            continue
    return removed


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


#: names made by :func:`atomic_path` / :func:`atomic_dir`: ``.<stem>.<pid>.<8 random chars><suffix>``
_TEMP_NAME = re.compile(r"^\.(?P<stem>.*)\.(?P<pid>\d{1,10})\.(?P<rand>[a-z0-9_]{8})(?P<suffix>\.[A-Za-z0-9]+)?$")
_CLEANED: set[str] = set()


def _clean_once(folder: Path) -> None:
    key = str(folder.resolve())
    if key not in _CLEANED:
        _CLEANED.add(key)
        remove_stale_temps(folder)


@contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; when the block succeeds, swap it into place
    (``renameat2(RENAME_EXCHANGE)`` where Linux offers it, so readers see the old or the new
    folder, never none) and delete the old one; when it fails, delete the temporary."""
    import shutil

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _clean_once(path.parent)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}."))
    try:
        yield tmp
        os.chmod(tmp, 0o755)
        if path.exists() and _exchange(tmp, path):
            shutil.rmtree(tmp)  # now holds the old contents
        else:
            if path.exists():
                shutil.rmtree(path)
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2`` with ``RENAME_EXCHANGE``); False if unavailable."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


#: JSON integers beyond a signed 64-bit value are not ids, sizes or counts of anything real.
INT_LIMIT = 2**63 - 1


#: JSON objects and arrays a document may hold, per node of ``limits.graph_nodes`` (a node or an
#: event with its argument objects and shape lists). Bounds the memory of a parse: a file of empty
#: objects (``{},{},...``) would otherwise make ~64 bytes of Python objects per 3 bytes of input.
CONTAINERS_PER_NODE = 4


def check_containers(data: bytes, path: str | os.PathLike[str] | None, what: str = "JSON") -> None:
    """Refuse a document with more ``{``/``[`` bytes than :data:`CONTAINERS_PER_NODE` x
    ``limits.graph_nodes`` before parsing it (a fast byte count; brackets inside strings count
    too, so the check can only refuse early, never let too many through)."""
    budget = CONTAINERS_PER_NODE * limits.get().graph_nodes
    found = data.count(b"{") + data.count(b"[")
    if found > budget:
        raise EstimatorError(f"{_prefix(path)}{what} has {found} JSON objects/arrays, more than {budget} "
                             f"({CONTAINERS_PER_NODE} x limits.graph_nodes; raise limits.graph_nodes if this is real)")


def parse_json(data: bytes, path: str | os.PathLike[str] | None, what: str = "JSON") -> object:
    """Decode a JSON document strictly: UTF-8 only, at most :data:`CONTAINERS_PER_NODE` x
    ``limits.graph_nodes`` objects and arrays (checked before parsing), nesting bounded by the
    decoder's recursion guard, no NaN/Infinity (nor floats that overflow to them), no integers
    beyond 64 bits. Errors name the file and the JSON field."""
    check_containers(data, path, what)
    text = decode_text(data, path, what)
    try:
        doc = json.loads(text, parse_constant=_reject, parse_float=_float, parse_int=_int)
    except _NotFinite:  # find the field it is in (a slower second pass, only for bad files)
        check_finite(json.loads(text), path)
        raise EstimatorError(f"{_prefix(path)}NaN, Infinity or a 64-bit-overflowing number in {what}") from None
    except json.JSONDecodeError as exc:
        raise EstimatorError(f"{_prefix(path)}not valid JSON ({what}: JSON error: {exc.msg} at line {exc.lineno})") from None
    except RecursionError:  # the C decoder's depth guard (about 1,000 levels)
        raise EstimatorError(f"{_prefix(path)}not valid JSON ({what} nested too deeply)") from None
    except ValueError as exc:  # an integer beyond sys.get_int_max_str_digits digits
        raise EstimatorError(f"{_prefix(path)}not valid JSON ({what}: {str(exc).splitlines()[0][:80]})") from None
    return doc


class _NotFinite(Exception):
    pass


def _reject(token: str) -> float:
    raise _NotFinite(token)


def _float(token: str) -> float:
    value = float(token)
    if math.isinf(value):
        raise _NotFinite(token)
    return value


def _int(token: str) -> int:
    value = int(token)
    if abs(value) > INT_LIMIT:
        raise _NotFinite(token)
    return value


def check_finite(doc: object, path: str | os.PathLike[str] | None) -> None:
    """Walk a parsed document (iteratively) and reject NaN/Infinity and integers beyond 64 bits,
    naming the field (``nodes[3].deps[0]``)."""
    stack: list[tuple[object, str]] = [(doc, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, f"{where}.{_key(k)}" if where else _key(k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise EstimatorError(f"{_prefix(path)}field {where or '(document)'} is {value!r}; NaN and Infinity are not allowed")
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT_LIMIT:
            raise EstimatorError(f"{_prefix(path)}field {where or '(document)'} is an integer beyond 64 bits")


def _key(key: object) -> str:
    text = str(key)
    return text if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,40}", text) else excerpt(text, 30)


def _prefix(path: str | os.PathLike[str] | None) -> str:
    """``"<path>: "`` for error messages, or nothing when the caller adds the file name itself."""
    return "" if path is None else f"{path}: "
