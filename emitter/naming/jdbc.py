"""JDBC datasets: the namespace and name of a JDBC URL and table, ported from the Java client's
``JdbcDatasetUtils`` extractors (credentials and properties never kept).
"""
from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable

import attrs

from emitter.naming.sqlserver import sqlserver_dataset_name, sqlserver_namespace

# --------------------------------------------------------------------------------------------
# JDBC
# --------------------------------------------------------------------------------------------

# Default ports where the Java client fills them (none for the generic extractor). SQL Server's
# 1433 is this project's choice (reference.md section 3): the Java client leaves the port out.
POSTGRES_DEFAULT_PORT, MYSQL_DEFAULT_PORT, ORACLE_DEFAULT_PORT = "5432", "3306", "1521"

# JdbcUrlSanitizer, for URLs nothing else could parse: the namespace is the URL minus secrets
_SANITIZERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[A-Za-z0-9_%]+//?[A-Za-z0-9_%]*@"), "@"),  # oracle user/pass@
    (re.compile(r"([/|,])[A-Za-z0-9_%]+:?[A-Za-z0-9_%]*@"), r"\1"),  # //user:pass@
    (re.compile(r"(?i)[,;&:]?(?:user|username|password)=[^,;&:()]+[,;&:]?"), ""),  # user=..;
    (re.compile(r"(\(\)){2,}|[,;&:]{2,}"), ""),  # delimiters left doubled by the line above
    (re.compile(r"\?.*$"), ""),  # query string
)

_HOST_PORT = re.compile(r"^(?P<host>\[.*\]|[^:\]]+)(?::(?P<port>\d*))?$")


def _sanitize(url: str) -> str:
    for regex, repl in _SANITIZERS:
        url = regex.sub(repl, url)
    return url


def _authority(hosts: str, default_port: str | None) -> str:
    """``user:pw@h1,h2:5433`` -> ``h1:5432,h2:5433``: credentials dropped, lower-cased, ports filled."""
    out = []
    for host in hosts.split(","):
        host = host.rpartition("@")[2].lower()
        m = _HOST_PORT.match(host)
        if m and not m.group("port") and default_port:
            host = f"{m.group('host')}:{default_port}"
        elif m and m.group("port") == "":
            host = m.group("host")
        out.append(host)
    return ",".join(out)


def _none_if_empty(value: str | None) -> str | None:
    return value or None


@attrs.frozen
class _Location:
    """What a JDBC URL says about where tables live (the Java client's JdbcLocation)."""

    namespace: str
    database: str | None = attrs.field(default=None, converter=_none_if_empty)
    qualified_wins: bool = False  # mysql: "db.table" in dbtable beats the URL's database
    default_schema: str | None = None  # sqlserver: "dbo"

    def name(self, table: str) -> str:
        if self.default_schema is not None:
            return sqlserver_dataset_name(self.database, None, table, self.default_schema)
        parts = table.split(".")
        if self.database and not (self.qualified_wins and len(parts) >= 2):
            parts.insert(0, self.database)
        return ".".join(parts)


_GENERIC = re.compile(r"^(?P<scheme>[\w+]+)(?::[\w]+)*://(?P<authority>[^/?;]*)/?(?P<db>[^?;]*)")


def _generic(uri: str, scheme: str | None, default_port: str | None) -> _Location:
    m = _GENERIC.match(uri)
    # "address=(host=..)" / "(host=..,port=..)" host lists: unparsed, as in the Java client
    if m is None or not m.group("authority").rpartition("@")[2] or "(" in m.group("authority"):
        raise ValueError(uri)
    database = m.group("db").strip("/")
    return _Location(
        f"{scheme or m.group('scheme').lower()}://{_authority(m.group('authority'), default_port)}",
        # "DATABASE=x,DBS_PORT=1025" (teradata) is properties, not a database name
        None if "=" in database else database,
    )


_ORACLE_TNS_ADDRESS = re.compile(r"(?i)\(\s*address\s*=(?P<body>(?:[^()]|\([^()]*\))*)\)")
_ORACLE_TNS_VALUE = r"(?i)\(\s*{key}\s*=\s*(?P<v>[^()\s]+)\s*\)"


def _oracle(uri: str) -> _Location:
    # oracle:thin:[user/pass]@[//]host[:port][/service | :sid] or @(DESCRIPTION=...) or @tcp://host
    body = re.sub(r"^.*?@(//)?", "", uri, count=1).split("?", 1)[0]
    if "(" in body:  # TNS connect descriptor
        if body.count("(") != body.count(")"):
            raise ValueError(uri)
        hosts = []
        for addr in _ORACLE_TNS_ADDRESS.finditer(body):
            host_match = re.search(_ORACLE_TNS_VALUE.format(key="host"), addr.group("body"))
            port_match = re.search(_ORACLE_TNS_VALUE.format(key="port"), addr.group("body"))
            if host_match:
                port = port_match.group("v") if port_match else ORACLE_DEFAULT_PORT
                hosts.append(f"{host_match.group('v')}:{port}")
        if not hosts:
            raise ValueError(uri)
        ident = None
        for key in ("service_name", "sid", "instance_name"):
            found = re.search(_ORACLE_TNS_VALUE.format(key=key), body)
            if found:
                ident = found.group("v")
                break
        return _Location(f"oracle://{_authority(','.join(hosts), ORACLE_DEFAULT_PORT)}", ident)
    body = re.sub(r"^\w+://", "", body, count=1)  # tcp://, tcps://
    # host:1521:sid -> host:1521/sid (unless the last ":" part is a port or inside an IPv6 literal)
    head, sep, last = body.rpartition(":")
    if sep and not ("]" in last or last.isdigit() or "/" in last):
        body = f"{head}/{last}"
    host, _, service = body.partition("/")
    if not host:
        raise ValueError(uri)
    return _Location(f"oracle://{_authority(host, ORACLE_DEFAULT_PORT)}", service.strip("/"))


