"""The named rules that turn a project number into a claim's verdict.

A claim row (:class:`estimator.reports.model.Claim`) is judged by exactly one rule of this module;
the ``claims`` table stores the rule's :attr:`Rule.name`, its :attr:`Rule.tolerance` (in words, with
the numbers) and, for ``simplified`` / ``paper-inconsistent``, the rule's derivation. Every rule can
say ``holds`` and ``fails`` (tests/test_claim_rules.py feeds each one values on both sides of its
tolerance); two rules can say more, and only with a computed derivation:

* :class:`PaperArithmetic` says ``paper-inconsistent`` when the project's number is what the paper's
  own formula gives for the paper's own inputs and the paper prints something else;
* :class:`ExplainedGap` says ``simplified`` when the project misses but the named mechanism the model
  omits, its cost added by hand (a number computed from stated values), closes the gap;
* :class:`Exclusive` says ``paper-inconsistent`` when two of the paper's statements name different
  winners for the same case (so at most one can hold) and the project reproduces the other one.

Ties: a difference within :data:`TIE_BAND` (relative) is no difference, for every rule that compares
two numbers ("A beats B", "grows", "remains the same"). One band for the whole project: the papers'
figures cannot be read finer than about 1 % and the model's per-hop constants are not known better.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: relative difference under which two numbers are a tie (project-wide; see the module docstring)
TIE_BAND = 0.01
#: relative tolerance of a number the paper states as a round figure or that is read off a plot
#: ("ten times lower latency", "up to 1.7X"): within 20 %, i.e. "ten times" is 8x..12x
ROUND_FIGURE = 0.20

HOLDS, FAILS, SIMPLIFIED, INCONSISTENT = "holds", "fails", "simplified", "paper-inconsistent"

Fmt = Callable[[float], str]


def _g(v: float) -> str:
    return f"{v:.4g}"


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str
    derivation: str = ""


@dataclass(frozen=True)
class Rule:
    """Base: ``name`` (the rule's kind) and ``tolerance`` (what it accepts, in words) are stored
    with every claim the rule judges; ``judge(value)`` gives the :class:`Verdict`."""

    @property
    def name(self) -> str:
        raise NotImplementedError

    @property
    def tolerance(self) -> str:
        raise NotImplementedError

    def judge(self, value: Any) -> Verdict:
        raise NotImplementedError


def _verdict(ok: bool, reason: str) -> Verdict:
    return Verdict(HOLDS if ok else FAILS, reason)


@dataclass(frozen=True)
class AtLeast(Rule):
    """Holds when the project's number is >= ``threshold`` (the paper's number minus a stated margin)."""

    threshold: float
    fmt: Fmt = _g
    why: str = ""  # how the threshold follows from the paper's number

    name = "at-least"
    _ops = (">=", "<")

    def _ok(self, value: float) -> bool:
        return value >= self.threshold

    @property
    def tolerance(self) -> str:
        return f"{self._ops[0]} {self.fmt(self.threshold)}" + (f" ({self.why})" if self.why else "")

    def judge(self, value: float) -> Verdict:
        ok = self._ok(value)
        return _verdict(ok, f"{self.fmt(value)} {self._ops[0 if ok else 1]} {self.fmt(self.threshold)}")


@dataclass(frozen=True)
class AtMost(AtLeast):
    """Holds when the project's number is <= ``threshold``."""

    name = "at-most"
    _ops = ("<=", ">")

    def _ok(self, value: float) -> bool:
        return value <= self.threshold


@dataclass(frozen=True)
class WithinAbsolute(Rule):
    """Holds when ``|project - paper| <= tol`` (in the claim's unit)."""

    paper: float
    tol: float
    fmt: Fmt = _g

    name = "within-absolute"

    @property
    def tolerance(self) -> str:
        return f"|project - {self.fmt(self.paper)}| <= {self.fmt(self.tol)}"

    def judge(self, value: float) -> Verdict:
        d = abs(value - self.paper)
        ok = d <= self.tol
        return _verdict(ok, f"|{self.fmt(value)} - {self.fmt(self.paper)}| = {self.fmt(d)} "
                            f"{'<=' if ok else '>'} {self.fmt(self.tol)}")


@dataclass(frozen=True)
class WithinRelative(Rule):
    """Holds when ``|project / paper - 1| <= tol``."""

    paper: float
    tol: float
    fmt: Fmt = _g

    name = "within-relative"

    @property
    def tolerance(self) -> str:
        return f"within {self.tol:.0%} of {self.fmt(self.paper)}"

    def judge(self, value: float) -> Verdict:
        d = value / self.paper - 1
        ok = abs(d) <= self.tol
        return _verdict(ok, f"{self.fmt(value)} is {d:+.1%} from {self.fmt(self.paper)} "
                            f"({'within' if ok else 'outside'} {self.tol:.0%})")


