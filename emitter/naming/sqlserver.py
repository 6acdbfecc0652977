"""SQL Server datasets: ``sqlserver://host:port`` (reference.md section 3) and ``db.schema.table`` names."""
from __future__ import annotations

import re

#: SQL Server's default port: this project's choice (reference.md section 3); the Java client leaves it out.
SQLSERVER_DEFAULT_PORT = 1433


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


def mssql_namespace(host: str, port: int | str | None = None) -> str:
    """``mssql://{host}:{port}``: how Airflow's SQL Server hook (apache-airflow-providers-microsoft-mssql) names the
    server in its OpenLineage datasets; port 1433 by default, host lower-cased. A named instance (``host\\inst``)
    keeps only the host: Airflow's connection knows the host and port, not the instance."""
    host = host.partition("\\")[0].lower()
    if ":" in host and not host.startswith("["):  # IPv6 literal
        host = f"[{host}]"
    return f"mssql://{host}:{port if port not in (None, '') else SQLSERVER_DEFAULT_PORT}"


def unquote_identifier(part: str) -> str:
    """``[dbo]`` / ``"dbo"`` -> ``dbo``: a dataset name carries identifiers, not T-SQL quoting."""
    part = part.strip()
    if len(part) >= 2 and part[0] == "[" and part[-1] == "]":
        return part[1:-1].replace("]]", "]")
    if len(part) >= 2 and part[0] == part[-1] == '"':
        return part[1:-1]
    return part


#: One part of a dotted T-SQL name: ``[...]`` (``]]`` a ``]`` inside), ``"..."``, or a run without dots.
_SQLSERVER_PARTS = re.compile(r'\[(?:[^\]]|\]\])*\]|"[^"]*"|[^.]+')
#: The same, its empty parts kept (``srv..dbo.t``): a part, then a dot or the end.
_SQLSERVER_PART_DOT = re.compile(r'(\[(?:[^\]]|\]\])*\]|"[^"]*"|[^.]*)(?:\.|$)')


def split_sqlserver_name(name: str) -> list[str]:
    """A dotted name as the SQL engine reports T-SQL tables (``[10.0.0.5].db.dbo.t``: a part holding a dot is
    bracketed) -> its parts, unquoted, empty parts kept (``srv..dbo.t`` -> ``srv``, ``""``, ``dbo``, ``t``)."""
    if "[" not in name and '"' not in name:  # (nearly every name: no quoted part)
        return name.split(".")
    parts = [unquote_identifier(m.group(1)) for m in _SQLSERVER_PART_DOT.finditer(name)]
    # finditer's empty match at the end of the text, after a last part ended by the end itself
    return parts[:-1] if len(parts) > 1 and parts[-1] == "" and not name.endswith(".") else parts


def sqlserver_dataset_name(
    database: str | None, schema: str | None, table: str, default_schema: str = "dbo"
) -> str:
    """``{database}.{schema}.{table}``; schema ``dbo`` when omitted; brackets/quotes removed.

    ``table`` may itself be qualified (``schema.t`` or ``db.schema.t``): its own parts win over
    ``database``/``schema``, a three-part name is taken as is (cross-database reference).
    Without a database the name is ``{schema}.{table}`` (the Java client's form then).
    """
    parts = [unquote_identifier(p) for p in _SQLSERVER_PARTS.findall(table)]
    if len(parts) >= 3:
        return ".".join(parts[-3:])
    if len(parts) == 2:
        schema, parts = parts[0], parts[1:]
    db = unquote_identifier(database) if database else None
    sch = unquote_identifier(schema) if schema else default_schema
    return ".".join(p for p in (db, sch, parts[0] if parts else table) if p)
