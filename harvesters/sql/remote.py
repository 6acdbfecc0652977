"""T-SQL text that runs on a linked server: ``OPENQUERY(srv, 'query')`` and ``EXEC ('batch') AT srv``.

The query or batch is a string the linked server runs: its tables are that server's, not the statement's. They
are named as four-part names, ``srv.db.schema.t``, with the parts the string leaves out empty (``srv..dbo.t``: the
linked login's default database; ``srv...t`` is read as ``srv..dbo.t``, T-SQL's empty schema), the form a
four-part name in the text itself takes; a harvester that knows where each linked server is
(:mod:`harvesters.sqlserver.linked_servers`) names them on that server's host.

``OPENQUERY`` is replaced, in the parsed statement, by the query it runs as a derived table (under its alias),
so table and column lineage follow it like any subquery; written through (``INSERT INTO OPENQUERY(...)``,
``UPDATE OPENQUERY(...) SET``, ``DELETE [FROM] OPENQUERY(...)``) it is the one table its query reads. A string
that is not one query sqlglot can read leaves the call as it was (a row set, no table). ``EXEC ... AT srv``'s
batch is read by :mod:`harvesters.sql.engine` with :func:`remote_table` applied to every name in it.
"""
from __future__ import annotations

import re
from typing import Any

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError

__all__ = ["OPENQUERY_CALL", "four_parts", "inline_remote_queries", "remote_table", "server_identifier"]

#: Where a text may hold an ``OPENQUERY`` call (the parsed statements are walked only then).
OPENQUERY_CALL = re.compile(r"\bOPENQUERY\s*\(", re.IGNORECASE)


def four_parts(table: exp.Table) -> list[exp.Expr]:
    """The parts of a T-SQL four-part name, ``server.database.schema.object``, its empty parts kept (``srv..dbo.t``,
    ``srv.db..t``: sqlglot's ``Table.parts`` drops them, and a part dropped moves the others one place)."""
    dotted: list[exp.Expr] = []
    node: Any = table.this
    while isinstance(node, exp.Dot):
        dotted.insert(0, node.expression)
        node = node.this
    dotted.insert(0, node)
    found = [table.args.get("catalog"), table.args.get("db"), *dotted]
    return [p if isinstance(p, exp.Expr) else exp.Identifier(this=p or "") for p in found]


def remote_table(table: exp.Table, server: exp.Identifier) -> exp.Table:
    """``table`` as a four-part name on linked server ``server`` (its missing parts empty); a name with four parts
    already (another server's), a temp table (the remote session's) or no plain name is returned as it is."""
    parts = four_parts(table) if isinstance(table.this, exp.Dot) else table.parts
    if not parts or len(parts) >= 4 or not all(isinstance(part, exp.Identifier) for part in parts):
        return table
    last = parts[-1]
    if last.args.get("temporary") or last.args.get("global_") or last.name.startswith("#"):
        return table
    if table.args.get("catalog") and not table.args.get("db"):  # `db..t`: the empty schema part
        parts = [*parts[:-1], exp.Identifier(this=""), last]
    database, schema, name = [exp.Identifier(this="") for _ in range(3 - len(parts))] + [p.copy() for p in parts]
    located = exp.Table(this=exp.Dot(this=schema, expression=name), db=database, catalog=server.copy())
    if table.args.get("alias") is not None:
        located.set("alias", table.args["alias"].copy())
    return located


def server_identifier(node: exp.Expr | None) -> exp.Identifier | None:
    """The linked server a call names (``srv``, ``[srv]``: parsed as a column or an identifier), or None."""
    if isinstance(node, exp.Column) and not node.table:
        node = node.this
    return node if isinstance(node, exp.Identifier) and node.name else None


def inline_remote_queries(statement: exp.Expr, dialect: Dialect) -> exp.Expr:
    """``statement`` with each ``OPENQUERY(srv, 'query')`` it reads replaced by the query (its tables on ``srv``)
    as a derived table, and each one it writes through by the query's one table (see the module). Changes the
    tree in place; returns the statement."""
    for table in list(statement.find_all(exp.Table)):
        call = table.this
        if isinstance(call, exp.Anonymous) and call.name.upper() == "OPENQUERY":
            _inline(table, call.expressions, dialect)
    target = statement.this if isinstance(statement, exp.Insert) else None
    if isinstance(target, exp.Schema) and isinstance(target.this, exp.Table) \
            and target.this.name.upper() == "OPENQUERY" and len(target.this.parts) == 1:
        # `INSERT INTO OPENQUERY(srv, '...')`: sqlglot reads the call as a table OPENQUERY with a column list
        written = _written(target.expressions, dialect)
        if written is not None:
            target.replace(written)
    return statement


def _inline(table: exp.Table, arguments: list[exp.Expr], dialect: Dialect) -> None:
    parent = table.parent
    writes = isinstance(parent, (exp.Update, exp.Delete)) and table.arg_key in ("this", "tables")
    if writes:
        written = _written(arguments, dialect)
        if written is not None:
            table.replace(written)
        return
    query = _remote_query(arguments, dialect)
    if query is not None:
        table.replace(exp.Subquery(this=query, alias=table.args.get("alias")))


def _written(arguments: list[exp.Expr], dialect: Dialect) -> exp.Table | None:
    """The table a remote query written through names: the one table it reads (None when not exactly one)."""
    query = _remote_query(arguments, dialect)
    if query is None:
        return None
    tables = list(query.find_all(exp.Table))
    return tables[0] if len(tables) == 1 else None


def _remote_query(arguments: list[exp.Expr], dialect: Dialect) -> exp.Query | None:
    """The query of ``OPENQUERY(srv, 'query')``'s arguments, its tables on ``srv``; None when it is not one query."""
    if len(arguments) != 2:
        return None
    server, text = server_identifier(arguments[0]), arguments[1]
    if server is None or not (isinstance(text, exp.Literal) and text.is_string) or not text.name.strip():
        return None
    try:
        statements = [s for s in dialect.parse(text.name) if s is not None]
    except (SqlglotError, RecursionError):  # (a query nested past the interpreter's depth: no lineage, no crash)
        return None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        return None
    query = statements[0]
    ctes = {cte.alias_or_name.casefold() for cte in query.find_all(exp.CTE)}
    for inner in list(query.find_all(exp.Table)):
        if isinstance(inner.this, exp.Identifier) and not inner.args.get("db") \
                and inner.name.casefold() in ctes:
            continue  # the query's own CTE
        if isinstance(inner.this, (exp.Identifier, exp.Dot)):
            inner.replace(remote_table(inner, server))
    return query
