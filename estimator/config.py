"""Hydra configuration: composition, multirun expansion, flattening and hashing.

The configs live in ``conf/`` at the repository root (override with ``$ESTIMATOR_CONF``). The CLI
uses Hydra's compose API and override grammar directly (rather than ``@hydra.main``) so that
every bad override becomes one line on stderr and exit code 2, and nothing is written to
``outputs/``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from estimator.errors import EstimatorError, did_you_mean
from estimator.files import REPO_ROOT

if TYPE_CHECKING:  # omegaconf costs ~0.13 s to import: only where a DictConfig is built
    from omegaconf import DictConfig


def conf_dir() -> Path:
    path = Path(os.environ.get("ESTIMATOR_CONF", REPO_ROOT / "conf")).resolve()
    if not (path / "config.yaml").is_file():
        raise EstimatorError(f"{path}: no Hydra config directory (config.yaml missing); set ESTIMATOR_CONF")
    return path


@cache
def config_groups() -> dict[str, list[str]]:
    """Config group -> available option names, from the ``conf/`` tree."""
    root = conf_dir()
    groups: dict[str, list[str]] = {}
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):  # nested options: experiment=a/full
        groups[sub.name] = sorted(f.relative_to(sub).with_suffix("").as_posix() for f in sub.rglob("*.yaml"))
    return groups


def _check_group_choices(overrides: Iterable[str]) -> None:
    """Give a clear error for ``model=nope`` before Hydra's multi-line one."""
    groups = config_groups()
    for ov in overrides:
        key, sep, value = ov.partition("=")
        key = key.lstrip("+~")
        if not sep or key not in groups:
            continue
        for choice in value.split(","):
            if choice and choice not in groups[key] and choice != "null":
                raise EstimatorError(
                    f"unknown {key} {choice!r}{did_you_mean(choice, groups[key])}; "
                    f"available: {', '.join(groups[key]) or 'none'}"
                )


def group_choices(overrides: Iterable[str]) -> list[str]:
    """The overrides that choose a config group option (``fabric=lumorph``, ``+experiment=ocs``)."""
    groups = config_groups()
    return [o for o in overrides if "=" in o and o.partition("=")[0].lstrip("+~") in groups]


@cache
def _decoder_model(path: Path) -> bool:
    """The model preset at ``path`` is a decoder-only transformer (``arch: decoder``)."""
    return path.is_file() and re.search(r"^arch:\s*decoder\b", path.read_text(), re.M) is not None


def implied_overrides(overrides: list[str]) -> list[str]:
    """The overrides plus ``parallelism=hybrid`` when they choose one decoder-only model
    (``model=llama3_8b``) and no parallelism: a large model is estimated by its layout
    (:mod:`estimator.parallel`), never by capturing it whole as a data-parallel zoo model."""
    chosen = {o.partition("=")[0].lstrip("+~"): o.partition("=")[2] for o in group_choices(overrides)}
    if "parallelism" in chosen or "experiment" in chosen:
        return overrides
    model = chosen.get("model", "")
    if model and "," not in model and _decoder_model(conf_dir() / "model" / f"{model}.yaml"):
        return [*overrides, "parallelism=hybrid"]
    return overrides


def compose(overrides: list[str] | tuple[str, ...] = (), config_name: str = "config") -> DictConfig:
    """Compose ``conf/<config_name>.yaml`` with Hydra overrides (and :func:`implied_overrides`);
    errors become one line."""
    overrides = list(overrides)
    _check_group_choices(overrides)
    if config_name == "config":
        overrides = implied_overrides(overrides)
    return _compose_cached(tuple(overrides), config_name).copy()


def _cache_file(overrides: tuple[str, ...], config_name: str) -> Path | None:
    """Where a composition is cached: ``$ESTIMATOR_CACHE`` (default ``~/.cache/estimator``;
    ``off`` disables), keyed by the overrides and every ``conf/`` file's path, size and mtime."""
    root = os.environ.get("ESTIMATOR_CACHE", "")
    if root.lower() in ("off", "0", "false", "none"):
        return None
    base = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "estimator"
    conf = conf_dir()
    files = []
    for path in sorted(conf.rglob("*.yaml")):
        st = path.stat()
        files.append((str(path.relative_to(conf)), st.st_size, st.st_mtime_ns))
    key = json.dumps([str(conf), files, list(overrides), config_name, _installed("hydra"), _installed("omegaconf")])
    return base / "compose" / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")


def _installed(package: str) -> list[Any]:
    """Where ``package`` is installed and when (its ``__init__.py``'s path, size and mtime): a
    reinstall or upgrade changes it. Found without importing the package or reading metadata."""
    from importlib.util import find_spec

    spec = find_spec(package)
    if spec is None or not spec.origin:
        return [package, None]
    st = os.stat(spec.origin)
    return [spec.origin, st.st_size, st.st_mtime_ns]


