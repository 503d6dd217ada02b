"""The validation CSVs (``validation/*.csv``): their three formats and the checks every row passes.

One row is one public measurement. A file's kind is read from its header: ``nccl`` files carry
``measured_busbw_GBps`` (nccl-tests bus bandwidth), ``training`` files carry
``measured_samples_per_s`` (training throughput over all GPUs), ``llm`` files carry ``measured``
in the unit of their ``metric`` column (:mod:`estimator.validation.llm`). The header must hold exactly the
columns below (any order). ``validation/pinned_errors.csv`` (the pins) and ``validation/record.csv`` (the record) are not
measurement files.

Every problem is one :class:`~estimator.errors.EstimatorError` line naming the file, the line and
the column, raised before anything is estimated or written.
"""

from __future__ import annotations

import csv
import io
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from estimator.errors import EstimatorError
from estimator.files import decode_text, read_input, write_atomic
from estimator.validation import llm as _llm  # the llm kind (validation/llm.csv)

PINS_FILE = "pinned_errors.csv"
RECORD_FILE = "record.csv"  # the validation record (estimator.validation.envelope), not a measurement file

COMMON_TAIL = ("role", "overrides", "hardware", "software", "source", "measured_what")
COLUMNS = {
    "nccl": ("id", "system", "gpus", "collective", "bytes", "measured_busbw_GBps") + COMMON_TAIL,
    "training": ("id", "system", "model", "precision", "batch_per_gpu", "gpus", "measured_samples_per_s")
    + COMMON_TAIL,
    "llm": _llm.COLUMNS,
}
MEASURED = {"nccl": "measured_busbw_GBps", "training": "measured_samples_per_s", "llm": _llm.MEASURED}
METRIC = {"nccl": ("busbw", "GB/s"), "training": ("samples_per_s", "samples/s")}  # llm: the row's metric column

# A row's group (validation/README.md, "Three groups"): ``calibration`` set a constant;
# ``same-source`` is another point of the same curve, table or run as a calibration row (or as a
# published measurement a constant was fitted on); ``independent`` shares no source with anything
# the model was fitted on. Only the last group says how good the model is out of sample.
ROLES = ("calibration", "same-source", "independent")
# nccl-tests binaries -> the project's collective names (``estimator collective collective=...``)
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")
PRECISIONS = ("fp32", "tf32", "fp16", "amp", "bf16", "fp8")
# Keys a row sets through its columns: its ``overrides`` may not set them again.
COLUMN_KEYS = {
    "nccl": ("system", "fabric.nodes", "collective", "bytes", "sizes", "group_size", "output", "write"),
    "training": ("system", "model", "fabric.nodes", "precision", "batch_size", "workload", "output", "write"),
    "llm": _llm.COLUMN_KEYS,
}
REQUIRED_TEXT = ("id", "role", "hardware", "software", "source", "measured_what")
SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


@dataclass(frozen=True)
class Row:
    """One measurement, parsed and checked."""

    file: str  # file name inside the validation folder
    line: int  # 1-based line of the row in its file (the header is line 1)
    kind: str  # nccl | training
    id: str
    system: str  # "" = no preset (the overrides say device and fabric)
    gpus: int
    measured: float  # GB/s (nccl busbw) or samples/s (training, all GPUs)
    role: str
    overrides: tuple[str, ...]
    hardware: str
    software: str
    source: str
    measured_what: str
    collective: str | None = None
    bytes: float | None = None
    model: str | None = None
    precision: str | None = None
    batch_per_gpu: int | None = None
    layout: dict[str, int] | None = field(default=None, compare=False)  # llm rows: tp, pp, micro_batch_size, global_batch
    raw: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def metric(self) -> str:
        return _llm.metric(self.raw)[0] if self.kind == "llm" else METRIC[self.kind][0]

    @property
    def unit(self) -> str:
        return _llm.metric(self.raw)[1] if self.kind == "llm" else METRIC[self.kind][1]


