"""JDBC datasets: ``dbtable`` as is, a ``query`` (or subquery ``dbtable``) parsed with the project's SQL engine."""
from __future__ import annotations

import logging
import re
from typing import Any

from openlineage.client.facet_v2 import schema_dataset

from emitter import naming
from spark_plugin.plan_context import PlanContext, RawDataset, Schema

log = logging.getLogger(__name__)


def _jdbc_dialect(url: str) -> str:
    from harvesters.sql.dialects import rules_for

    sub = re.sub(r"(?i)^jdbc:", "", url).split(":", 1)[0].lower()
    return sub if rules_for(sub) is not None else "ansi"


def _sql_tables(sql: str, dialect: str) -> list[str]:
    """Input table names of a JDBC ``query`` through the project's SQL parser."""
    from harvesters.sql.engine import table_lineage

    try:
        return list(table_lineage(sql, dialect).inputs)
    except Exception as exc:  # noqa: BLE001 - a query outside the parser's grammar: no datasets rather than none at all
        log.debug("cannot parse JDBC query: %s", exc)
        return []


_SUBQUERY = re.compile(r"^\s*\((?P<sql>.*)\)\s*(?:as\s+)?\w*\s*$", re.IGNORECASE | re.DOTALL)


def _trace(name: str, tree: Any, dialect: str | None) -> list[Any]:
    """The lineage nodes of output column ``name`` (a database's column label: matched case-insensitively,
    then as a quoted name); none when the query has no such column."""
    from sqlglot import exp
    from sqlglot.errors import SqlglotError
    from sqlglot.lineage import lineage

    for column in (name, exp.column(name, quoted=True)):
        try:
            # sqlglot's overloads want a schema; None (no schema) is what it defaults to
            return list(lineage(column, tree, None, dialect=dialect).walk())  # type: ignore[call-overload]
        except SqlglotError:
            continue
    return []


def _column_lineage_schemas(sql: str, dialect: str, schema: Schema | None, tables: list[str]) -> dict[str, Schema]:
    """Each table's schema as the JVM's ``SqlUtils.generateSchemaFromSqlMeta`` builds it for a JDBC query
    reading several tables: for each field of the relation's schema, in order, every column of that table
    the field is computed from (sqlglot's column lineage), typed as the field. Tables the lineage does not
    reach, or a query it cannot trace, get no schema."""
    if schema is None or not schema.fields:
        return {}
    from sqlglot import exp, parse_one

    from harvesters.sql.dialects import rules_for

    rules = rules_for(dialect)
    read = (rules.sqlglot if rules else "") or None
    by_name = {t.lower(): t for t in tables}
    columns: dict[str, list[schema_dataset.SchemaDatasetFacetFields]] = {}
    try:
        tree = parse_one(sql, dialect=read)
        # sqlglot's lineage normalizes identifiers' case: report columns as the query spells them
        spelling = {c.name.lower(): c.name for c in tree.find_all(exp.Column)}
        for field in schema.fields:
            for node in _trace(field.name, tree, read):
                if node.downstream or not isinstance(node.source, exp.Table):
                    continue
                table = by_name.get(".".join(p.name for p in node.source.parts).lower())
                column = parse_one(node.name, into=exp.Column, dialect=read).name
                if table is not None and column:
                    nested: dict[str, Any] = {"fields": field.fields} if field.fields else {}
                    columns.setdefault(table, []).append(schema_dataset.SchemaDatasetFacetFields(
                        name=spelling.get(column.lower(), column), type=field.type, **nested))
    except Exception as exc:  # noqa: BLE001 - a query sqlglot cannot trace: no per-table schemas, as the JVM without lineage
        log.debug("cannot trace the columns of a JDBC query: %s", exc)
        return {}
    return {table: Schema(fields=fields) for table, fields in columns.items()}


def jdbc_raws(
    ctx: PlanContext, url: str, table: str | None, query: str | None, schema: Schema | None
) -> list[RawDataset]:
    """JDBC datasets: ``dbtable`` as is; a ``query`` or subquery ``dbtable`` parsed as SQL (the JVM's
    ``JdbcSparkUtils``): one table gets the relation's schema, several tables each the columns the
    relation's fields are computed from (:func:`_column_lineage_schemas`)."""
    derby_home = ctx.derby_home if url.lower().startswith("jdbc:derby:") else None
    sub = _SUBQUERY.match(table or "")
    sql = query or (sub.group("sql") if sub else None)
    if sql is None:
        namespace, name = naming.jdbc_dataset(url, table or "", derby_home=derby_home)
        return [RawDataset(namespace, name, schema)]
    dialect = _jdbc_dialect(url)
    tables = _sql_tables(sql, dialect)
    schemas = {tables[0]: schema} if len(tables) == 1 else _column_lineage_schemas(sql, dialect, schema, tables)
    out = []
    for t in tables:
        namespace, name = naming.jdbc_dataset(url, t, derby_home=derby_home)
        out.append(RawDataset(namespace, name, schemas.get(t)))
    return out
