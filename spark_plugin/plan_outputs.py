"""Datasets written by the root command of a Spark optimized plan: :data:`OUTPUT_HANDLERS`, keyed by the
command's simple class name (the job name suffix on the first dataset)."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs

from emitter import naming
from spark_plugin import plan_tree
from spark_plugin.plan_context import (
    PlanContext,
    RawDataset,
    Schema,
    _identifier,
    _location,
    catalog_table_raw,
    hive_catalog,
    lookup_table_raw,
    path_raw,
    table_raw,
    trim_path,
)
from spark_plugin.plan_inputs import v2_relation_raws
from spark_plugin.plan_jdbc import jdbc_raws
from spark_plugin.plan_tree import PlanNode

log = logging.getLogger(__name__)


def _mode(jcmd: Any) -> str:
    return str(jcmd.mode().toString())


def _query_schema(jcmd: Any) -> Schema | None:
    return plan_tree.struct_schema(jcmd.query().schema().json())


def _insert_hadoop_fs(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``InsertIntoHadoopFsRelationCommand``: output path (with the table's symlink when it is one);
    OVERWRITE in overwrite mode; suffix = last two path segments, also for a table (the JVM's
    ``InsertIntoHadoopFsRelationVisitor``).

    The nested insert a CTAS or ``saveAsTable`` runs (Spark 3.4+, see :mod:`spark_plugin.plan_lineage`)
    carries no ``catalogTable`` while the table does not exist yet: it writes the table's default location,
    and gets the symlink of the table that lives there (:func:`_default_location_table`), where the JVM
    gives none."""
    jcmd = ctx.jvm_node(node)
    location = naming.escape_literal_path(jcmd.outputPath().toString())
    schema = _query_schema(jcmd)
    lifecycle = "OVERWRITE" if _mode(jcmd) == "Overwrite" else None
    table_json = node.fields.get("catalogTable")
    if table_json:
        database, table = _identifier(table_json.get("identifier"))
        raw = table_raw(ctx, location, database, table, schema, lifecycle=lifecycle)
    else:
        raw = path_raw(location, schema, lifecycle=lifecycle)
        owner = _default_location_table(ctx, raw)
        if owner is not None:
            raw = table_raw(ctx, location, *owner, schema, lifecycle=lifecycle)
    return [attrs.evolve(raw, suffix=trim_path(raw.name))]


def _default_location_table(ctx: PlanContext, raw: RawDataset) -> tuple[str, str] | None:
    """(database, table) of the session catalog whose default location ``raw`` is: ``{warehouse}/{table}``
    in ``default``, ``{warehouse}/{db}.db/{table}`` in ``db``, each checked against the database's location
    in the catalog. That is where a CTAS or ``saveAsTable`` writes a managed table before it creates (or
    re-creates) it, so the table need not exist yet; a path written elsewhere costs no py4j call beyond the
    warehouse lookup (two calls, once per action)."""
    warehouse = ctx.warehouse
    if not warehouse:
        return None
    here = _location(raw.namespace, raw.name)
    parent, _, table = here.rpartition("/")
    if parent == warehouse:
        database = "default"
    elif parent.rpartition("/")[0] == warehouse and parent.endswith(".db"):
        database = parent.rpartition("/")[2][: -len(".db")]
    else:
        return None
    if not table or not database:
        return None
    try:  # a database made with its own LOCATION keeps its tables elsewhere: this is then just a folder
        found = ctx.catalog.getDatabaseMetadata(database).locationUri().toString()
    except Exception:  # noqa: BLE001 - no such database: a folder of the warehouse, not a table
        return None
    namespace, name = naming.path_dataset(found)
    return (database, table) if _location(namespace, name).rstrip("/") == parent else None


def _db_table_suffix(database: str | None, table: str) -> str:
    # the JVM's tableIdentifierToSuffix
    return f"{database}_{table}" if database else table


