"""Dataset namespaces/names and job names, the way the JVM OpenLineage integration forms them.

A Spark JDBC read seen by the JVM integration, by our Spark plugin and by a harvester must be one
node in Marquez, so every rule here is a port of the OpenLineage Java client
(``io.openlineage.client.utils.filesystem.*``, ``...utils.jdbc.*``, ``SnowflakeUtils``) and of the
Spark integration's ``NameNormalizer``; deviations are called out where they are made.
Partition trimming reuses openlineage-python's own trimmers.

None of these functions apply :func:`safe_namespace`: they return the spec/JVM form; the emitter makes
namespaces Marquez-safe in one place.

The rules are split by kind of source: :mod:`.paths` (files, object stores), :mod:`.jdbc`, :mod:`.sqlserver`,
:mod:`.snowflake`, :mod:`.jobs` (job names, Marquez-safe namespaces); import them from here.
"""
from __future__ import annotations

from emitter.naming.jdbc import jdbc_dataset, jdbc_namespace
from emitter.naming.jobs import normalize_name, safe_namespace
from emitter.naming.paths import escape_literal_path, path_dataset, trim_partitions
from emitter.naming.snowflake import snowflake_namespace
from emitter.naming.sqlserver import SQLSERVER_DEFAULT_PORT, sqlserver_dataset_name, sqlserver_namespace

__all__ = [
    "SQLSERVER_DEFAULT_PORT",
    "escape_literal_path",
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
