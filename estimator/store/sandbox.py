"""Read-only SQL on the results store: what ``estimator sql`` (and :func:`~estimator.store.duckdb_store.query`)
may run.

A results query needs the store's tables and nothing else, so the connection is opened read-only
with DuckDB's external access off (no file or network function, no ``COPY``, ``ATTACH``,
``INSTALL``/``LOAD``), extension auto-install and auto-load off, and the configuration locked (no
``SET``); on top of that only one read statement is accepted: a ``SELECT`` (also ``FROM ...``,
``WITH ...``, ``VALUES``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``), ``EXPLAIN`` of one, or a
``PRAGMA`` that only reads (``table_info``, ``show_tables``...). Anything else is one error line
before it runs.
"""

from __future__ import annotations

import re
from typing import Any

from estimator.errors import EstimatorError

#: DuckDB settings of a sandboxed connection (``lock_configuration`` last: it freezes the others)
CONFIG = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
}

#: PRAGMAs that only read the catalog
READ_PRAGMAS = ("table_info", "show_tables", "show_tables_expanded", "show", "database_size", "version",
                "storage_info", "platform", "functions", "collations")

_WHAT = {"COPY": "COPY (writes or reads files)", "ATTACH": "ATTACH (opens another database)",
         "DETACH": "DETACH", "LOAD": "INSTALL/LOAD (extensions)", "SET": "SET/PRAGMA settings",
         "VARIABLE_SET": "SET VARIABLE", "EXPORT": "EXPORT DATABASE (writes files)", "CALL": "CALL",
         "PRAGMA": "this PRAGMA", "TRANSACTION": "transactions"}


def check_statement(con: Any, sql: str) -> None:
    """Refuse anything but one read statement (see the module docstring), without running it."""
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise EstimatorError(f"query failed ({_first_line(exc)})") from None
    if len(statements) != 1:
        raise EstimatorError(f"query: {len(statements)} statements; estimator sql runs one read-only statement")
    kind = statements[0].type.name
    if kind == "SELECT":
        return
    if kind == "EXPLAIN":
        inner = re.sub(r"^\s*explain\s+(analy[sz]e\s+)?", "", sql, flags=re.IGNORECASE)
        if inner != sql:
            return check_statement(con, inner)
    if kind == "PRAGMA":
        m = re.match(r"\s*pragma\s+(\w+)\s*(\(|;|$)", sql, flags=re.IGNORECASE)
        if m and m.group(1).lower() in READ_PRAGMAS:
            return
    what = _WHAT.get(kind, f"{kind} statements")
    raise EstimatorError(f"query: {what} refused; estimator sql runs read-only queries on the store "
                         "(SELECT, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN)")


def explain_error(exc: Exception, store: Any) -> EstimatorError:
    """One line for a DuckDB error of a sandboxed query."""
    import duckdb

    if isinstance(exc, duckdb.PermissionException):
        return EstimatorError(f"query refused: it reads or writes files or settings, which estimator sql does not "
                              f"allow ({_first_line(exc)[:120]})")
    return EstimatorError(f"{store}: query failed ({_first_line(exc)})")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
