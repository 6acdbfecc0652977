"""The SQL engine: which tables a statement reads and writes, per dialect (a package of its own).

It imports neither the emitter nor the rest of ``harvesters``: the Spark plugin and both harvesters use it.

* :mod:`.engine`: :func:`table_lineage`, sqlglot's parse tree walked for inputs, outputs and temp tables;
* :mod:`.dialects`: what differs between dialects, as data (:class:`~.dialects.DialectRules`);
* :mod:`.tsql`: T-SQL token rewrites sqlglot needs, a table of named rules;
* :mod:`.cache`: statement fingerprints and the bounded lineage cache the harvesters share;
* :mod:`.prepared`: SQL Server drivers' prepared and cursor calls (``sp_prepexec``, ``sp_execute`` ...);
* :mod:`.system`: the dialects' system objects (catalog views), which are not datasets.
"""
from harvesters.sql.engine import MAX_NESTING, MAX_SQL_BYTES, TableLineage, table_lineage

__all__ = ["MAX_NESTING", "MAX_SQL_BYTES", "TableLineage", "table_lineage"]
