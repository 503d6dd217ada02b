"""Fuzz every input format and the command line, each case under a time and memory limit.

    python benchmarks/fuzz_inputs.py [--per-format 300] [--overrides 150] [--seed 0]
                                     [--timeout 20] [--memory-mb 2048]

Inputs: mutants of every format (the mutation classes and loaders of ``tests/fuzz_inputs.py``:
truncation, bit flips, splices, NaN/Infinity, huge integers, deep nesting, UTF-16/32), spread
evenly over the classes. Each is loaded by a worker process with ``RLIMIT_AS`` set to
``--memory-mb`` that the driver kills after ``--timeout`` seconds (a *hang*; the worker is then
restarted), so unbounded time or memory shows up as a failure instead of stalling the run.

Command line: ``--overrides`` invalid overrides (wrong booleans, out-of-range and non-numeric
numbers, interpolations, ``hydra.*`` settings, misspelt keys, oversized grid points and ``-m``
expansions) through the real CLI, each in a fresh folder under the same limits.

A failure is anything but a valid load (inputs) or one ``error:`` line with exit code 2 (both);
a traceback, a hang, a crash, an accepted invalid override, or a file left in the case's folder
all count. Prints tried / failures per format and the first few failures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


# ---- the worker: loads one mutant per request line ---------------------------------------------
def _worker() -> None:
    from fuzz_inputs import loader

    from estimator.errors import EstimatorError

    for line in sys.stdin:
        req = json.loads(line)
        outcome = "refused"
        try:
            loader(req["fmt"])(Path(req["path"]))
            problem, outcome = None, "loaded"
        except EstimatorError as exc:
            msg = str(exc)
            problem = f"error message not one short line: {msg[:200]!r}" if "\n" in msg or len(msg) > 600 else None
        except BaseException as exc:  # noqa: BLE001 - any other exception is what the fuzzer looks for
            problem = f"{type(exc).__name__}: {str(exc)[:200]}"
        print(json.dumps({"problem": problem, "outcome": outcome}), flush=True)


def _limits(memory_mb: int):
    def apply() -> None:
        limit = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


class Worker:
    """A loader process with a memory limit; :meth:`run` gives up on a case after ``timeout``."""

    def __init__(self, memory_mb: int, timeout: float) -> None:
        self.memory_mb, self.timeout, self.proc = memory_mb, timeout, None
        self.restarts = 0
        self.outcomes: dict[str, int] = {}

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
        return subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                                preexec_fn=_limits(self.memory_mb))

    def run(self, fmt: str, path: Path) -> str | None:
        """The problem loading ``path`` as ``fmt`` (None: loaded, or refused in one line; which
        of the two is counted in :attr:`outcomes`)."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        self.proc.stdin.write(json.dumps({"fmt": fmt, "path": str(path)}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:  # nothing within the time limit (a hang), or end of file (the worker died)
            hung = not ready
            self.stop()
            self.restarts += 1
            return f"hang (more than {self.timeout:g} s)" if hung else "crash (the loader process died)"
        answer = json.loads(line)
        outcome = answer.get("outcome", "refused")
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        return answer["problem"]

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def fuzz_inputs(per_format: int, rng: random.Random, worker: Worker) -> int:
    from fuzz_inputs import CLASSES, mutate, seeds

    pool = seeds()
    others = [b for f in pool.values() for b, _ in f]
    print(f"{'format':<10} {'tried':>6} {'loaded':>7} {'refused':>8} {'failures':>9} {'hangs':>6} {'wall_s':>7}")
    total = 0
    for fmt, items in pool.items():
        t0, failures = time.perf_counter(), []
        worker.outcomes = {}
        for k in range(per_format):
            cls = CLASSES[k % len(CLASSES)]
            data, suffix = items[k % len(items)]
            blob = mutate(data, rng.choice(others), cls, random.Random(rng.getrandbits(32)))
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / f"mutant{suffix}"
                path.write_bytes(blob)
                problem = worker.run(fmt, path)
                left = sorted(p.name for p in Path(tmp).iterdir() if p != path)
            if left and not problem:
                problem = f"left files behind: {left[:3]}"
            if problem:
                failures.append(f"{cls}: {problem}")
        hangs = sum("hang" in f for f in failures)
        total += len(failures)
        print(f"{fmt:<10} {per_format:>6} {worker.outcomes.get('loaded', 0):>7} {worker.outcomes.get('refused', 0):>8} "
              f"{len(failures):>9} {hangs:>6} {time.perf_counter() - t0:>7.1f}", flush=True)
        for f in failures[:3]:
            print(f"    {f}")
    return total


