"""The ``estimator`` command line.

``estimator COMMAND [POSITIONAL...] [key=value ...] [-m]``

Each command is a module ``estimator.commands.<command>`` that defines::

    HELP = "one line"
    CONFIG_NAME = "config"          # optional: the Hydra primary config to compose
    POSITIONAL = ("file",)          # optional: names that positional arguments fill in
    def run(cfg: DictConfig) -> dict | list[dict] | None
    RUN_WITH_OVERRIDES = True       # optional: run(cfg, overrides) also gets the override list
    def format_text(result) -> str  # optional: human-readable output (default: key: value lines)

``estimator --cfg COMMAND ...`` prints the composed config; ``estimator --check COMMAND ...``
composes and validates everything a run would check first, and runs nothing (see :func:`check`).
Overrides use Hydra's grammar; ``-m``/``--multirun`` expands sweeps (``fabric.nodes=8,64``) and runs
the command once per point. ``output=json`` prints one JSON object (a JSON array per line under
``-m``: one object per point). Errors a user can cause print one line to stderr and exit 2.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import sys
from pathlib import Path
from typing import Any

from estimator.errors import EstimatorError

#: ``key=value`` with a Hydra key (``+fabric.nodes=8``, ``~x``); anything else (``"SELECT a = 1"``)
#: is a positional argument
_OVERRIDE = re.compile(r"^(\+{0,2}|~)[A-Za-z_][\w.@/-]*=|^~[A-Za-z_][\w.@/-]*$")


def _commands() -> dict[str, Path]:
    """Command name -> its module's source file, found without importing any command (a command
    module may pull in matplotlib, Ray, DuckDB or torch: only the one that runs is imported)."""
    import estimator.commands as pkg

    found = {}
    for m in pkgutil.iter_modules(pkg.__path__):
        if not m.name.startswith("_"):
            folder = Path(m.module_finder.path)
            found[m.name] = folder / m.name / "__init__.py" if m.ispkg else folder / f"{m.name}.py"
    return found


def _load_command(name: str) -> Any:
    commands = _commands()
    if name not in commands:
        from estimator.config_checks import did_you_mean

        raise EstimatorError(f"unknown command {name!r}{did_you_mean(name, commands)}; "
                             f"commands: {', '.join(sorted(commands))}")
    return importlib.import_module(f"estimator.commands.{name}")


#: a command's one-line help: a top-level ``HELP = "..."`` in its source
_HELP = re.compile(r"^HELP\s*=\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')", re.M)


def help_line(source: Path) -> str:
    """The ``HELP`` string of a command module, read from its source without importing it."""
    try:
        found = _HELP.search(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        found = None
    if found is None:
        return "(no help line)"
    import ast

    return ast.literal_eval(found.group(1))


def _usage() -> str:
    lines = ["usage: estimator COMMAND [args] [key=value ...] [-m]", "", "commands:"]
    for name, source in sorted(_commands().items()):
        lines.append(f"  {name:<12} {help_line(source)}")
    lines += [
        "",
        "examples:",
        "  estimator estimate model=resnet50 fabric=ideal fabric.nodes=8 device=a100 output=json",
        "  estimator estimate -m fabric=ideal,nvlink_leafspine fabric.nodes=8,64",
        "  estimator collective fabric=ideal fabric.nodes=64 collective=all_reduce algorithm=ring bytes=67108864",
        "  estimator --cfg COMMAND [overrides]   print the composed config",
        "  estimator --check COMMAND [args]      compose and validate only (nothing runs)",
        "  estimator COMMAND --help              what a command does and its keys",
    ]
    return "\n".join(lines)


def _default_format(result: Any) -> str:
    if isinstance(result, dict):
        width = max((len(k) for k in result), default=0)
        return "\n".join(f"{k:<{width}}  {_fmt(v)}" for k, v in result.items() if not isinstance(v, list | dict))
    return json.dumps(result, indent=2, default=str)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _command_level(module: Any, overrides: list[str]) -> list[str]:
    """For commands that apply overrides per point themselves (``RUN_WITH_OVERRIDES``, e.g. a sweep
    over several fabrics), keep dotted keys inside a config group (``fabric.reconfig_s``) out of the
    command's own composition: they need not exist in the default fabric, only in some point.
    Keys of the groups the command reads itself (``OWN_GROUPS``, e.g. ``sweep.batch_size``) stay;
    overrides starting with one of ``NOT_COMPOSED`` are the command's own to apply."""
    if not getattr(module, "RUN_WITH_OVERRIDES", False):
        return overrides
    from estimator.config import config_groups

    overrides = [o for o in overrides if not o.startswith(getattr(module, "NOT_COMPOSED", ()))]
    groups = set(config_groups()) - set(getattr(module, "OWN_GROUPS", ()))
    return [o for o in overrides if not ("." in o.partition("=")[0] and o.lstrip("+~").split(".")[0] in groups)]


def _compose(module: Any, point: list[str], config_name: str, plain: bool) -> Any:
    """The command's config: a plain dict from the composition cache when the command takes one
    (``PLAIN_CONFIG = True``: no Hydra or OmegaConf import, ~0.15 s of a call), else Hydra's
    DictConfig."""
    from estimator import config

    overrides = _command_level(module, point)
    if plain and getattr(module, "PLAIN_CONFIG", False):
        tree = config.compose_plain(overrides, config_name=config_name)
        if tree is not None:
            return tree
    return config.compose(overrides, config_name=config_name)


