"""Dataset namespaces/names and job names, the way the JVM OpenLineage integration forms them.

A Spark JDBC read seen by the JVM integration, by our Spark plugin and by a harvester must be one
node in Marquez, so every rule here is a port of the OpenLineage Java client
(``io.openlineage.client.utils.filesystem.*``, ``...utils.jdbc.*``, ``SnowflakeUtils``) and of the
Spark integration's ``NameNormalizer``; deviations are called out where they are made.
Partition trimming reuses openlineage-python's own trimmers.

None of these functions apply :func:`safe_namespace`: they return the spec/JVM form; the emitter makes
namespaces Marquez-safe in one place.
"""
from __future__ import annotations

import os
import posixpath
import re
import unicodedata
from collections.abc import Callable
from urllib.parse import unquote

import attrs
from openlineage.client.dataset.dataset import BUILTIN_TRIMMERS

__all__ = [
    "path_dataset",
    "trim_partitions",
    "jdbc_namespace",
    "jdbc_dataset",
    "sqlserver_namespace",
    "sqlserver_dataset_name",
    "snowflake_namespace",
    "normalize_name",
    "safe_namespace",
]

# --------------------------------------------------------------------------------------------
# Files and object stores
# --------------------------------------------------------------------------------------------

#: scheme -> (canonical scheme, name keeps its leading "/", userinfo is part of the authority,
#: password may contain "/"). Mirrors the Java client's FilesystemDatasetUtils extractors:
#: object stores (s3/gs/abfss/wasbs) name objects by key (no leading "/"), s3a/s3n -> s3,
#: abfs -> abfss, wasb -> wasbs. For abfss/wasbs the "container@" before the account host is the
#: container, not credentials. Only s3 keys appear with a "/" inside an embedded secret (AWS secret
#: keys are base64), so only there is the userinfo allowed to contain one.
_FS_SCHEMES: dict[str, tuple[str, bool, bool, bool]] = {
    "s3": ("s3", False, False, True),
    "s3a": ("s3", False, False, True),
    "s3n": ("s3", False, False, True),
    "gs": ("gs", False, False, False),
    "abfs": ("abfss", False, True, False),
    "abfss": ("abfss", False, True, False),
    "wasb": ("wasbs", False, True, False),
    "wasbs": ("wasbs", False, True, False),
    "hdfs": ("hdfs", True, False, False),
}
_GENERIC_FS = (None, True, False, False)  # any other scheme: keep it, keep the path as is

_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):(?P<rest>.*)$", re.S)
# userinfo is "user[:password]@"; the password alternative with "/" is only used for s3 (see above)
_AUTHORITY_STRICT = re.compile(r"^//(?:(?P<userinfo>[^@/?#]*)@)?(?P<host>[^/?#]*)(?P<path>[^?#]*)")
_AUTHORITY_SLASHY = re.compile(
    r"^//(?:(?P<userinfo>[^@/:?#]*:[^@?#]*|[^@/?#]*)@)?(?P<host>[^/?#]*)(?P<path>[^?#]*)"
)


def _strip_trailing_slash(path: str) -> str:
    # JVM: FilesystemUriSanitizer.removeLastSlash + nonEmptyPath ("" -> "/")
    return path.rstrip("/") or "/"


def path_dataset(path_or_uri: str) -> tuple[str, str]:
    """Return ``(namespace, name)`` for a file, directory or object-store location.

    - local path or ``file:`` URI -> ``("file", absolute path)``; ``file:///x`` == ``file:/x`` == ``/x``;
      a relative path is made absolute against the current directory (Spark qualifies paths the
      same way before the JVM integration sees them). ``file://host/x`` -> ``("file://host", "/x")``
      (the spec's remote file system form).
    - ``hdfs://nn:8020/p`` -> ``("hdfs://nn:8020", "/p")`` (no default port is added, as in the JVM).
    - ``s3://b/k``, ``s3a://``, ``s3n://`` -> ``("s3://b", "k")``; ``gs://b/k`` -> ``("gs://b", "k")``.
    - Azure: ``abfs[s]://container@account.dfs.core.windows.net/p`` ->
      ``("abfss://container@account.dfs.core.windows.net", "p")`` and ``wasb[s]://container@host/p`` ->
      ``("wasbs://container@host", "p")``. The OpenLineage naming spec writes both namespaces as
      ``{scheme}://{container}@{service}.dfs.core.windows.net`` (and openlineage-python's ``WASBS``
      naming class hard-codes ``.dfs.``), but the JVM integration keeps the URI's authority as
      written (``wasbs://c@acct.blob.core.windows.net``); we follow the JVM so a Spark JVM read and
      ours name the same node, and never rewrite the host.
    - any other scheme -> ``("{scheme}://{authority}", path)``.

    Credentials (``user:pass@``, ``s3a://KEY:SECRET@bucket``), query strings and fragments are
    dropped, the path is percent-decoded (Java's ``URI.getPath()``), trailing ``/`` removed (the
    root stays ``/``). Partition folders are *not* trimmed here: see :func:`trim_partitions`.
    """
    m = _URI.match(path_or_uri)
    # "C:/x" style drive letters are not URIs; everything without a scheme is a local path
    if m is None or len(m.group("scheme")) == 1:
        return "file", _strip_trailing_slash(os.path.abspath(path_or_uri))
    scheme, rest = m.group("scheme").lower(), m.group("rest")
    if scheme == "file":
        return _file_uri(rest)
    canonical, keep_slash, userinfo_is_container, slashy = _FS_SCHEMES.get(scheme, _GENERIC_FS)
    a = (_AUTHORITY_SLASHY if slashy else _AUTHORITY_STRICT).match(rest)
    if a is None:  # "scheme:opaque" (e.g. dbfs:/x): no authority
        path = unquote(rest.split("?", 1)[0].split("#", 1)[0])
        return scheme, _strip_trailing_slash(path)
    userinfo, host, path = a.group("userinfo"), a.group("host"), unquote(a.group("path"))
    if userinfo is not None and userinfo_is_container and ":" not in userinfo:
        host = f"{userinfo}@{host}"  # abfss/wasbs: container@account is the authority
    namespace = f"{canonical or scheme}://{host}" if host else (canonical or scheme)
    name = path if keep_slash else path.lstrip("/")
    return namespace, _strip_trailing_slash(name)