@dataclass(frozen=True)
class InRange(Rule):
    """Holds when ``lo (1 - tol) <= project <= hi (1 + tol)`` (a paper's range, widened by ``tol``)."""

    lo: float
    hi: float
    tol: float
    fmt: Fmt = _g

    name = "in-range"

    @property
    def tolerance(self) -> str:
        return f"[{self.fmt(self.lo)}, {self.fmt(self.hi)}] widened by {self.tol:.0%} at each end"

    def judge(self, value: float) -> Verdict:
        lo, hi = self.lo * (1 - self.tol), self.hi * (1 + self.tol)
        if value < lo:
            return Verdict(FAILS, f"{self.fmt(value)} below {self.fmt(lo)}")
        if value > hi:
            return Verdict(FAILS, f"{self.fmt(value)} above {self.fmt(hi)}")
        return Verdict(HOLDS, f"{self.fmt(lo)} <= {self.fmt(value)} <= {self.fmt(hi)}")


@dataclass(frozen=True)
class Equals(Rule):
    """Holds when the project's (integer) number equals the paper's exactly."""

    paper: Any

    name = "equals"

    @property
    def tolerance(self) -> str:
        return f"exactly {self.paper}"

    def judge(self, value: Any) -> Verdict:
        ok = value == self.paper
        return _verdict(ok, f"{value} {'=' if ok else '!='} {self.paper}")


@dataclass(frozen=True)
class Member(Rule):
    """Holds when the paper's value is one of the project's (e.g. the depths tied for the optimum)."""

    paper: Any

    name = "member"

    @property
    def tolerance(self) -> str:
        return f"{self.paper} among the project's values (ties listed)"

    def judge(self, value: Sequence[Any]) -> Verdict:
        ok = self.paper in value
        return _verdict(ok, f"{self.paper} {'in' if ok else 'not in'} {list(value)}")


@dataclass(frozen=True)
class Beats(Rule):
    """Ordering: holds when ``winner`` beats every rival by more than :data:`TIE_BAND`.

    ``value`` is a mapping name -> number; ``higher`` says whether larger is better (samples/s) or
    smaller (seconds)."""

    winner: str
    rivals: tuple[str, ...]
    higher: bool = True
    fmt: Fmt = _g

    name = "ordering"

    @property
    def tolerance(self) -> str:
        return f"{self.winner} {'above' if self.higher else 'below'} every rival by more than the {TIE_BAND:.0%} tie band"

    def margin(self, value: dict[str, float]) -> tuple[float, str]:
        """The winner's worst relative advantage and the rival it is over (> 0: ahead)."""
        w = value[self.winner]
        margins = {r: (w / value[r] - 1) if self.higher else (value[r] / w - 1) for r in self.rivals}
        rival = min(margins, key=margins.get)
        return margins[rival], rival

    def judge(self, value: dict[str, float]) -> Verdict:
        m, rival = self.margin(value)
        others = ", ".join(f"{k} {self.fmt(v)}" for k, v in value.items())
        if m > TIE_BAND:
            return Verdict(HOLDS, f"{self.winner} ahead of the closest rival ({rival}) by {m:.2%}; {others}")
        word = "ties with" if m >= -TIE_BAND else "loses to"
        return Verdict(FAILS, f"{self.winner} {word} {rival} ({m:+.2%}; a tie is within {TIE_BAND:.0%}); {others}")


@dataclass(frozen=True)
class Tie(Rule):
    """Holds when every number of ``value`` is within :data:`TIE_BAND` of the first ("remains the same")."""

    fmt: Fmt = _g

    name = "tie-band"

    @property
    def tolerance(self) -> str:
        return f"all within the {TIE_BAND:.0%} tie band of each other"

    def judge(self, value: Sequence[float]) -> Verdict:
        lo, hi = min(value), max(value)
        spread = hi / lo - 1
        ok = spread <= TIE_BAND
        return _verdict(ok, f"{', '.join(self.fmt(v) for v in value)}: spread {spread:.2%} "
                            f"{'<=' if ok else '>'} {TIE_BAND:.0%}")


@dataclass(frozen=True)
class Monotone(Rule):
    """Holds when each number of the sequence is above (``rising``) or below the one before by more
    than :data:`TIE_BAND` ("grows with the number of GPUs", "keeps decreasing")."""

    rising: bool = True
    fmt: Fmt = _g

    name = "monotone"

    @property
    def tolerance(self) -> str:
        return f"every step {'up' if self.rising else 'down'} by more than the {TIE_BAND:.0%} tie band"

    def judge(self, value: Sequence[float]) -> Verdict:
        steps = [(b / a - 1) if self.rising else (a / b - 1) for a, b in zip(value, value[1:], strict=False)]
        ok = bool(steps) and min(steps) > TIE_BAND
        seq = " -> ".join(self.fmt(v) for v in value)
        return _verdict(ok, f"{seq}: smallest step {min(steps, default=0.0):+.2%} "
                            f"{'>' if ok else '<='} {TIE_BAND:.0%}")