# ---- invalid command-line overrides ------------------------------------------------------------
BOOLS = {"estimate": ["write"], "sweep": ["sweep_force", "ray.local_pool"], "collective": ["show_schedule", "explicit"],
         "validate": ["pin"], "capture": ["capture.force"]}
NUMBERS = [("sql", "sql_rows", ["-1", "0", "abc", "2.5", "nan", "1e400"]),
           ("sweep", "ray.in_process_below", ["-1", "abc", "-0.5", "inf"]),
           ("sweep", "ray.num_cpus", ["0", "-3", "9223372036854775807", "x"]),
           ("sweep", "ray.batch_size", ["0", "-1", "1.5"]),
           ("validate", "validation.margin_pct", ["-1", "nan", "inf", "abc", "-1e-9"]),
           ("collective", "bytes", ["-5", "abc", "nan", "-inf"]),
           ("estimate", "fabric.nodes", ["0", "-8", "8.5", "9223372036854775807", "2**63", "abc"]),
           ("estimate", "batch_size", ["0", "-1", "abc", "1e30"]),
           ("estimate", "fabric.alpha_s", ["abc", "nan", "true"]),
           ("capture", "capture.batch", ["0", "100000000", "x"])]
INTERPOLATIONS = ["${now:%Y}", "${hydra:runtime.cwd}", "${fabric.name}", "${oc.select:fabric.name,x}",
                  "${oc.env:HOME}", "${oc.decode:'1'}", "x${store}y", "${oc.create:{a:1}}"]
KEYS = {"estimate": ["fabric.nodes", "model.name", "batch_size", "precision", "fabric.alpha_s", "device.name",
                     "parallelism.bucket_cap_bytes", "store", "write"],
        "sweep": ["ray.address", "ray.num_cpus", "sweep_force", "sweep.name"],
        "collective": ["bytes", "collective", "algorithm", "group_size"]}


def _typo(key: str, rng: random.Random) -> str:
    parts = key.split(".")
    i = rng.randrange(len(parts))
    word = parts[i]
    j = rng.randrange(len(word))
    edit = rng.choice(["swap", "drop", "double", "replace"])
    if edit == "swap" and j + 1 < len(word):
        word = word[:j] + word[j + 1] + word[j] + word[j + 2:]
    elif edit == "drop" and len(word) > 2:
        word = word[:j] + word[j + 1:]
    elif edit == "double":
        word = word[:j] + word[j] + word[j:]
    else:
        word = word[:j] + rng.choice("xqz") + word[j + 1:]
    parts[i] = word
    return ".".join(parts)


