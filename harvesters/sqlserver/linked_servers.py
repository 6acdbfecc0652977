"""Tables on linked servers: a T-SQL four-part name ``srv.db.schema.t`` names table ``db.schema.t`` of the
server linked as ``srv``, not a table of the server the statement ran on.

Its dataset is named as that server's own harvest (or a Spark JDBC read of it) would name it:
``sqlserver://{host}:{port}`` with ``db.schema.t``. The host is the linked server's name unless
``--linked-server NAME=HOST[:PORT]`` says where it is (a linked server's name is often its host's, but may be an
alias: ``sys.servers.data_source`` on the server says). An empty database part (``srv..dbo.t``: the linked login's
default database) leaves ``schema.t``, the form a name without database takes. The SQL engine gives names as
dotted strings, a part holding a dot bracketed (``[10.0.0.5].db.dbo.t``, ``db.dbo.[t.2024]``): a four-part name is
one with four parts once split at the dots outside brackets, and every name comes back without brackets.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from emitter.naming import sqlserver_namespace
from emitter.naming.sqlserver import mssql_namespace, split_sqlserver_name, unquote_identifier
from harvesters.sql.remote import SQLSERVER_PROVIDERS
from harvesters.sqlserver.address import parse_server, without_protocol


def parse_linked_servers(pairs: list[str] | None) -> dict[str, tuple[str, str | None]]:
    """``--linked-server NAME=HOST[:PORT]`` values -> {name (unquoted, case-folded): (host, port)}; ValueError for a
    malformed one. ``HOST\\INSTANCE`` and ``HOST,PORT`` are read as for ``--server``."""
    found: dict[str, tuple[str, str | None]] = {}
    for pair in pairs or ():
        name, sep, server = pair.partition("=")
        if not sep or not name.strip() or not server.strip():
            raise ValueError(f"--linked-server {pair!r}: expected NAME=HOST[:PORT]")
        found[unquote_identifier(name).casefold()] = _address(server.strip())
    return found


#: The host of a linked server that is the local server itself (a loopback link: ``(local)``, ``.``,
#: ``localhost``): its tables are the statement's server's.
LOCAL: tuple[str, str | None] = ("", None)
_LOCAL_HOSTS = frozenset({"(local)", ".", "localhost", "127.0.0.1", "::1"})


def _address(source: str) -> tuple[str, str | None]:
    """A SQL Server address as ``(host, port)`` (:func:`parse_server`); :data:`LOCAL` for the local server."""
    if source.strip()[:4].lower() == "lpc:":  # shared memory reaches the local server only
        return LOCAL
    host, port = parse_server(source)
    return LOCAL if host.split("\\", 1)[0].strip().lower() in _LOCAL_HOSTS else (host, port)


def catalog_hosts(rows: Iterable[Sequence[Any]]) -> dict[str, tuple[str, str | None]]:
    """Rows of ``sys.servers`` (name, data_source, provider) -> {name (case-folded): (host, port)}, as
    ``--linked-server`` gives them, for the linked SQL Servers whose address names a host (:func:`parse_server`:
    ``tcp:`` dropped, a named pipe's host) or the local server (:data:`LOCAL`; also ``lpc:``, shared memory, which
    only reaches it); a VIA address is left out (no host to name). Only
    SQL Server's own providers (:data:`SQLSERVER_PROVIDERS`) give an address: others (Oracle's, MSDASQL's ODBC to
    anything, files) name no host this harvester can turn into a namespace: their tables keep the linked server's
    name as host."""
    found: dict[str, tuple[str, str | None]] = {}
    for name, data_source, provider in rows:
        source = str(data_source or "").strip()
        if not name or not source or not str(provider or "").upper().startswith(SQLSERVER_PROVIDERS):
            continue
        if without_protocol(source)[:4].lower() == "via:":  # the VIA protocol's address: no host to name
            continue
        found[str(name).casefold()] = _address(source)
    return found


class LinkedServers:
    """:meth:`locate` for :attr:`harvesters.core.tasks.TaskGrouper.locate`. Each linked server's namespace is
    added to ``symlinks`` with its other naming (``mssql://`` beside ``sqlserver://``), as the harvested
    server's is."""

    def __init__(self, airflow_form: bool, hosts: Mapping[str, tuple[str, str | None]],
                 symlinks: dict[str, str]) -> None:
        self._airflow_form = airflow_form
        self._hosts = dict(hosts)
        self._symlinks = symlinks
        self._located: dict[tuple[str, str], tuple[str, str]] = {}  # the same tables, statement after statement

    def learn(self, hosts: Mapping[str, tuple[str, str | None]]) -> None:
        """Hosts of linked servers the server's own catalog names (:func:`catalog_hosts`); ``--linked-server``
        wins where both name one."""
        for name, host in hosts.items():
            self._hosts.setdefault(name, host)
        self._located.clear()

    def locate(self, namespace: str, name: str) -> tuple[str, str]:
        """``(namespace, name)`` of a table the engine named ``name`` in a statement run on ``namespace``."""
        key = (namespace, name)
        found = self._located.get(key)
        if found is None:
            found = self._locate(namespace, name)
            if len(self._located) >= 16384:
                self._located.clear()
            self._located[key] = found
        return found

    def _locate(self, namespace: str, name: str) -> tuple[str, str]:
        parts = split_sqlserver_name(name)
        if len(parts) != 4 or not parts[0] or not parts[3]:
            return namespace, ".".join(parts)  # (a part holding a dot loses its brackets: a dataset name has none)
        # a server no catalog or option locates is its name read as an address: an ad hoc OPENROWSET's or
        # OPENDATASOURCE's `host,port`, `host\inst`, `(local)` (a linked server's name is a plain host: itself)
        host, port = self._hosts.get(parts[0].casefold()) or _address(parts[0])
        table = ".".join(part for part in parts[1:] if part)
        if (host, port) == LOCAL:  # a loopback link: the statement's own server
            return namespace, table
        jdbc_form, airflow_form = sqlserver_namespace(host, port), mssql_namespace(host, port)
        primary, other = (airflow_form, jdbc_form) if self._airflow_form else (jdbc_form, airflow_form)
        self._symlinks.setdefault(primary, other)
        return primary, table
