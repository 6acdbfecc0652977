"""T-SQL text another server runs: ``OPENQUERY(srv, 'query')``, ``EXEC ('batch') AT srv`` and ad hoc connections.

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

Ad hoc connections through SQL Server's own OLE DB providers are read the same way, the server being the one their
connection string names (``OPENROWSET('SQLNCLI', 'Server=host,1450;...', 'query' | db.schema.t)``,
``OPENDATASOURCE('MSOLEDBSQL', 'Data Source=host\\inst;...').db.schema.t``: server part ``host,1450``, an address
the harvester reads as one); other providers (Excel, Oracle, ODBC) reach no SQL Server: no table.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError

__all__ = ["REMOTE_CALL", "SQLSERVER_PROVIDERS", "ad_hoc_server", "four_parts", "inline_remote_queries",
           "remote_table", "server_identifier"]

#: Where a text may hold a call reading another server (the parsed statements are walked only then).
REMOTE_CALL = re.compile(r"\bOPEN(?:QUERY|ROWSET|DATASOURCE)\s*\(", re.IGNORECASE)


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


#: OLE DB providers of SQL Server's own clients: an ad hoc ``OPENROWSET`` / ``OPENDATASOURCE`` through one reaches a
#: SQL Server (its text is T-SQL, its connection string names a host). Other providers (Excel, Oracle, ODBC to
#: anything) have no table here.
SQLSERVER_PROVIDERS = ("SQLNCLI", "MSOLEDBSQL", "SQLOLEDB")
#: Connection-string keys naming the server (OLE DB and ODBC spellings).
_SERVER_KEYS = frozenset({"server", "data source", "address", "addr", "network address"})


def ad_hoc_server(provider: exp.Expr | None, connection: exp.Expr | None) -> exp.Identifier | None:
    """The server an ad hoc connection names (``OPENROWSET('SQLNCLI', 'Server=host,1450;...', ...)``,
    ``OPENDATASOURCE('MSOLEDBSQL', 'Data Source=host\\inst;...')``), as a four-part name's server part (quoted: the
    address as written); None unless the provider is SQL Server's and the string names a server."""
    if not (isinstance(provider, exp.Literal) and provider.is_string and isinstance(connection, exp.Literal)
            and connection.is_string) or not provider.name.strip().upper().startswith(SQLSERVER_PROVIDERS):
        return None
    server = connection_server(connection.name)
    return exp.Identifier(this=server, quoted=True) if server else None


def connection_server(connection: str) -> str | None:
    """The server an ODBC or OLE DB connection string names, as written (``tcp:host,1433``, ``host\\inst``), the
    braces ODBC allows around a value removed; the first of its keys that name one (:data:`_SERVER_KEYS`); None
    when it names none."""
    return connection_value(connection, _SERVER_KEYS)


def connection_value(connection: str, keys: Iterable[str]) -> str | None:
    """The value of the first of ``keys`` (lower case) an ODBC or OLE DB connection string sets, ODBC's braces
    around it removed; None when it sets none of them."""
    wanted = frozenset(keys)
    for item in connection.split(";"):
        key, _, value = item.partition("=")
        value = value.strip()
        if value.startswith("{") and value.endswith("}"):
            value = value[1:-1].replace("}}", "}").strip()
        if key.strip().lower() in wanted and value:
            return value
    return None


def inline_remote_queries(statement: exp.Expr, dialect: Dialect) -> exp.Expr:
    """``statement`` with the text and names other servers run on located there (see the module): each
    ``OPENQUERY(srv, 'query')`` (and ad hoc ``OPENROWSET(provider, 'Server=...', 'query' | db.schema.t)``) it reads
    replaced by the query as a derived table, or by the table; each it writes through by the one table its query
    reads; ``OPENDATASOURCE(provider, 'Data Source=...').db.schema.t`` named on that server. Changes the tree in
    place; returns the statement."""
    for table in list(statement.find_all(exp.Table)):
        call, catalog = table.this, table.args.get("catalog")
        if isinstance(call, exp.Anonymous) and call.name.upper() in ("OPENQUERY", "OPENROWSET"):
            _inline(table, _remote_source(call.name.upper(), call.expressions, dialect))
        elif isinstance(catalog, exp.Anonymous) and catalog.name.upper() == "OPENDATASOURCE":
            server = ad_hoc_server(*catalog.expressions[:2]) if len(catalog.expressions) == 2 else None
            if server is not None:
                table.set("catalog", server)
    target = statement.this if isinstance(statement, exp.Insert) else None
    if isinstance(target, exp.Schema) and isinstance(target.this, exp.Table) and len(target.this.parts) == 1 \
            and target.this.name.upper() in ("OPENQUERY", "OPENROWSET"):
        # `INSERT INTO OPENQUERY(srv, '...')`: sqlglot reads the call as a table OPENQUERY with a column list
        written = _written(_remote_source(target.this.name.upper(), target.expressions, dialect))
        if written is not None:
            target.replace(written)
    return statement


def _remote_source(function: str, arguments: list[exp.Expr], dialect: Dialect) -> exp.Query | exp.Table | None:
    """What ``OPENQUERY(srv, 'query')`` / ``OPENROWSET(provider, 'connection', 'query' | db.schema.t)`` reads,
    located on its server: the query, or the table; None when it is not one query or table of a SQL Server."""
    if function == "OPENQUERY":
        server = server_identifier(arguments[0]) if len(arguments) == 2 else None
        return None if server is None else _remote_query(server, arguments[1], dialect)
    server = ad_hoc_server(*arguments[:2]) if len(arguments) == 3 else None
    if server is None:
        return None  # OPENROWSET(BULK ...), another provider, or a server it does not name
    named = arguments[2]
    if isinstance(named, exp.Column) and all(isinstance(part, exp.Identifier) for part in named.parts):
        parts = named.parts
        table = exp.Table(this=parts[-1], db=parts[-2] if len(parts) > 1 else None,
                          catalog=parts[-3] if len(parts) > 2 else None)
        return remote_table(table, server)
    return _remote_query(server, named, dialect)


def _inline(table: exp.Table, source: exp.Query | exp.Table | None) -> None:
    if source is None:
        return
    parent = table.parent
    if isinstance(parent, (exp.Update, exp.Delete)) and table.arg_key in ("this", "tables"):  # written through
        written = _written(source)
        if written is not None:
            table.replace(written)
        return
    alias = table.args.get("alias")
    if isinstance(source, exp.Table):
        if alias is not None:
            source.set("alias", alias)
        table.replace(source)
    else:
        table.replace(exp.Subquery(this=source, alias=alias))


def _written(source: exp.Query | exp.Table | None) -> exp.Table | None:
    """The table a remote source written through names: the table, or the one table its query reads (None when
    not exactly one)."""
    if source is None or isinstance(source, exp.Table):
        return source
    tables = list(source.find_all(exp.Table))
    return tables[0] if len(tables) == 1 else None


def _remote_query(server: exp.Identifier, text: exp.Expr, dialect: Dialect) -> exp.Query | None:
    """The query ``text`` (a string literal) as ``server`` runs it, its tables on ``server``; None when it is not one
    query."""
    if not (isinstance(text, exp.Literal) and text.is_string) or not text.name.strip():
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