def _file_uri(rest: str) -> tuple[str, str]:
    # file:/x, file:///x, file://localhost/x -> local; file://host/x -> remote file system
    path = rest.split("?", 1)[0].split("#", 1)[0]
    namespace = "file"
    if path.startswith("//"):
        host, _, tail = path[2:].partition("/")
        host = host.rpartition("@")[2]  # drop user:pass@
        path = "/" + tail
        if host and host.lower() != "localhost":
            namespace = f"file://{host}"
    path = unquote(path)
    if not path.startswith("/"):
        path = os.path.abspath(path)
    return namespace, _strip_trailing_slash(posixpath.normpath(path) if path != "/" else path)


_TRIMMERS = tuple(cls() for cls in BUILTIN_TRIMMERS)


def trim_partitions(path: str) -> str:
    """Cut trailing partition folders from a dataset name: ``/x/dt=2025-09-01/h=3`` -> ``/x``.

    Uses openlineage-python's built-in trimmers (the same set and rules as the Java client's
    ``DatasetNameTrimmer``s): ``key=value`` folders, dates (``20250901``, ``2025-09-01``,
    ``01.09.2025``, with time noise ``20250901T0930Z``), ``yyyy/MM[/dd]`` folder chains and
    ``yyyyMM``/``yyyy-MM``. Applied until nothing changes, as openlineage-python's DatasetReducer
    does; a single-segment name (``/20250901``) is never emptied and non-partition folders are kept.
    """
    for _ in range(32):  # every pass shortens the name; bound it like the reducer does
        trimmed = path
        for trimmer in _TRIMMERS:
            trimmed = trimmer.trim(trimmed)
        if trimmed == path:
            return path
        path = trimmed
    return path


# --------------------------------------------------------------------------------------------
# JDBC
# --------------------------------------------------------------------------------------------

# Default ports where the Java client fills them (none for the generic extractor). SQL Server's
# 1433 is this project's choice (reference.md section 3): the Java client leaves the port out.
POSTGRES_DEFAULT_PORT, MYSQL_DEFAULT_PORT, ORACLE_DEFAULT_PORT = "5432", "3306", "1521"
SQLSERVER_DEFAULT_PORT = 1433

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


@attrs.frozen
class _Location:
    """What a JDBC URL says about where tables live (the Java client's JdbcLocation)."""

    namespace: str
    database: str | None = attrs.field(default=None, converter=lambda d: d or None)
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
            host = re.search(_ORACLE_TNS_VALUE.format(key="host"), addr.group("body"))
            port = re.search(_ORACLE_TNS_VALUE.format(key="port"), addr.group("body"))
            if host:
                hosts.append(f"{host.group('v')}:{port.group('v') if port else ORACLE_DEFAULT_PORT}")
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


def sqlserver_namespace(
    host: str, port: int | str | None = None, *, instance: str | None = None
) -> str:
    """``sqlserver://{host}:{port}``, port 1433 by default, host lower-cased (the JVM's form).

    A named instance (``instance=`` or ``host\\instance``, as ``@@SERVERNAME`` returns it) gives
    ``sqlserver://{host}/{instance}`` like the Java client; no port is assumed for it because named
    instances listen on a dynamic port, so a harvester (which knows ``HOST\\INST`` but not the port)
    and a Spark JDBC URL ``jdbc:sqlserver://host\\inst`` agree.
    """
    host, _, named = host.partition("\\")
    instance = instance or named or None
    host = host.lower()
    if ":" in host and not host.startswith("["):  # IPv6 literal
        host = f"[{host}]"
    if port in (None, "") and instance is None:
        port = SQLSERVER_DEFAULT_PORT
    authority = f"{host}:{port}" if port not in (None, "") else host
    return f"sqlserver://{authority}" + (f"/{instance}" if instance else "")