@dataclass(frozen=True)
class Flattens(Rule):
    """SiPAC Fig. 4b: a baseline's gain from doubling the bandwidth is below ``limit`` (1.5x: half way
    between no gain and perfect scaling) while SiPAC's gain exceeds it by more than the tie band.
    ``value`` = (baseline gain, SiPAC gain)."""

    limit: float = 1.5

    name = "flattens"

    @property
    def tolerance(self) -> str:
        return f"baseline gain per doubling < {self.limit}x and SiPAC's above it by more than {TIE_BAND:.0%}"

    def judge(self, value: tuple[float, float]) -> Verdict:
        base, sipac = value
        ok = base < self.limit and sipac > base * (1 + TIE_BAND)
        return _verdict(ok, f"baseline {base:.3f}x {'<' if base < self.limit else '>='} {self.limit}x; "
                            f"SiPAC {sipac:.3f}x")


@dataclass(frozen=True)
class PaperArithmetic(Rule):
    """A number the paper prints and also derives: ``holds`` when the project's number equals the
    printed one; ``paper-inconsistent`` when it equals ``derived`` — the paper's own formula on the
    paper's own inputs, computed by the caller — and that differs from the printed number (the
    derivation shows the arithmetic); otherwise ``fails``."""

    printed: Any
    derived: Any
    arithmetic: str  # how ``derived`` follows from the paper's own numbers

    name = "paper-arithmetic"

    @property
    def tolerance(self) -> str:
        return f"exactly the printed {self.printed}"

    def judge(self, value: Any) -> Verdict:
        if value == self.printed:
            return Verdict(HOLDS, f"{value} = printed {self.printed}")
        if value == self.derived and self.derived != self.printed:
            return Verdict(INCONSISTENT, f"{value} != printed {self.printed}, but = the paper's own arithmetic",
                           self.arithmetic)
        return Verdict(FAILS, f"{value} != printed {self.printed} (the paper's own arithmetic gives {self.derived})")


@dataclass(frozen=True)
class ExplainedGap(Rule):
    """``base`` decides; when it fails, the value with the omitted ``mechanism``'s cost added by hand
    (``adjusted``, computed by the caller from stated numbers) is judged too: if that holds the
    verdict is ``simplified`` (the omission explains the gap), else ``fails``."""

    base: Rule
    mechanism: str
    adjusted: Any
    how: str  # how ``adjusted`` was computed

    @property
    def name(self) -> str:
        return f"explained-gap({self.base.name})"

    @property
    def tolerance(self) -> str:
        return self.base.tolerance

    def judge(self, value: Any) -> Verdict:
        first = self.base.judge(value)
        if first.verdict == HOLDS:
            return first
        again = self.base.judge(self.adjusted)
        if again.verdict == HOLDS:
            return Verdict(SIMPLIFIED, f"{first.reason}; the model omits {self.mechanism}",
                           f"{self.how}: {again.reason}")
        return Verdict(FAILS, f"{first.reason}; adding {self.mechanism} by hand does not close it ({again.reason})")


@dataclass(frozen=True)
class Exclusive(Rule):
    """Two statements of the paper that name different winners for the same case (at most one can
    hold). ``base`` judges this statement; when it fails and ``other`` (the other statement's rule)
    holds on the same value, the verdict is ``paper-inconsistent``: the paper's own statements exclude
    each other and the project reproduces the other one."""

    base: Rule
    other: Rule
    conflict: str  # the two statements, quoted

    @property
    def name(self) -> str:
        return f"exclusive({self.base.name})"

    @property
    def tolerance(self) -> str:
        return self.base.tolerance

    def judge(self, value: Any) -> Verdict:
        first = self.base.judge(value)
        if first.verdict == HOLDS:
            return first
        if self.other.judge(value).verdict == HOLDS:
            return Verdict(INCONSISTENT, first.reason, self.conflict)
        return first


@dataclass(frozen=True)
class AllOf(Rule):
    """Holds when every (label, rule, value) part holds; the reason lists each part."""

    parts: tuple[tuple[str, Rule], ...] = field(default_factory=tuple)

    @property
    def name(self) -> str:
        return "all-of(" + ", ".join(sorted({r.name for _, r in self.parts})) + ")"

    @property
    def tolerance(self) -> str:
        return "; ".join(f"{label}: {r.tolerance}" for label, r in self.parts)

    def judge(self, value: Sequence[Any]) -> Verdict:
        got = [(label, r.judge(v)) for (label, r), v in zip(self.parts, value, strict=True)]
        ok = all(v.verdict == HOLDS for _, v in got)
        return _verdict(ok, "; ".join(f"{label}: {v.verdict} ({v.reason})" for label, v in got))