def _set_key(cfg: Any, name: str, value: Any) -> None:
    if isinstance(cfg, dict):
        cfg[name] = value
        return
    from omegaconf import open_dict

    with open_dict(cfg):
        cfg[name] = value


def run(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    flag = argv[0] if argv[0] in ("--cfg", "--check") else None  # print the config / check only
    if flag is not None:
        argv = argv[1:]
        if not argv:
            raise EstimatorError(f"{flag} needs a command")
    show_cfg, check_only = flag == "--cfg", flag == "--check"
    command, rest = argv[0], argv[1:]
    module = _load_command(command)
    multirun = False
    overrides: list[str] = []
    positionals: list[str] = []
    for arg in rest:
        if arg in ("-m", "--multirun"):
            multirun = True
        elif arg in ("-h", "--help"):
            print(f"estimator {command}: {getattr(module, 'HELP', '')}\n\n{(module.__doc__ or '').strip()}")
            return 0
        elif _OVERRIDE.match(arg):
            overrides.append(arg)
        else:
            positionals.append(arg)
    names = tuple(getattr(module, "POSITIONAL", ()))
    if len(positionals) > len(names):
        raise EstimatorError(f"estimator {command}: unexpected argument {positionals[len(names)]!r}")

    from estimator import config, limits
    from estimator.config_checks import check_common, check_override_values, check_overrides

    check_overrides(overrides)
    config_name = getattr(module, "CONFIG_NAME", "config")
    points = config.expand_multirun(overrides) if multirun else [overrides]
    cfgs = []
    for point in points:
        cfg = _compose(module, point, config_name, plain=not (multirun or show_cfg))
        for name, value in zip(names, positionals, strict=False):
            _set_key(cfg, name, value)
        limits.configure(cfg.get("limits"))
        check_common(cfg, command)  # every point's shared settings before any point runs
        choices = config.group_choices(point)
        values = [o for o in _command_level(module, point) if o not in choices]
        if values:  # each value against its key's default (the same group choices, composed without values)
            check_override_values(values, cfg, _compose(module, choices, config_name, plain=not (multirun or show_cfg)))
        cfgs.append((point, cfg))
    if show_cfg:
        from omegaconf import OmegaConf

        for _, cfg in cfgs:
            print(OmegaConf.to_yaml(cfg))
        return 0
    if check_only:
        n = sum(check(module, names, cfg, point) for point, cfg in cfgs)
        print(f"ok: estimator {command} composes and validates ({n} point{'s' * (n != 1)}; nothing run)")
        return 0
    for point, cfg in cfgs:
        result = module.run(cfg, point) if getattr(module, "RUN_WITH_OVERRIDES", False) else module.run(cfg)
        if result is None:
            continue
        if cfg.get("output", "text") == "json":
            print(json.dumps(result, default=str, sort_keys=False))
        else:
            if multirun:
                print(f"# {' '.join(point)}")
            fmt = getattr(module, "format_text", _default_format)
            print(fmt(result))
    return 0


#: positional arguments that name an input file (checked to exist by ``--check``)
_FILE_ARGS = ("file", "workload")


def check(module: Any, names: tuple[str, ...], cfg: Any, point: list[str]) -> int:
    """``estimator --check COMMAND ...``: what a run checks before it does any work — the command
    line, the composed config (unknown keys and groups fail in composition) and the shared keys,
    which ``run`` already did — plus each positional input file existing and the command's own
    ``check(cfg)`` hook (``check(cfg, overrides)`` for ``RUN_WITH_OVERRIDES`` commands): e.g. the
    fabric, device and precision of an estimate, every point of a sweep. Nothing is captured,
    estimated or written. Used by the docs test to fail stale command examples. Returns how many
    points that is: 1, or what the hook returns when it counts them (a sweep's grid points)."""
    from estimator.files import check_regular_file, resolve_input

    for name in names:
        value = cfg.get(name)
        if name in _FILE_ARGS and value:
            check_regular_file(resolve_input(str(value)), "input")
    hook = getattr(module, "check", None)
    if hook is None:
        return 1
    n = hook(cfg, point) if getattr(module, "RUN_WITH_OVERRIDES", False) else hook(cfg)
    return n if isinstance(n, int) and not isinstance(n, bool) else 1


def _safe_message(text: str, limit: int = 400) -> str:
    """An error line safe to print: control characters (terminal escapes) escaped, at most ``limit``
    characters (a message quoting file contents never dumps the file)."""
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f\x9b]", lambda m: f"\\x{ord(m.group()):02x}", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    try:
        code = run(argv)
    except EstimatorError as exc:
        print(f"error: {_safe_message(str(exc))}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        code = 130
    except BrokenPipeError:  # `estimator ... | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 0
    runner = sys.modules.get("estimator.sweep.runner")
    if runner is not None and runner.RAY_KILLED:  # a signal ended Ray: skip its exit hooks (they block)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    main()