def _unquote_ident(part: str) -> str:
    # [dbo] / "dbo" -> dbo: the dataset name carries identifiers, not T-SQL quoting
    part = part.strip()
    if len(part) >= 2 and (part[0], part[-1]) in (("[", "]"), ('"', '"')):
        return part[1:-1]
    return part


_SQLSERVER_PARTS = re.compile(r'\[[^\]]*\]|"[^"]*"|[^.]+')


def sqlserver_dataset_name(
    database: str | None, schema: str | None, table: str, default_schema: str = "dbo"
) -> str:
    """``{database}.{schema}.{table}``; schema ``dbo`` when omitted; brackets/quotes removed.

    ``table`` may itself be qualified (``schema.t`` or ``db.schema.t``): its own parts win over
    ``database``/``schema``, a three-part name is taken as is (cross-database reference).
    Without a database the name is ``{schema}.{table}`` (the Java client's form then).
    """
    parts = [_unquote_ident(p) for p in _SQLSERVER_PARTS.findall(table)]
    if len(parts) >= 3:
        return ".".join(parts[-3:])
    if len(parts) == 2:
        schema, parts = parts[0], parts[1:]
    db = _unquote_ident(database) if database else None
    sch = _unquote_ident(schema) if schema else default_schema
    return ".".join(p for p in (db, sch, parts[0] if parts else table) if p)


# --------------------------------------------------------------------------------------------
# Snowflake
# --------------------------------------------------------------------------------------------


def snowflake_namespace(account: str) -> str:
    """``snowflake://{org}-{account}`` or ``snowflake://{locator}.{region}.{cloud}``, lower-case.

    Port of the Java client's ``SnowflakeUtils.parseAccountIdentifier`` (the spec's rule): strips
    ``https://`` and ``.snowflakecomputing.com``; ``org-acct`` (a hyphen and no dots) is kept;
    a bare locator gets ``.us-west-1.aws`` (Snowflake's default region), ``locator.region`` gets
    ``.aws``. Lower-cased on top of the Java rule (Snowflake account identifiers are
    case-insensitive; Airflow's provider lower-cases too) so ``MYORG-ACCT`` from
    ``CURRENT_ORGANIZATION_NAME()`` and a lower-case connector URL meet.
    """
    url = account.strip()
    url = re.sub(r"(?i)^https?://", "", url)
    domain = url.lower().find(".snowflakecomputing.com")
    if domain > 0:
        url = url[:domain]
    url = url.split("/", 1)[0].split(":", 1)[0].lower()
    parts = url.split(".")
    if len(parts) == 1 and "-" in parts[0]:
        ident = parts[0]  # organization-account
    elif len(parts) == 1:
        ident = f"{parts[0]}.us-west-1.aws"
    elif len(parts) == 2:
        ident = f"{url}.aws"
    else:
        ident = url
    return f"snowflake://{ident}"


# --------------------------------------------------------------------------------------------
# Job names and Marquez-safe namespaces
# --------------------------------------------------------------------------------------------

_EDGE_NON_WORD = re.compile(r"^\W+|\W+$", re.ASCII)  # Java's \w is ASCII-only
_LOWER_UPPER = re.compile(r"([a-z])([A-Z])")
_ACRONYM_END = re.compile(r"(?<!^)([A-Z])([a-z])")
_DIGIT_UPPER = re.compile(r"(\d)([A-Z])")
_NON_ALNUM = re.compile(r"[^a-zA-Z0-9]+")


def normalize_name(name: str | None) -> str:
    """The Spark integration's ``NameNormalizer.normalize``: ``MyXMLBasedApp`` -> ``my_xml_based_app``.

    Steps, as in Java: trim non-word characters (ASCII ``\\w``) at both ends; NFKD and drop combining
    marks (``é`` -> ``e``); split ``aB`` -> ``a B``, ``ABc`` -> ``A Bc`` (not at the start),
    ``1A`` -> ``1 A``; lower-case; every run of non ``[a-zA-Z0-9]`` -> ``_``. ``None`` -> ``""``.
    """
    if name is None:
        return ""
    trimmed = _EDGE_NON_WORD.sub("", name)
    decomposed = unicodedata.normalize("NFKD", trimmed)
    no_marks = "".join(c for c in decomposed if not unicodedata.category(c).startswith("M"))
    words = _DIGIT_UPPER.sub(r"\1 \2", _ACRONYM_END.sub(r" \1\2", _LOWER_UPPER.sub(r"\1 \2", no_marks)))
    return _NON_ALNUM.sub("_", words.lower())


_MARQUEZ_UNSAFE = re.compile(r"[^a-zA-Z:;=/0-9_\-.@+]")


def safe_namespace(namespace: str) -> str:
    """Replace every character Marquez refuses in a namespace with ``_``.

    Marquez's ``NamespaceName`` only accepts ``[a-zA-Z:;=/0-9_\\-.@+]`` (max 1024): an event with any
    other character (``,`` of a multi-host JDBC URL, ``[]`` of an IPv6 literal, a space, ``%``,
    ``\\``) is rejected whole, losing its lineage. Applied once by the emitter to every namespace.
    """
    return _MARQUEZ_UNSAFE.sub("_", namespace)