_SQLSERVER = re.compile(
    r"^(?:[\w:]+)://(?P<host>[\w.\-]+)?(?P<instance>\\\w+)?(?::(?P<port>\d+))?(?P<db>/\w+)?(?P<params>;.*)?$"
)


def _sqlserver(uri: str) -> _Location:
    m = _SQLSERVER.match(uri)
    if m is None:
        raise ValueError(uri)
    props: dict[str, str] = {}
    for param in (m.group("params") or "").split(";"):
        key, eq, value = param.partition("=")
        if eq and "=" not in value:
            props.setdefault(key.strip().lower(), value)  # property names are case-insensitive
    host = m.group("host") or props.get("servername")
    if not host:
        raise ValueError(uri)
    port = m.group("port") or props.get("portnumber") or props.get("port")
    instance = (m.group("instance") or "").lstrip("\\") or props.get("instancename") or props.get("instance")
    database = (m.group("db") or "").lstrip("/") or props.get("databasename") or props.get("database")
    return _Location(sqlserver_namespace(host, port, instance=instance), database, default_schema="dbo")


def _derby(uri: str, derby_home: str | None) -> _Location:
    # Embedded: derby:[subsubprotocol:]databaseName[;attr=value]*. The Java client's
    # DerbyJdbcExtractor only reads a ";databaseName=" attribute and otherwise assumes Hive's
    # "metastore_db", so it names jdbc:derby:/path/db;create=true "file:{cwd}/metastore_db" and
    # merges every Derby database into one node. We take the database from the URL as Derby does,
    # resolved against derby.system.home (default: the current directory, as in the JVM), and keep
    # the Java client's form for what it gets right: namespace "file:{db path}", name = the table.
    rest = uri[len("derby:") :]
    if rest.startswith("//"):  # network client derby://host:1527/db: a server like any other
        return _generic(uri, "derby", None)
    path, *attributes = rest.split(";")
    for attr in attributes:
        key, _, value = attr.partition("=")
        if key.strip().lower() == "databasename" and value:
            path = value
    if path.startswith("memory:"):  # in-memory database: no location on disk
        return _Location(f"derby:{path}")
    path = path.removeprefix("directory:") or "metastore_db"
    base = derby_home if derby_home is not None else os.getcwd()
    return _Location("file:" + posixpath.normpath(posixpath.join(base, path)))


#: URL prefix (lower-case, "jdbc:" removed) -> extractor(uri, derby_home), in the Java client's order.
_JDBC_EXTRACTORS: tuple[tuple[tuple[str, ...], Callable[[str, str | None], _Location]], ...] = (
    (("postgres",), lambda uri, _: _generic(uri, "postgres", POSTGRES_DEFAULT_PORT)),  # postgresql://
    (("oracle",), lambda uri, _: _oracle(uri)),
    # mysql://, mysql:loadbalance://, mysql+srv://; MySQL's database and schema are one level
    (
        ("mysql",),
        lambda uri, _: attrs.evolve(_generic(uri, "mysql", MYSQL_DEFAULT_PORT), qualified_wins=True),
    ),
    (("sqlserver:", "jtds:sqlserver:"), lambda uri, _: _sqlserver(uri)),
    (("derby:",), _derby),
    (("",), lambda uri, _: _generic(uri, None, None)),  # any other scheme://host[:port][/db]
)


def _jdbc_location(url: str, derby_home: str | None = None) -> _Location:
    uri = re.sub(r"(?i)^jdbc:", "", url.strip(), count=1)
    low = uri.lower()
    extractor = next(fn for prefixes, fn in _JDBC_EXTRACTORS if low.startswith(prefixes))
    try:
        return extractor(uri, derby_home)
    except ValueError:
        # unparseable: the Java client falls back to the sanitized URL as the namespace
        return _Location(_sanitize(uri))


def jdbc_namespace(url: str, *, derby_home: str | None = None) -> str:
    """Dataset namespace for a JDBC URL, as the JVM integration forms it (``{scheme}://{host}:{port}``).

    ``jdbc:postgresql://h/db?user=u&password=p`` -> ``postgres://h:5432``; mysql fills 3306, oracle
    1521, SQL Server 1433 (unless a named instance: ``sqlserver://h/instance``); other schemes keep
    what the URL says. Credentials, query strings and ``;`` properties never reach the namespace.
    Derby embedded URLs give ``file:{database directory}`` (relative names resolved against
    ``derby_home``, default the current directory, i.e. Derby's ``derby.system.home``).
    """
    return _jdbc_location(url, derby_home).namespace


def jdbc_dataset(url: str, table: str, *, derby_home: str | None = None) -> tuple[str, str]:
    """``(namespace, name)`` of table ``table`` (Spark's ``dbtable``) read/written through ``url``.

    Name is ``[{database}.]{table}`` as the Java client forms it: the URL's database (postgres path,
    mysql path unless ``table`` is already ``db.table``, oracle service name/SID) is prefixed;
    SQL Server gives ``{database}.{schema}.{table}`` with schema ``dbo`` when omitted; Derby gives
    the table as written.
    """
    location = _jdbc_location(url, derby_home)
    return location.namespace, location.name(table)