def invalid_overrides(n: int, rng: random.Random) -> list[list[str]]:
    """``n`` command lines whose one override is invalid (typos are checked against the real keys)."""
    from estimator.config import compose, flatten, to_container

    known = set(flatten(to_container(compose([]))))
    makers = ["bool", "number", "interpolation", "hydra", "typo", "grid", "multirun"]
    out: list[list[str]] = []
    while len(out) < n:
        kind = makers[len(out) % len(makers)]
        if kind == "bool":
            cmd = rng.choice(sorted(BOOLS))
            value = rng.choice(["maybe", "yes", "no", "1", "0", "on", "TRUE1", "null", "''", "[true]"])
            out.append([cmd, f"{rng.choice(BOOLS[cmd])}={value}"])
        elif kind == "number":
            cmd, key, values = rng.choice(NUMBERS)
            out.append([cmd, *(["SELECT 1"] if cmd == "sql" else []), f"{key}={rng.choice(values)}"])
        elif kind == "interpolation":
            cmd = rng.choice(sorted(KEYS))
            out.append([cmd, f"{rng.choice(KEYS[cmd])}={rng.choice(INTERPOLATIONS)}"])
        elif kind == "hydra":
            out.append([rng.choice(["estimate", "sweep", "report"]),
                        rng.choice(["hydra.run.dir=/tmp/x", "hydra.searchpath=[file:///tmp]", "hydra.job.chdir=true",
                                    "hydra/launcher=basic", "+hydra.verbose=true"])])
        elif kind == "typo":
            key = _typo(rng.choice(KEYS["estimate"]), rng)
            if key in known:  # the edit made another real key
                continue
            out.append(["estimate", f"{key}=8"])
        elif kind == "grid":
            value = rng.choice(["9223372036854775807", "-4", "0", "abc", "8.5", "1e30"])
            out.append(["sweep", f"sweep.grid={{fabric.nodes:[8,{value}]}}"])
        else:
            out.append(["estimate", "-m", f"fabric.nodes=range(1,{rng.choice([2000, 100000, 10**12])})"])
    return out


def fuzz_overrides(n: int, rng: random.Random, timeout: float, memory_mb: int, workload: Path) -> int:
    cases = invalid_overrides(n, rng)
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore", RAY_USAGE_STATS_ENABLED="0")
    failures, hangs, t0 = [], 0, time.perf_counter()
    for args in cases:
        with tempfile.TemporaryDirectory() as tmp:
            extra = [f"store={tmp}/s.duckdb"] + ([f"traces_dir={tmp}/traces", f"workload={workload}"]
                                                 if args[0] in ("estimate", "sweep") else [])
            try:
                out = subprocess.run([sys.executable, "-m", "estimator.cli", *args, *extra], cwd=tmp, env=env,
                                     capture_output=True, text=True, timeout=timeout,
                                     preexec_fn=_limits(memory_mb))
            except subprocess.TimeoutExpired:
                hangs += 1
                failures.append(f"{' '.join(args)}: hang (more than {timeout:g} s)")
                continue
            lines = out.stderr.strip().splitlines()
            left = sorted(p.name for p in Path(tmp).iterdir())
            if out.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error: ") or "Traceback" in out.stderr:
                failures.append(f"{' '.join(args)}: exit {out.returncode}, stderr {out.stderr.strip()[-200:]!r}")
            elif left:
                failures.append(f"{' '.join(args)}: left {left}")
    print(f"{'overrides':<10} {len(cases):>6} {0:>7} {len(cases) - len(failures):>8} {len(failures):>9} {hangs:>6} "
          f"{time.perf_counter() - t0:>7.1f}")
    for f in failures[:5]:
        print(f"    {f}")
    return len(failures)


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        _worker()
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-format", type=int, default=300)
    ap.add_argument("--overrides", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--memory-mb", type=int, default=2048)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min); per case: {args.timeout:g} s, {args.memory_mb} MB address space")
    worker = Worker(args.memory_mb, args.timeout)
    try:
        failures = fuzz_inputs(args.per_format, rng, worker) if args.per_format else 0
    finally:
        worker.stop()
    if args.overrides:
        with tempfile.TemporaryDirectory() as tmp:
            from helpers import chain_workload

            from estimator.workloads import io

            workload = io.save(chain_workload([1e-3], [1e-3], 1e-4, [1 << 20]), Path(tmp) / "w.workload.json")
            failures += fuzz_overrides(args.overrides, rng, args.timeout * 3, args.memory_mb, workload)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
