"""JDBC datasets: ``dbtable`` as is, a ``query`` (or subquery ``dbtable``) parsed with the project's SQL engine."""
from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from emitter import naming
from emitter.deferred import facet_v2
from spark_plugin.plan_context import PlanContext, RawDataset, Schema

if TYPE_CHECKING:  # the real classes for the type checker; at run time their deferred constructors (emitter.deferred)
    from openlineage.client.facet_v2 import schema_dataset
else:
    schema_dataset = facet_v2.schema_dataset

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


#: a relation field -> the (table, column) pairs it is computed from, in the order found
FieldColumns = dict[str, list[tuple[str, str]]]


def _traced_columns(sql: str, dialect: str, schema: Schema | None, tables: list[str]) -> FieldColumns | None:
    """For each field of the relation's schema, every column of the query's ``tables`` it is computed from
    (sqlglot's column lineage: the JVM's ``SqlMeta.columnLineage()``), as the query spells the column; a
    field computed from no column (``count(*)``) gets none. None when the query names none of the fields
    (``select *``) or cannot be traced."""
    if schema is None or not schema.fields:
        return None
    from sqlglot import exp, parse_one
    from sqlglot.lineage import lineage

    from harvesters.sql.dialects import rules_for

    rules = rules_for(dialect)
    read = (rules.sqlglot if rules else "") or None
    by_name = {t.lower(): t for t in tables}
    traced: FieldColumns = {}
    try:
        tree = parse_one(sql, dialect=read)
        # sqlglot's lineage normalizes identifiers' case: report columns as the query spells them
        spelling = {c.name.lower(): c.name for c in tree.find_all(exp.Column)}
        # every output column's lineage in one pass (one qualification of the query, not one per field)
        by_output = lineage(None, tree, {}, dialect=read)  # no schema: the query's own names
        lowered = {name.lower(): node for name, node in by_output.items()}
        for field in schema.fields:
            # a database's column label: as the query spells it, else case-insensitively
            root = by_output.get(field.name) or lowered.get(field.name.lower())
            if root is None:
                continue
            traced.setdefault(field.name, [])
            for node in root.walk():
                if node.downstream or not isinstance(node.source, exp.Table):
                    continue
                table = by_name.get(".".join(p.name for p in node.source.parts).lower())
                column = parse_one(node.name, into=exp.Column, dialect=read).name
                pair = (table, spelling.get(column.lower(), column)) if table is not None and column else None
                if pair is not None and pair not in traced[field.name]:
                    traced[field.name].append(pair)
    except Exception as exc:  # noqa: BLE001 - a query sqlglot cannot trace: no per-table columns, as the JVM without lineage
        log.debug("cannot trace the columns of a JDBC query: %s", exc)
        return None
    return traced or None


def _table_schemas(schema: Schema, traced: FieldColumns) -> dict[str, Schema]:
    """Each table's schema as the JVM's ``SqlUtils.generateSchemaFromSqlMeta`` builds it for a JDBC query
    reading several tables: for each field of the relation's schema, in order, the columns of that table the
    field is computed from, typed as the field. Tables the lineage does not reach get no schema."""
    columns: dict[str, list[schema_dataset.SchemaDatasetFacetFields]] = {}
    for field in schema.fields or []:
        for table, column in traced.get(field.name, []):
            nested: dict[str, Any] = {"fields": field.fields} if field.fields else {}
            columns.setdefault(table, []).append(
                schema_dataset.SchemaDatasetFacetFields(name=column, type=field.type, **nested))
    return {table: Schema(fields=fields) for table, fields in columns.items()}


def _columns_of(table: str, traced: FieldColumns) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """:attr:`RawDataset.columns` of ``table``: each relation field -> its columns of that table."""
    return tuple((field, tuple(c for t, c in pairs if t == table)) for field, pairs in traced.items())


def jdbc_raws(
    ctx: PlanContext, url: str, table: str | None, query: str | None, schema: Schema | None
) -> list[RawDataset]:
    """JDBC datasets: ``dbtable`` as is; a ``query`` or subquery ``dbtable`` parsed as SQL (the JVM's
    ``JdbcSparkUtils``): one table gets the relation's schema, several tables each the columns the
    relation's fields are computed from (:func:`_table_schemas`); every table of a query carries, for column
    lineage, the columns each relation field is computed from (:attr:`RawDataset.columns`)."""
    derby_home = ctx.derby_home if url.lower().startswith("jdbc:derby:") else None
    sub = _SUBQUERY.match(table or "")
    sql = query or (sub.group("sql") if sub else None)
    if sql is None:
        namespace, name = naming.jdbc_dataset(url, table or "", derby_home=derby_home)
        return [RawDataset(namespace, name, schema)]
    dialect = _jdbc_dialect(url)
    tables = _sql_tables(sql, dialect)
    traced = _traced_columns(sql, dialect, schema, tables)
    schemas: dict[str, Schema | None]
    if len(tables) == 1 or schema is None:
        schemas = {t: schema for t in tables[:1]}
    else:
        schemas = dict(_table_schemas(schema, traced or {}))
    out = []
    for t in tables:
        namespace, name = naming.jdbc_dataset(url, t, derby_home=derby_home)
        # a query the lineage does not trace (``select *``): its fields are every table's same-named columns, as
        # the JVM's InputFieldsCollector gives them
        columns = _columns_of(t, traced) if traced is not None else None
        out.append(RawDataset(namespace, name, schemas.get(t), columns=columns))
    return out