def csv_files(folder: str | Path) -> list[Path]:
    """The measurement files of a validation folder (sorted; the pins and record files excluded)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise EstimatorError(f"{folder}: validation folder not found (set validation.dir=...)")
    return sorted(p for p in folder.glob("*.csv") if p.name not in (PINS_FILE, RECORD_FILE))


def read_written(path: str | Path, header: tuple[str, ...], what: str) -> list[tuple[int, list[str]]]:
    """(line number, stripped fields) of each line of a file ``estimator validate`` writes (the pins,
    the record); empty when the file does not exist; a wrong header or field count is one error
    naming the line."""
    path = Path(path)
    if not path.exists():
        return []
    text = decode_text(read_input(path, what), path, f"{what} file")  # a regular file, size-bounded
    reader = csv.reader(text.splitlines())
    got = tuple(h.strip() for h in next(reader, ()))
    if got != header:
        raise EstimatorError(f"{path.name}:1: header must be {','.join(header)}, got {','.join(got)!r}")
    lines = []
    for lineno, values in enumerate(reader, start=2):
        if not values:
            continue
        if len(values) != len(header):
            raise EstimatorError(f"{path.name}:{lineno}: expected {len(header)} fields ({','.join(header)}), "
                                 f"got {len(values)}")
        lines.append((lineno, [v.strip() for v in values]))
    return lines


def number(text: str) -> float:
    """A field's float, NaN when it is not one (the caller names the column in its error)."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def write_written(path: str | Path, header: tuple[str, ...], lines: list[list[str]]) -> Path:
    """Write (atomically) a file ``estimator validate`` derives: ``header`` then ``lines`` as given."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(lines)
    return write_atomic(path, buf.getvalue())


def load_rows(folder: str | Path) -> list[Row]:
    """Every row of every measurement file in ``folder``, checked (ids unique across files)."""
    rows: list[Row] = []
    seen: dict[str, str] = {}
    for path in csv_files(folder):
        for row in read_file(path):
            if row.id in seen:
                raise EstimatorError(f"{row.where}: column id: duplicate id {row.id!r} (first at {seen[row.id]})")
            seen[row.id] = row.where
            rows.append(row)
    return rows


def display_name(path: Path) -> str:
    """``validation/x.csv`` for a file under the working directory, else the path as given."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def read_file(path: Path) -> list[Row]:
    name = display_name(path)
    text = decode_text(read_input(path, "measurement"), name, "measurement file")  # regular, size-bounded
    reader = csv.reader(text.splitlines())
    try:
        header = next(reader)
    except StopIteration:
        raise EstimatorError(f"{name}:1: empty file (a header row is needed)") from None
    header = [h.strip() for h in header]
    kind = _kind(name, header)
    groups = _config_groups()
    rows = []
    for lineno, values in enumerate(reader, start=2):
        if not values or all(not v.strip() for v in values):
            continue  # blank line
        if len(values) != len(header):
            raise EstimatorError(
                f"{name}:{lineno}: {len(values)} fields, the header has {len(header)} (quote fields with commas)"
            )
        raw = {h: v.strip() for h, v in zip(header, values, strict=True)}
        rows.append(_parse(name, lineno, kind, raw, groups))
    return rows


def _kind(name: str, header: list[str]) -> str:
    matches = [k for k, m in MEASURED.items() if m in header]
    if len(matches) != 1:
        raise EstimatorError(
            f"{name}:1: header names none of {MEASURED['nccl']} (nccl-tests rows), {MEASURED['training']} "
            f"(training rows) or {MEASURED['llm']} (llm rows); see validation/README.md"
        )
    kind = matches[0]
    want = COLUMNS[kind]
    missing = [c for c in want if c not in header]
    extra = [c for c in header if c not in want]
    dup = sorted({c for c in header if header.count(c) > 1})
    if missing or extra or dup:
        parts = ([f"missing column(s) {', '.join(missing)}"] if missing else []) + (
            [f"unknown column(s) {', '.join(extra)}"] if extra else []) + (
            [f"repeated column(s) {', '.join(dup)}"] if dup else [])
        raise EstimatorError(f"{name}:1: {'; '.join(parts)} for a {kind} file (columns: {','.join(want)})")
    return kind


