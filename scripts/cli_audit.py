"""The harness the obvious-command audits share (scripts/obvious_commands.py for ``estimate``,
scripts/obvious_cluster_commands.py for ``cluster`` / ``allocate``): run one CLI command in a subprocess of this
checkout, read its one-line error, parse the audits' common options, print and save the records."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACEBACK = "Traceback (most recent call last)"


def run_cli(argv: list[str], timeout: float, ci: bool = False) -> tuple[int, str, str, float]:
    """(exit code, stdout, stderr, seconds) of ``argv`` run from the checkout's root with its code first on the path
    (``ci``: with CI=true, no stdin prompts); a command still running after ``timeout`` s shows as exit code -1."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0", **({"CI": "true"} if ci else {})}
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = -1, "", f"timeout after {timeout:.0f} s"
    return rc, out, err, time.perf_counter() - start


def error_line(rc: int, err: str) -> str:
    """The command's last ``error:`` line; for a failed command without one, its last line of stderr."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errs = [ln for ln in lines if ln.startswith("error:")]
    return errs[-1] if errs else (lines[-1] if rc != 0 and lines else "")


def parse_args(doc: str | None, argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The audits' options (``--only`` ids, ``--json`` path, ``--timeout`` s) and the wanted id substrings."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    ap.add_argument("--only", default="", help="comma-separated substrings of command ids")
    ap.add_argument("--json", default=None, help="also write the raw records here")
    ap.add_argument("--timeout", type=float, default=300.0, help="per command, s (a hang shows as rc -1)")
    args = ap.parse_args(argv)
    return args, [w for w in args.only.split(",") if w]


def note(rec: dict) -> None:
    """One progress line per command on stderr."""
    print(f"{rec['id']}: rc {rec['rc']} {rec['secs']:.1f} s {rec['flags']}", file=sys.stderr)


def finish(records: list[dict], table: str, json_path: str | None) -> int:
    """Print the table, save the records (``json_path``) and return 1 when any command raised a flag, else 0."""
    print(table)
    if json_path:
        Path(json_path).write_text(json.dumps(records, indent=1, default=str))
    return 1 if any(r["flags"] for r in records) else 0


def outcome_flags(rec: dict, slow_s: float) -> list[str]:
    """What is wrong with how a command ended, whatever it computes: a traceback, an exit code other than 0 / 2,
    slower than ``slow_s``, bad input accepted (``expect`` "err"), good input refused (``expect`` "ok"), a refusal
    without a one-line ``error:``."""
    out = []
    if rec["traceback"]:
        out.append("TRACEBACK")
    if rec["rc"] not in (0, 2):
        out.append(f"exit {rec['rc']}")
    if rec["secs"] > slow_s:
        out.append(f">{slow_s:.0f}s")
    if rec["rc"] == 0 and rec["expect"] == "err":
        out.append("BAD INPUT ACCEPTED")
    if rec["rc"] == 2 and rec["expect"] == "ok":
        out.append("refused (expected ok)")
    elif rec["rc"] == 2 and not rec["error"].startswith("error:"):
        out.append("no one-line error")
    return out
