"""The claims section at the top of the report: per-paper verdict counts, what does not hold, and the
verdicts that change with a project choice (the readings of :mod:`estimator.reports.claims`).

It reads the ``claims`` table (``estimator claims`` writes it; the report computes the same rows in
memory when a store has none); every paper section below lists its own rows in full.
"""

from __future__ import annotations

from estimator.reports.model import VERDICTS, Section, Table

_COUNTS = ", ".join(f"count(*) FILTER (WHERE verdict = '{v}') AS \"{v}\"" for v in (*VERDICTS, "no-data"))
SUMMARY_SQL = f"""
SELECT split_part(paper, ':', 1) AS paper, {_COUNTS}, count(*) AS claims
FROM claims WHERE default_reading GROUP BY ALL ORDER BY paper
"""
NOT_HOLDING_SQL = """
SELECT split_part(paper, ' (', 1) AS paper, statement, paper_value, project_value, verdict,
       reason || CASE WHEN derivation <> '' THEN ' | derivation: ' || derivation ELSE '' END AS "reason (and derivation)"
FROM claims
WHERE verdict NOT IN ('holds', 'no-data') AND default_reading ORDER BY paper, verdict, section
"""
# every statement judged under more than one reading, one line per reading
READINGS_SQL = """
SELECT split_part(paper, ':', 1) AS paper, statement, reading, default_reading AS "default", project_value, verdict
FROM claims
WHERE (paper, statement) IN (SELECT (paper, statement) FROM claims GROUP BY ALL HAVING count(DISTINCT reading) > 1)
ORDER BY paper, statement, NOT default_reading, reading
"""
RULES_SQL = """
SELECT rule, count(*) AS claims, count(*) FILTER (WHERE verdict = 'holds') AS holds,
       count(*) FILTER (WHERE verdict = 'fails') AS fails,
       count(*) FILTER (WHERE verdict IN ('simplified', 'paper-inconsistent')) AS derived
FROM claims WHERE default_reading AND verdict <> 'no-data' GROUP BY rule ORDER BY claims DESC, rule
"""

SECTION = Section(
    key="claims",
    title="Claims: verdicts per paper",
    intro=(
        "Every claim the five seed papers make with a number or a direction, computed by SQL over this store "
        "(table <code>claims</code>, written by <code>estimator claims</code>) and judged by a named rule with a "
        "stated tolerance (<code>estimator/reports/rules.py</code>; docs/claims.md). Verdicts: "
        "<span class='v-holds'>holds</span> (within the tolerance); <span class='v-fails'>fails</span>; "
        "<span class='v-simplified'>simplified</span> (the model omits a named mechanism and adding its cost by hand "
        "closes the gap: the derivation computes it); <span class='v-paper-inconsistent'>paper-inconsistent</span> "
        "(the paper's own numbers disagree: the derivation shows the arithmetic). Two numbers within 1 % are a tie "
        "for every rule. Where a project choice decides verdicts (a <i>reading</i> of the paper), the counts use the "
        "default reading, argued in the experiment's YAML; the table of readings shows the others."
    ),
    tables=(
        Table("claims_summary", "Verdicts per paper (default readings)", SUMMARY_SQL),
        Table("claims_not_holding", "Claims that do not hold, and why", NOT_HOLDING_SQL),
        Table("claims_readings", "Verdicts under each reading of a project choice", READINGS_SQL,
              "A statement judged under several readings (OCS fat-tree host link, Lumorph's Tree, TeraRack's k* "
              "rounding, ...): one line each; the default one is counted above."),
        Table("claims_rules", "Rules used", RULES_SQL),
    ),
    order=0,
    needs_tables=("claims",),
)