def _config_groups() -> dict[str, list[str]]:
    from estimator.config import config_groups

    return config_groups()


def _parse(name: str, line: int, kind: str, raw: dict[str, str], groups: dict[str, list[str]]) -> Row:
    def bad(column: str, problem: str) -> EstimatorError:
        return EstimatorError(f"{name}:{line}: column {column}: {problem}")

    for col in REQUIRED_TEXT:
        if not raw[col]:
            raise bad(col, "empty (every measurement needs it)")
    if not SLUG.match(raw["id"]):
        raise bad("id", f"{raw['id']!r} is not a slug (letters, digits, . _ + -)")
    if raw["role"] not in ROLES:
        hint = " (holdout is now same-source or independent, see validation/README.md)" if raw["role"] == "holdout" else ""
        raise bad("role", f"{raw['role']!r} is not one of {', '.join(ROLES)}{hint}")
    system = raw["system"]
    if system and system not in groups.get("system", []):
        known = ", ".join(groups.get("system", [])) or "none (conf/system/ is empty or missing)"
        raise bad("system", f"unknown system {system!r}; available: {known}")
    gpus = _integer(raw["gpus"], bad("gpus", f"{raw['gpus']!r} is not a positive integer"))
    measured_col = MEASURED[kind]
    measured = _positive(raw[measured_col], bad(measured_col, f"{raw[measured_col]!r} is not a positive number"))
    try:
        overrides = tuple(shlex.split(raw["overrides"]))
    except ValueError as exc:
        raise bad("overrides", f"cannot split {raw['overrides']!r} ({exc})") from None
    for ov in overrides:
        key, sep, _ = ov.partition("=")
        if not sep or not key.lstrip("+~"):
            raise bad("overrides", f"{ov!r} is not a key=value Hydra override")
        if key.lstrip("+~") in COLUMN_KEYS[kind]:
            raise bad("overrides", f"{ov!r} sets {key.lstrip('+~')}, which this file sets through its columns")
    fields: dict[str, Any] = {}
    if kind == "nccl":
        if raw["collective"] not in COLLECTIVES:
            raise bad("collective", f"{raw['collective']!r} is not one of {', '.join(COLLECTIVES)}")
        fields["collective"] = raw["collective"]
        fields["bytes"] = _positive(raw["bytes"], bad("bytes", f"{raw['bytes']!r} is not a positive number of bytes"))
    elif kind == "llm":
        fields = _llm.parse_fields(raw, bad, groups, PRECISIONS)
    else:
        if raw["model"] not in groups.get("model", []):
            raise bad("model", f"unknown model {raw['model']!r}; available: {', '.join(groups.get('model', []))}")
        if raw["precision"] not in PRECISIONS:
            raise bad("precision", f"{raw['precision']!r} is not one of {', '.join(PRECISIONS)}")
        fields["model"] = raw["model"]
        fields["precision"] = raw["precision"]
        fields["batch_per_gpu"] = _integer(
            raw["batch_per_gpu"], bad("batch_per_gpu", f"{raw['batch_per_gpu']!r} is not a positive integer"))
    return Row(file=name, line=line, kind=kind, id=raw["id"], system=system, gpus=gpus, measured=measured,
               role=raw["role"], overrides=overrides, hardware=raw["hardware"], software=raw["software"],
               source=raw["source"], measured_what=raw["measured_what"], raw=raw, **fields)


def _integer(text: str, error: EstimatorError) -> int:
    try:
        value = float(text)
    except ValueError:
        raise error from None
    if not math.isfinite(value) or value < 1 or value != int(value):
        raise error
    return int(value)


def _positive(text: str, error: EstimatorError) -> float:
    try:
        value = float(text)
    except ValueError:
        raise error from None
    if not math.isfinite(value) or value <= 0:
        raise error
    return value
