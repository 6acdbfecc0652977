"""How the graph names a dataset: the (namespace, name) a producer wrote, made one identity for every spelling of
one dataset (paths split anywhere between namespace and name, partition folders, Snowflake's case). Read by the
ingest for every dataset and by lookups; imports nothing heavy (read commands load it only for a URI or a
Snowflake name)."""
from __future__ import annotations

import re

# a Hive-style partition folder at the end of a path: `/dt=2024-01-01`, `/region=eu/` (partitions are one dataset)
_PARTITION_TAIL = re.compile(r"(?:/[^/=]+=[^/]*)+/?$")
# Namespaces of file systems and object stores, where `key=value` folders are a table's partitions (a Kafka topic,
# an HTTP path or a database name holding `=` is a name of its own).
_PATH_SCHEMES = frozenset({
    "file", "s3", "s3a", "s3n", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss", "wasb", "wasbs", "adl", "dbfs",
    "oss", "cos", "obs", "swift", "webhdfs", "local",
})
# Object stores (a key, not a path, names an object: no leading `/`), with each scheme's canonical spelling.
_OBJECT_STORES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "abfs": "abfss", "abfss": "abfss",
                  "wasb": "wasbs", "wasbs": "wasbs"}


def normalize_dataset(namespace: str, name: str) -> tuple[str, str] | None:
    """A dataset's identity in the graph, or None for storage private to a job.

    In a file system's or object store's namespace a path is one dataset however it is spelled: the namespace is
    ``scheme://authority`` and the rest of the path is the name, as OpenLineage's naming spells it (producers that
    put folders into the namespace, ``s3://bucket/a`` + ``b``, name the dataset ``s3://bucket`` + ``a/b`` writes;
    see :func:`_path_in_name`); trailing ``key=value`` folders of a table's partitions are trimmed
    (``/data/sales/dt=2024-01-01`` -> ``/data/sales``), and so is a trailing ``/`` (``/data/x/`` is ``/data/x``).
    SQL Server temporary tables (last name part starting with ``#``) are private to their session and not
    datasets."""
    scheme = namespace.split(":", 1)[0].lower()
    if scheme == "snowflake":
        namespace, name = _snowflake(namespace, name)
    elif scheme == "bigquery" and "$" in name:  # `p.d.t$20240101`: a partition decorator ($ is in no table name)
        name = name.split("$", 1)[0] or name
    in_paths = scheme in _PATH_SCHEMES  # (_path_in_name keeps the scheme a path one)
    if in_paths and "://" in namespace:
        namespace, name = _path_in_name(namespace, name)
    if in_paths and "/" in name:
        trimmed = (_PARTITION_TAIL.sub("", name) if "=" in name else name).rstrip("/")
        if trimmed:
            name = trimmed
    if name.rsplit(".", 1)[-1].startswith("#"):
        return None
    return namespace, name


def _snowflake(namespace: str, name: str) -> tuple[str, str]:
    """Snowflake resolves unquoted identifiers to upper case and account identifiers regardless of case, and
    producers write both as they found them (dbt the model's own ``DEMO_DB.public.stg_orders``, SQL parsers and
    this project's harvester ``DEMO_DB.PUBLIC.STG_ORDERS``): one spelling, upper-case names in a lower-case account,
    so that they meet. (A quoted mixed-case name cannot be told apart in an event; it meets its upper-case twin.)"""
    scheme, sep, rest = namespace.partition("://")
    authority, slash, tail = rest.partition("/")
    return f"{scheme.lower()}{sep}{authority.lower()}{slash}{tail}", name.upper()


def _path_in_name(namespace: str, name: str) -> tuple[str, str]:
    """``scheme://authority/folders`` + ``name`` -> ``scheme://authority`` + the whole path, as the JVM
    integration and the OpenLineage naming spec write it: an object store's key without a leading ``/`` and its
    scheme's canonical spelling (``s3a``/``s3n`` -> ``s3``, ``abfs`` -> ``abfss``, ``wasb`` -> ``wasbs``), any
    other file system's path with one."""
    scheme, _, rest = namespace.partition("://")
    authority, _, folders = rest.partition("/")
    scheme = scheme.lower()
    canonical = _OBJECT_STORES.get(scheme)
    path = "/".join(part for part in (folders.strip("/"), name.strip("/")) if part)
    if canonical is not None:
        return f"{canonical}://{authority}", path or name
    return f"{scheme}://{authority}", f"/{path}" if path else name


_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(?://([^/]*))?(/.*)")


def uri_dataset(text: str) -> list[tuple[str, str]]:
    """A path written as a URI (``hdfs://nn:8020/warehouse/t``, ``file:///tmp/x``, ``file:/tmp/x``,
    ``s3a://bucket/key``) as the graph stores it: namespace ``scheme://authority`` (``file`` without one) and the
    path; [] for anything that is no file system's or object store's URI."""
    match = _URI.fullmatch(text)
    if match is None or match.group(1).lower() not in _PATH_SCHEMES:
        return []
    scheme, authority, path = match.group(1), match.group(2) or "", match.group(3)
    pairs = [(scheme, path)] if not authority else []
    pair = normalize_dataset(f"{scheme}://{authority}", path)
    return pairs + ([pair] if pair else [])