def compose_plain(overrides: list[str] | tuple[str, ...] = (), config_name: str = "config") -> dict[str, Any] | None:
    """The resolved config as a plain dict straight from the composition cache, without importing
    Hydra or OmegaConf (~0.15 s of a CLI call), or None when it is not cached or holds an
    interpolation (``${...}``, which needs OmegaConf to resolve). Equal to
    ``to_container(compose(overrides))`` whenever it returns a dict (tested)."""
    overrides = list(overrides)
    _check_group_choices(overrides)
    if config_name == "config":
        overrides = implied_overrides(overrides)
    path = _cache_file(tuple(overrides), config_name)
    if path is None or not path.is_file():
        return None
    try:
        text = path.read_text()
        tree = json.loads(text)
    except (OSError, ValueError):
        return None
    return tree if isinstance(tree, dict) and "${" not in text else None


def _from_cache(path: Path | None) -> DictConfig | None:
    if path is None or not path.is_file():
        return None
    from omegaconf import DictConfig, OmegaConf

    try:
        cfg = OmegaConf.create(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    OmegaConf.set_struct(cfg, True)  # as Hydra composes it
    return cfg if isinstance(cfg, DictConfig) else None


#: compositions kept in the cache; beyond it the oldest written are evicted (a ``-m`` run of
#: many points writes one per point: the cache stays a few MB)
CACHE_FILES = 512


def _to_cache(path: Path | None, cfg: DictConfig) -> None:
    if path is None:
        return
    from omegaconf import OmegaConf

    try:
        text = json.dumps(OmegaConf.to_container(cfg, resolve=False))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
        _evict(path.parent)
    except (OSError, ValueError, TypeError):  # a read-only home or an unencodable value: no cache
        pass


def _evict(folder: Path, keep: int | None = None) -> None:
    """Delete the oldest cached compositions once there are more than ``keep`` (default
    :data:`CACHE_FILES`), down to ``keep / 2``. Runs after each cache write, which follows a Hydra
    composition (~0.3 s): listing a folder of at most ``keep`` files costs far less."""
    keep = CACHE_FILES if keep is None else keep
    with os.scandir(folder) as it:
        entries = [e for e in it if e.name.endswith(".json") and not e.name.startswith(".")]
    if len(entries) <= keep:
        return
    entries.sort(key=lambda e: e.stat().st_mtime_ns)
    for entry in entries[: len(entries) - keep // 2]:
        try:
            os.unlink(entry.path)
        except OSError:
            pass


@cache
def _compose_cached(overrides: tuple[str, ...], config_name: str) -> DictConfig:
    """Hydra's composition, cached on disk (Hydra's import and composition cost ~0.2-0.4 s per
    command; a cached one is read in a few ms). Only successful compositions are cached."""
    cache_file = _cache_file(overrides, config_name)
    cached = _from_cache(cache_file)
    if cached is not None:
        return cached
    cfg = _hydra_compose(overrides, config_name)
    _to_cache(cache_file, cfg)
    return cfg


def _hydra_compose(overrides: tuple[str, ...], config_name: str) -> DictConfig:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf, open_dict

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
            cfg = hydra_compose(config_name=config_name, overrides=list(overrides))
    except Exception as exc:  # Hydra raises several exception types; all mean a bad override/config
        message = _one_line_hydra_error(exc, overrides)
        raise EstimatorError(_unknown_key(message, overrides, config_name) or message) from None
    finally:
        GlobalHydra.instance().clear()
    OmegaConf.set_readonly(cfg, False)
    if "hydra" in cfg:
        with open_dict(cfg):
            del cfg["hydra"]
    return cfg


def _one_line_hydra_error(exc: Exception, overrides: Iterable[str]) -> str:
    text = str(exc).strip()
    if exc.__cause__ is not None:  # Hydra wraps the OmegaConf error that names the key
        text += "\n" + str(exc.__cause__)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    key_problem = next((ln for ln in lines if ln.startswith(("Key '", "Could not", "Error"))), None)
    first = lines[0] if lines else type(exc).__name__
    if "not in struct" in text or "Could not override" in text:
        bad = next((ln for ln in lines if ln.startswith("Key '")), first)
        override = first.removeprefix("Could not override ").rstrip(".")
        if "not in struct" in bad:
            key = override.strip("'").rsplit(".", 1)
            where = f" (no such parameter in {key[0]})" if len(key) == 2 else ""
            return f"bad override {override}: unknown parameter {key[-1]!r}{where}"
        return f"bad override {override}: {bad}"
    if key_problem and key_problem != first:
        return f"{first} {key_problem}"
    return f"bad configuration ({' '.join(overrides)}): {first}"


def _unknown_key(message: str, overrides: tuple[str, ...], config_name: str) -> str | None:
    """For ``unknown parameter 'nodez' (no such parameter in fabric)`` (or a top-level
    ``'fabirc'``): compose without the bad override, find the first component of the dotted key
    that is not in the config and name it with a did-you-mean among the keys at its level
    (``bad override fabirc.nodes: unknown parameter 'fabirc' (did you mean 'fabric'?)``)."""
    m = re.search(r"unknown parameter '([^']+)'(?: \(no such parameter in ([\w.]+)\))?", message)
    if not m:
        return None
    leaf, parent = m.groups()
    dotted = f"{parent}.{leaf}" if parent else leaf
    from omegaconf import DictConfig

    rest = tuple(o for o in overrides if not o.lstrip("+~").startswith(dotted))
    try:
        node: Any = _compose_cached(rest, config_name)
    except EstimatorError:
        return None
    seen: list[str] = []
    for part in dotted.split("."):
        if not isinstance(node, DictConfig):
            return None
        if part not in node:
            where = f" in {'.'.join(seen)}" if seen else ""
            keys = list(node.keys()) + ([] if seen else list(config_groups()))
            hint = did_you_mean(part, keys) or _named_by_other_presets(seen, part)
            return f"bad override {dotted}: unknown parameter {part!r}{where}{hint}"
        node = node[part]
        seen.append(part)
    return None


def _named_by_other_presets(seen: list[str], key: str) -> str:
    """For a group key one preset leaves out (``model.qk_norm`` on llama3_8b, named by the Qwen3 presets):
    name the presets that have it and Hydra's ``+`` for adding a key, else ''."""
    if len(seen) != 1 or seen[0] not in config_groups():
        return ""
    group = seen[0]
    having = sorted(f.stem for f in (conf_dir() / group).glob("*.yaml")
                    if re.search(rf"^{re.escape(key)}:", f.read_text(encoding="utf-8"), re.M))
    if not having:
        return ""
    shown = ", ".join(having[:3]) + (", ..." if len(having) > 3 else "")
    verb = "does" if len(having) == 1 else "do"
    if group == "fabric":  # a fabric's config is a typed dataclass: `+fabric.KEY` is refused too
        return f" (a parameter of other fabrics: {shown} {verb})"
    return f" (this {group} preset does not name it; {shown} {verb}: add it with +{group}.{key}=VALUE)"


def expand_multirun(overrides: list[str]) -> list[list[str]]:
    """Expand Hydra sweep overrides (``a=1,2 b=x,y``) into the cartesian product of plain
    override lists, using Hydra's own override parser (ranges, choices and globs work)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    _check_group_choices(overrides)
    try:
        parsed = OverridesParser.create().parse_overrides(overrides=overrides)
    except Exception as exc:
        raise EstimatorError(f"bad override: {str(exc).splitlines()[0]}") from None
    _check_multirun_size(parsed)
    axes: list[list[str]] = []
    for ov in parsed:
        key = ov.get_key_element()
        if ov.is_sweep_override():
            axes.append([f"{key}={v}" for v in ov.sweep_string_iterator()])
        else:
            axes.append([ov.input_line])
    return [list(combo) for combo in itertools.product(*axes)] if axes else [[]]


def _check_multirun_size(parsed: list[Any]) -> None:
    """Refuse a ``-m`` expansion of more than ``limits.multirun_points`` points (each point is
    composed and run as its own command; a larger grid is a sweep) before any point is listed.
    The limit comes from a ``limits.multirun_points=N`` override or the default."""
    from estimator import limits

    cap = limits.get().multirun_points
    points = 1
    for ov in parsed:
        if not ov.is_sweep_override():
            if ov.get_key_element().lstrip("+~") == "limits.multirun_points":
                cap = limits.check_count(ov.value(), "sweep_points", "limits.multirun_points")
            continue
        value = ov.value()
        if hasattr(value, "step"):  # range(start, stop, step)
            step = value.step or 1
            points *= max(0, math.ceil((value.stop - value.start) / step))
        elif hasattr(value, "list"):
            points *= len(value.list)
        elif hasattr(value, "include"):  # glob(...) over a group's options
            points *= len(list(ov.sweep_string_iterator()))
        else:
            raise EstimatorError(f"bad override {ov.input_line}: -m takes lists, range() and glob(), not "
                                 f"{type(value).__name__}")
    if points > cap:
        raise EstimatorError(f"-m expands to {points} points, more than limits.multirun_points = {cap} (each point runs "
                             "as its own command; a larger grid is a sweep: estimator sweep 'sweep.grid={...}', or "
                             "raise limits.multirun_points=N)")


_MISSING = object()


def dotted_get(tree: Any, dotted: str, default: Any = None) -> Any:
    """``tree[a][b]`` for ``"a.b"`` in nested plain dicts; ``default`` where a key is missing."""
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def has_dotted(tree: Any, dotted: str) -> bool:
    """True if ``dotted`` names a key (even one holding None) in nested plain dicts."""
    return dotted_get(tree, dotted, _MISSING) is not _MISSING


def to_container(cfg: DictConfig | dict[str, Any]) -> dict[str, Any]:
    if isinstance(cfg, dict):  # already plain (the CLI's cached fast path, sweep points)
        return dict(cfg)
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(cfg, DictConfig | ListConfig):
        try:
            return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
        except Exception as exc:
            raise EstimatorError(f"bad configuration: {str(exc).splitlines()[0]}") from None
    return dict(cfg)


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{'fabric': {'nodes': 8}}`` -> ``{'fabric.nodes': 8}``; lists become JSON strings."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, list | tuple):
            out[name] = json.dumps(value, sort_keys=True)
        else:
            out[name] = value
    return out


def config_hash(tree: dict[str, Any]) -> str:
    """A stable hash of a resolved config (order-independent)."""
    text = json.dumps(tree, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