def _create_ds_table_as_select(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``CreateDataSourceTableAsSelectCommand``: CREATE; schema of the table, else of the query."""
    jcmd = ctx.jvm_node(node)
    table_json = node.fields.get("table") or {}
    schema = plan_tree.struct_schema(table_json.get("schema")) or _query_schema(jcmd)
    raw = hive_catalog(ctx, catalog_table_raw(ctx, jcmd.table(), table_json, schema=schema, lifecycle="CREATE"))
    return [attrs.evolve(raw, suffix=_db_table_suffix(*_identifier(table_json.get("identifier"))))]


def _create_ds_table(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``CreateDataSourceTableCommand``: CREATE with the declared schema; suffix ``db_table``."""
    table_json = node.fields.get("table") or {}
    schema = plan_tree.struct_schema(table_json.get("schema"))
    raw = catalog_table_raw(ctx, ctx.jvm_node(node).table(), table_json, schema=schema, lifecycle="CREATE")
    raw = hive_catalog(ctx, raw)
    return [attrs.evolve(raw, suffix=_db_table_suffix(*_identifier(table_json.get("identifier"))))]


def _create_table(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``CreateTableCommand`` (Hive serde table): CREATE; suffix = last two location segments."""
    table_json = node.fields.get("table") or {}
    schema = plan_tree.struct_schema(table_json.get("schema"))
    raw = catalog_table_raw(ctx, ctx.jvm_node(node).table(), table_json, schema=schema, lifecycle="CREATE")
    return [attrs.evolve(hive_catalog(ctx, raw), suffix=trim_path(raw.name))]


def _create_hive_table_as_select(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``CreateHiveTableAsSelectCommand``: CREATE with the query's schema; suffix ``db_table``."""
    jcmd = ctx.jvm_node(node)
    table_json = node.fields.get("tableDesc") or {}
    schema = _query_schema(jcmd) or plan_tree.struct_schema(table_json.get("schema"))
    raw = catalog_table_raw(ctx, jcmd.tableDesc(), table_json, schema=schema, lifecycle="CREATE")
    raw = hive_catalog(ctx, raw, always=True)
    return [attrs.evolve(raw, suffix=_db_table_suffix(*_identifier(table_json.get("identifier"))))]


def _optimized_create_hive_table_as_select(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``OptimizedCreateHiveTableAsSelectCommand``: OVERWRITE only in overwrite mode (as the JVM)."""
    jcmd = ctx.jvm_node(node)
    table_json = node.fields.get("tableDesc") or {}
    schema = _query_schema(jcmd) or plan_tree.struct_schema(table_json.get("schema"))
    lifecycle = "OVERWRITE" if _mode(jcmd) == "Overwrite" else None
    return [catalog_table_raw(ctx, jcmd.tableDesc(), table_json, schema=schema, lifecycle=lifecycle)]


def _insert_hive_table(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``InsertIntoHiveTable``: the table's schema; OVERWRITE when overwriting; suffix from location."""
    table_json = node.fields.get("table") or {}
    schema = plan_tree.struct_schema(table_json.get("schema"))
    lifecycle = "OVERWRITE" if node.fields.get("overwrite") else None
    raw = catalog_table_raw(ctx, ctx.jvm_node(node).table(), table_json, schema=schema, lifecycle=lifecycle)
    return [attrs.evolve(hive_catalog(ctx, raw, always=True), suffix=trim_path(raw.name))]


def _drop_table(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``DropTableCommand``: DROP, no schema. The listener runs after the drop, so the table's
    location is the catalog's default path for it (right for managed tables)."""
    ident_json = node.fields.get("tableName") or {}
    jident = ctx.jvm_node(node).tableName()
    if ctx.catalog.tableExists(jident):  # DROP ... IF EXISTS of a table that is still there
        raw = lookup_table_raw(ctx, ident_json, jident, lifecycle="DROP")
        return [hive_catalog(ctx, raw)] if raw else []
    database, table = _identifier(ident_json)
    if node.fields.get("isView"):
        return []
    location = ctx.catalog.defaultTablePath(jident).toString()
    database = database or ctx.catalog.getCurrentDatabase()
    return [hive_catalog(ctx, table_raw(ctx, location, database, table, lifecycle="DROP"))]


def _truncate_table(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``TruncateTableCommand``: TRUNCATE, no schema; suffix from the location."""
    raw = lookup_table_raw(ctx, node.fields.get("tableName") or {}, ctx.jvm_node(node).tableName(),
                           lifecycle="TRUNCATE")
    return [attrs.evolve(hive_catalog(ctx, raw), suffix=trim_path(raw.name))] if raw else []


def _alter_add_columns(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``AlterTableAddColumnsCommand``: ALTER with the table's new schema; no suffix."""
    raw = lookup_table_raw(ctx, node.fields.get("table") or {}, ctx.jvm_node(node).table(), with_schema=True,
                           lifecycle="ALTER")
    return [hive_catalog(ctx, raw)] if raw else []


def _alter_rename(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``AlterTableRenameCommand``: RENAME, previous name = the new name with the old table name."""
    new_json = node.fields.get("newName") or {}
    old_table = (node.fields.get("oldName") or {}).get("table", "")
    raw = lookup_table_raw(ctx, new_json, ctx.jvm_node(node).newName(), with_schema=True, lifecycle="RENAME")
    if raw is None:
        return []
    previous = raw.name.replace(new_json.get("table", ""), old_table)
    return [attrs.evolve(hive_catalog(ctx, raw), previous=(raw.namespace, previous))]


def _load_data(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``LoadDataCommand`` (``LOAD DATA [LOCAL] INPATH ... INTO TABLE``): the table with its schema and
    no lifecycle state, even with OVERWRITE (as the JVM's ``LoadDataCommandVisitor``); suffix ``db_table``."""
    ident_json = node.fields.get("table") or {}
    raw = lookup_table_raw(ctx, ident_json, ctx.jvm_node(node).table(), with_schema=True)
    if raw is None:
        return []
    return [attrs.evolve(hive_catalog(ctx, raw), suffix=_db_table_suffix(*_identifier(ident_json)))]


def _insert_dir(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``InsertIntoDataSourceDirCommand`` / ``InsertIntoHiveDirCommand``: the directory."""
    jcmd = ctx.jvm_node(node)
    location = jcmd.storage().locationUri()
    if not location.isDefined():
        return []
    lifecycle = "OVERWRITE" if node.fields.get("overwrite") else None
    raw = path_raw(location.get().toString(), _query_schema(jcmd), lifecycle=lifecycle)
    if node.name == "InsertIntoHiveDirCommand":  # the data source variant has neither suffix nor catalog
        return [attrs.evolve(hive_catalog(ctx, raw, always=True), suffix=trim_path(raw.name))]
    return [raw]


def _save_into_datasource(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``SaveIntoDataSourceCommand`` (``df.write.jdbc``/``format("jdbc")``): OVERWRITE in overwrite mode,
    else CREATE (as the JVM); suffix = the option whose key contains ``table``."""
    jcmd = ctx.jvm_node(node)
    source = jcmd.dataSource().getClass().getSimpleName()
    options = jcmd.options()
    table = options.get("dbtable")
    suffix_option = options.get("table")
    lifecycle = "OVERWRITE" if _mode(jcmd) == "Overwrite" else "CREATE"
    if source != "JdbcRelationProvider" or not table.isDefined():
        return []
    schema = _query_schema(jcmd)
    url = options.get("url").get()
    raws = jdbc_raws(ctx, url, table.get(), None, schema)
    suffix = suffix_option.get() if suffix_option.isDefined() else table.get()
    return [attrs.evolve(r, lifecycle=lifecycle, suffix=suffix) for r in raws]


def _v2_write(lifecycle: str | None, suffix_with_catalog: bool) -> Callable[[PlanContext, PlanNode], list[RawDataset]]:
    """AppendData (no lifecycle) and OverwriteByExpression/OverwritePartitionsDynamic (OVERWRITE).

    Suffix: the relation's name, prefixed by its catalog for AppendData (the JVM's
    ``DataSourceV2RelationOutputDatasetBuilder.jobNameSuffix``); the relation's name otherwise."""

    def handler(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
        jcmd = ctx.jvm_node(node)
        jrel = jcmd.table()
        if jrel.getClass().getSimpleName() != "DataSourceV2Relation":
            return []
        target = next((t for t in node.nested if t.path[-1] == ("f", "table")), None)
        schema = plan_tree.output_schema(target.fields.get("output")) if target else None
        suffix = jrel.name()
        if suffix_with_catalog and jrel.catalog().isDefined():
            catalog = jrel.catalog().get().name()
            if not suffix.startswith(catalog + "."):
                suffix = f"{catalog}.{suffix}"
        raws = v2_relation_raws(ctx, jrel, schema, lifecycle=lifecycle)
        return [attrs.evolve(r, suffix=suffix) for r in raws]

    return handler


def _v2_identifier_raws(ctx: PlanContext, jresolved: Any, schema: Schema | None, lifecycle: str) -> list[RawDataset]:
    """A ``ResolvedIdentifier``/``ResolvedTable`` of a V2 catalog (JDBC catalogs: url + identifier)."""
    catalog = jresolved.catalog()
    ident = jresolved.identifier()
    parts = [*list(ident.namespace()), ident.name()]
    kind = catalog.getClass().getSimpleName()
    if kind == "V2SessionCatalog":  # spark_catalog: a V1 table, maybe already dropped
        database = parts[-2] if len(parts) > 1 else ctx.catalog.getCurrentDatabase()
        jident = ctx.jvm.org.apache.spark.sql.catalyst.TableIdentifier(parts[-1], ctx.jvm.scala.Some(database))
        ident_json = {"database": database, "table": parts[-1]}
        if ctx.catalog.tableExists(jident):
            raw = lookup_table_raw(ctx, ident_json, jident, lifecycle=lifecycle)
            return [hive_catalog(ctx, attrs.evolve(raw, schema=schema))] if raw else []
        location = ctx.catalog.defaultTablePath(jident).toString()
        return [hive_catalog(ctx, table_raw(ctx, location, database, parts[-1], schema, lifecycle=lifecycle))]
    if kind == "JDBCTableCatalog":
        field = catalog.getClass().getDeclaredField("options")
        field.setAccessible(True)
        url = field.get(catalog).url()
        namespace, name = naming.jdbc_dataset(
            url, ".".join(parts), derby_home=ctx.derby_home if url.lower().startswith("jdbc:derby:") else None
        )
        return [RawDataset(namespace, name, schema, lifecycle=lifecycle)]
    try:  # a catalog that reports where the table lives
        location = catalog.loadTable(ident).properties().get("location")
    except Exception:  # noqa: BLE001 - a catalog that cannot load the table: no location
        location = None
    return [path_raw(location, schema, lifecycle=lifecycle)] if location else []


def _ident_suffix(jresolved: Any) -> str:
    # the JVM's identToSuffix: namespace parts and name joined by "_"
    ident = jresolved.identifier()
    return "_".join([*list(ident.namespace()), ident.name()])


def _v2_create(lifecycle: str, schema_from: str) -> Callable[[PlanContext, PlanNode], list[RawDataset]]:
    """CreateTable/CreateTableAsSelect (CREATE), ReplaceTable[AsSelect] (OVERWRITE): the JVM's
    ``CreateReplaceOutputDatasetBuilder``; suffix = identifier parts joined by ``_``."""

    def handler(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
        jcmd = ctx.jvm_node(node)
        jname = jcmd.name()
        if schema_from == "query":
            schema = _query_schema(jcmd)
        else:
            schema = plan_tree.struct_schema(jcmd.tableSchema().json())
        raws = _v2_identifier_raws(ctx, jname, schema, lifecycle)
        suffix = _ident_suffix(jname)
        return [attrs.evolve(r, suffix=suffix) for r in raws]

    return handler


def _v2_drop(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``DropTable`` over a V2 catalog's ``ResolvedIdentifier``: DROP."""
    return _v2_identifier_raws(ctx, ctx.jvm_node(node).child(), None, "DROP")


OutputHandler = Callable[[PlanContext, PlanNode], list[RawDataset]]

#: Root command simple class name -> output datasets (with the job name suffix on the first).
OUTPUT_HANDLERS: dict[str, OutputHandler] = {
    "InsertIntoHadoopFsRelationCommand": _insert_hadoop_fs,
    "CreateDataSourceTableAsSelectCommand": _create_ds_table_as_select,
    "CreateDataSourceTableCommand": _create_ds_table,
    "CreateTableCommand": _create_table,
    "CreateHiveTableAsSelectCommand": _create_hive_table_as_select,
    "OptimizedCreateHiveTableAsSelectCommand": _optimized_create_hive_table_as_select,
    "InsertIntoHiveTable": _insert_hive_table,
    "DropTableCommand": _drop_table,
    "TruncateTableCommand": _truncate_table,
    "AlterTableAddColumnsCommand": _alter_add_columns,
    "AlterTableRenameCommand": _alter_rename,
    "LoadDataCommand": _load_data,
    "InsertIntoDataSourceDirCommand": _insert_dir,
    "InsertIntoHiveDirCommand": _insert_dir,
    "SaveIntoDataSourceCommand": _save_into_datasource,
    "AppendData": _v2_write(None, suffix_with_catalog=True),
    "OverwriteByExpression": _v2_write("OVERWRITE", suffix_with_catalog=False),
    "OverwritePartitionsDynamic": _v2_write("OVERWRITE", suffix_with_catalog=False),
    "CreateTable": _v2_create("CREATE", schema_from="table"),
    "CreateTableAsSelect": _v2_create("CREATE", schema_from="query"),
    "ReplaceTable": _v2_create("OVERWRITE", schema_from="table"),
    "ReplaceTableAsSelect": _v2_create("OVERWRITE", schema_from="query"),
    "DropTable": _v2_drop,
}
