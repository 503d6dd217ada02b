"""Every claim rule can say both `holds` and `fails` (values on both sides of its tolerance), and the
rules that can say `simplified` / `paper-inconsistent` do so only with a derivation."""

from __future__ import annotations

import inspect

import pytest

from estimator.reports import rules as R
from estimator.reports.model import Claim
from estimator.reports.sections.paper_helpers import judged

TIE = R.TIE_BAND


def verdicts(rule: R.Rule, *values) -> list[str]:
    return [rule.judge(v).verdict for v in values]


# (rule, a value that holds, a value that fails): each just inside / just outside the tolerance
CASES = [
    (R.AtLeast(0.70), 0.7001, 0.6999),
    (R.AtMost(6e-6), 5.99e-6, 6.01e-6),
    (R.WithinAbsolute(72.21, 3.0), 75.2, 75.22),
    (R.WithinRelative(10.0, 0.25), 7.51, 7.49),
    (R.WithinRelative(10.0, 0.25), 12.49, 12.51),
    (R.InRange(1.4, 3.4, 0.10), 1.261, 1.259),
    (R.InRange(1.4, 3.4, 0.10), 3.739, 3.741),
    (R.Equals(70), 70, 71),
    (R.Member(7), [6, 7], [8]),
    (R.Beats("a", ("b", "c")), {"a": 1.0 + 1.5 * TIE, "b": 1.0, "c": 0.5}, {"a": 1.0 + 0.5 * TIE, "b": 1.0, "c": 0.5}),
    (R.Beats("a", ("b",), higher=False), {"a": 1.0, "b": 1.0 + 1.5 * TIE}, {"a": 1.0, "b": 1.0 + 0.5 * TIE}),
    (R.Tie(), [70, 70 * (1 + 0.5 * TIE)], [70, 70 * (1 + 1.5 * TIE)]),
    (R.Monotone(), [1.0, 1.0 + 1.5 * TIE, 1.1], [1.0, 1.0 + 0.5 * TIE, 1.1]),
    (R.Monotone(rising=False), [4.0, 2.0, 1.0], [4.0, 2.0, 2.0]),
    (R.Flattens(), (1.49, 1.9), (1.51, 1.9)),
    (R.Flattens(), (1.2, 1.2 * (1 + 1.5 * TIE)), (1.2, 1.2 * (1 + 0.5 * TIE))),
    (R.PaperArithmetic(259, 259, "n/a"), 259, 260),
    (R.ExplainedGap(R.AtLeast(1.4), "switch buffering", 1.2, "x"), 1.5, 1.0),
    (R.Exclusive(R.Beats("a", ("b",)), R.Beats("b", ("a",)), "n/a"), {"a": 2.0, "b": 1.0}, {"a": 1.0, "b": 1.0}),
    (R.AllOf((("x", R.AtLeast(1.0)), ("y", R.AtMost(2.0)))), (1.0, 2.0), (1.0, 2.01)),
]


@pytest.mark.parametrize("rule, good, bad", CASES, ids=[f"{type(c[0]).__name__}-{i}" for i, c in enumerate(CASES)])
def test_every_rule_says_holds_and_fails(rule, good, bad):
    assert verdicts(rule, good, bad) == ["holds", "fails"]
    assert rule.name and rule.tolerance
    assert rule.judge(good).reason and rule.judge(bad).reason


def test_every_rule_class_is_tested():
    tested = {type(c[0]) for c in CASES}
    defined = {c for _, c in inspect.getmembers(R, inspect.isclass) if issubclass(c, R.Rule) and c is not R.Rule}
    assert defined <= tested, sorted(c.__name__ for c in defined - tested)


def test_paper_arithmetic_says_inconsistent_only_on_the_papers_own_number():
    rule = R.PaperArithmetic(printed=128, derived=2048, arithmetic="ceil(1024^2 / (8 x 64)) = 2048")
    v = rule.judge(2048)
    assert v.verdict == "paper-inconsistent" and "2048" in v.derivation
    assert verdicts(rule, 128, 2047) == ["holds", "fails"]
    # when the paper's arithmetic agrees with its printed number there is nothing inconsistent
    assert R.PaperArithmetic(printed=70, derived=70, arithmetic="x").judge(71).verdict == "fails"


def test_explained_gap_says_simplified_only_when_the_mechanism_closes_the_gap():
    closes = R.ExplainedGap(R.AtLeast(1.4), "incast queueing", adjusted=1.6, how="1.0 x + 0.6 by hand")
    v = closes.judge(1.0)
    assert v.verdict == "simplified" and "by hand" in v.derivation and "incast queueing" in v.reason
    still = R.ExplainedGap(R.AtLeast(1.4), "incast queueing", adjusted=1.2, how="x")
    assert still.judge(1.0).verdict == "fails"
    assert closes.judge(1.5).verdict == "holds"


def test_exclusive_says_inconsistent_only_when_the_other_statement_holds():
    rule = R.Exclusive(R.Beats("btree", ("ring",)), R.Beats("ring", ("btree",)), "Sec. IV says both")
    assert rule.judge({"btree": 1.0, "ring": 2.0}).verdict == "paper-inconsistent"
    assert rule.judge({"btree": 1.0, "ring": 1.0}).verdict == "fails"  # a tie: neither statement holds
    assert rule.judge({"btree": 2.0, "ring": 1.0}).verdict == "holds"


def test_the_tie_band_is_one_number():
    # every comparing rule uses the module's band: moving it moves every verdict at the edge
    rule, case = R.Beats("a", ("b",)), {"a": 1.005, "b": 1.0}
    assert rule.judge(case).verdict == ("holds" if 0.005 > TIE else "fails")


def test_claims_need_a_rule_and_derived_verdicts_a_derivation():
    with pytest.raises(ValueError, match="named rule"):
        Claim("s", "1", "1", True, "reason")
    with pytest.raises(ValueError, match="derivation"):
        Claim("s", "1", "1", False, "reason", "simplified", rule="x")
    row = judged("s", "128", 2048, "2048", R.PaperArithmetic(128, 2048, "Lemma 1: ceil(N^2/8w)"), sql="SELECT 1")
    assert (row.verdict, row.rule, row.derivation) == ("paper-inconsistent", "paper-arithmetic", "Lemma 1: ceil(N^2/8w)")
    assert judged("s", "1", None, "", R.AtLeast(1)).verdict == "no-data"
