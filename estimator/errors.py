"""The one exception type for errors a user can cause.

Bad files, bad overrides and impossible sizes raise :class:`EstimatorError` with a one-line
message that names the input and the problem. The CLI prints it and exits with status 2.
"""

from __future__ import annotations

from collections.abc import Iterable


class EstimatorError(Exception):
    """A user-caused error: one line, naming the input and what is wrong with it."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest choice, or nothing."""
    import difflib

    close = difflib.get_close_matches(str(name), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def require(condition: bool, message: str) -> None:
    """Raise :class:`EstimatorError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise EstimatorError(message)


def positive(value: float, name: str) -> float:
    """Check that a number is finite and > 0; return it."""
    require(_finite(value) and value > 0, f"{name} must be a positive number, got {value!r}")
    return value


def non_negative(value: float, name: str) -> float:
    """Check that a number is finite and >= 0; return it."""
    require(_finite(value) and value >= 0, f"{name} must be a non-negative number, got {value!r}")
    return value


def _finite(value: object) -> bool:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return v == v and v not in (float("inf"), float("-inf"))
