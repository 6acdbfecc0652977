"""Datasets of the leaves (inputs) and root commands (outputs) of a Spark optimized plan.

Each handler gets the :class:`~spark_plugin.plan_tree.PlanNode` (from the one ``toJSON()`` call) and a
:class:`PlanContext` that fetches the JVM object behind it only when a detail is missing from the JSON
(paths, locations, modes, JDBC options). Handlers are registered in tables keyed by the node's simple
class name: :data:`INPUT_HANDLERS` and :data:`OUTPUT_HANDLERS`. The rules are ports of the JVM
OpenLineage integration's visitors (``LogicalRelationDatasetBuilder``, ``InsertIntoHadoopFsRelationVisitor``,
``CreateDataSourceTableAsSelectCommandVisitor``, ``TableContentChangeDatasetBuilder``...), named in each
handler's docstring.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property
from typing import Any

import attrs
from openlineage.client.facet_v2 import catalog_dataset, schema_dataset

from emitter import naming
from spark_plugin import plan_tree
from spark_plugin.plan_tree import PlanNode

log = logging.getLogger(__name__)

Schema = schema_dataset.SchemaDatasetFacet
Catalog = catalog_dataset.CatalogDatasetFacet


@attrs.frozen
class RawDataset:
    """A dataset before facets are built: identity, schema, symlink, lifecycle."""

    namespace: str
    name: str
    schema: Schema | None = None
    symlink: tuple[str, str] | None = None  # (namespace, name) of the TABLE identifier
    lifecycle: str | None = None  # CREATE, OVERWRITE, DROP, TRUNCATE, ALTER, RENAME
    previous: tuple[str, str] | None = None  # RENAME: (namespace, name) before
    catalog: Catalog | None = None  # the Hive ``catalog`` facet (see :func:`hive_catalog`)
    #: suffix for the action job name (the JVM's JobNameSuffixProvider), outputs only
    suffix: str | None = None


class PlanContext:
    """What handlers need from the JVM, fetched lazily and at most once per action."""

    def __init__(self, qe: Any, root: PlanNode, jroot: Any, spark_conf: Mapping[str, str]) -> None:
        self.qe = qe
        self.root = root
        self._jroot = jroot
        self.conf = spark_conf

    def jvm_node(self, node: PlanNode) -> Any:
        """The JVM object of a node of the optimized plan."""
        return plan_tree.resolve(self._jroot, node.path)

    @cached_property
    def session(self) -> Any:
        return self.qe.sparkSession()

    @cached_property
    def catalog(self) -> Any:
        """The session catalog (``SessionCatalog``)."""
        return self.session.sessionState().catalog()

    @cached_property
    def jvm(self) -> Any:
        from py4j import protocol
        from py4j.java_gateway import JVMView

        # the gateway's default JVM view, reached from any proxy of it
        return JVMView(self.qe._gateway_client, jvm_name=protocol.DEFAULT_JVM_NAME, id=protocol.DEFAULT_JVM_ID)

    @cached_property
    def warehouse(self) -> str | None:
        """``spark.sql.warehouse.dir`` as Spark qualified it (``file:/...``), without trailing ``/``."""
        value = self.session.conf().get("spark.sql.warehouse.dir", None) or self.conf.get(
            "spark.sql.warehouse.dir"
        )
        if not value:
            return None
        namespace, name = naming.path_dataset(value)
        return _location(namespace, name)

    @cached_property
    def metastore(self) -> str | None:
        """``hive://host:port`` of a remote Hive metastore when the session uses the Hive catalog."""
        if self.session.conf().get("spark.sql.catalogImplementation", "in-memory") != "hive":
            return None
        uris = (
            self.conf.get("spark.sql.hive.metastore.uris")
            or self.conf.get("spark.hadoop.hive.metastore.uris")
            or self.session.sparkContext().hadoopConfiguration().get("hive.metastore.uris")
        )
        if not uris:
            return None
        first = uris.split(",")[0].strip()
        authority = re.sub(r"^\w+://", "", first).split("/")[0]
        return f"hive://{authority}"

    @cached_property
    def hive_session(self) -> bool:
        """Whether the session's ``spark_catalog`` is Spark's own V2SessionCatalog over a Hive session
        catalog (the JVM's ``CatalogDatasetFacetUtils.isHiveCatalog``): False with an in-memory catalog
        or when ``spark_catalog`` is replaced (Delta's DeltaCatalog, Iceberg's SparkSessionCatalog)."""
        try:
            if self.catalog.getClass().getSimpleName() != "HiveSessionCatalog":
                return False
            v2 = self.session.sessionState().catalogManager().v2SessionCatalog()
            return bool(v2.getClass().getSimpleName() == "V2SessionCatalog")
        except Exception:  # a catalog plugin that cannot be loaded: not provably Hive
            return False

    @cached_property
    def hive_catalog_facet(self) -> Catalog | None:
        """The JVM's ``getCatalogDatasetFacetForHive``: name ``default``, type and framework ``hive``,
        the warehouse as a location (``file:/w``) and the metastore (``hive://host:port``) when one is
        configured; None when the warehouse is unknown (the JVM then skips the facet)."""
        if not self.warehouse:
            return None
        return Catalog(framework="hive", type="hive", name="default", metadataUri=self.metastore,
                       warehouseUri=self.warehouse, source="spark", catalogProperties=None)

    @cached_property
    def derby_home(self) -> str | None:
        return self.jvm.java.lang.System.getProperty("derby.system.home")

    def is_file(self, uri: str) -> bool:
        """Whether a location is a single file (local paths checked here, others by Hadoop FS)."""
        namespace, name = naming.path_dataset(uri)
        if namespace == "file":
            return os.path.isfile(name)
        try:
            path = self.jvm.org.apache.hadoop.fs.Path(uri)
            conf = self.session.sessionState().newHadoopConf()
            return bool(path.getFileSystem(conf).isFile(path))
        except Exception:  # unreachable file system: name by the path as given
            return False


def _location(namespace: str, name: str) -> str:
    # the JVM's FilesystemDatasetUtils.toLocation: "file" + "/w" -> "file:/w"
    if ":/" not in namespace:
        namespace += ":/"
    return namespace.rstrip("/") + "/" + name.lstrip("/")


def trim_path(name: str) -> str:
    """The JVM's ``JobNameSuffixProvider.trimPath``: last two path segments joined by ``_``."""
    trimmed = naming.trim_partitions(name)
    if trimmed.rfind("/") > 0:
        parts = [p for p in trimmed.split("/")]
        while parts and parts[-1] == "":  # Java's split drops trailing empty strings
            parts.pop()
        return "_".join(parts[-2:]) if len(parts) >= 2 else parts[-1]
    return trimmed


def path_raw(uri: str, schema: Schema | None = None, **kwargs: Any) -> RawDataset:
    """A dataset named by a file system location, partition folders trimmed."""
    namespace, name = naming.path_dataset(uri)
    return RawDataset(namespace, naming.trim_partitions(name), schema, **kwargs)


# --- catalog tables -------------------------------------------------------------------------------


def hive_catalog(ctx: PlanContext, raw: RawDataset, *, always: bool = False) -> RawDataset:
    """``raw`` with the Hive ``catalog`` facet where the JVM integration adds it: ``always`` for the
    Hive-only nodes whose visitors call ``catalog()`` (HiveTableRelation, InsertIntoHiveTable,
    CreateHiveTableAsSelectCommand, InsertIntoHiveDirCommand); otherwise only for a table of a Hive
    session catalog (the visitors building from a CatalogTable: create, drop, truncate, alter, CTAS).
    Tables read through a LogicalRelation and InsertIntoHadoopFsRelationCommand get none, as in the JVM."""
    if always or ctx.hive_session:
        return attrs.evolve(raw, catalog=ctx.hive_catalog_facet)
    return raw


def _identifier(ident_json: Mapping[str, Any] | None) -> tuple[str | None, str]:
    ident = ident_json or {}
    return ident.get("database"), ident.get("table", "")


def table_location(ctx: PlanContext, jtable: Any) -> str:
    """A CatalogTable's location: ``storage.locationUri`` or the catalog's default table path."""
    location = jtable.storage().locationUri()
    if location.isDefined():
        return location.get().toString()
    return ctx.catalog.defaultTablePath(jtable.identifier()).toString()


def table_raw(
    ctx: PlanContext,
    location: str,
    database: str | None,
    table: str,
    schema: Schema | None = None,
    **kwargs: Any,
) -> RawDataset:
    """A catalog table: named by its location plus a TABLE symlink (the JVM's ``PathUtils.fromTableIdentifier``).

    Symlink: ``hive://{metastore}`` + ``db.table`` with a remote Hive metastore; else, when the table
    lives under ``spark.sql.warehouse.dir``, ``file:{warehouse}`` + ``db.table``; else none.
    """
    raw = path_raw(location, schema, **kwargs)
    table_name = f"{database}.{table}" if database else table
    symlink = None
    if ctx.metastore:
        symlink = (ctx.metastore, table_name)
    elif ctx.warehouse:
        here = _location(raw.namespace, raw.name)
        if here.startswith(ctx.warehouse.rstrip("/") + "/"):
            symlink = (ctx.warehouse, table_name)
    return attrs.evolve(raw, symlink=symlink)


def catalog_table_raw(
    ctx: PlanContext, jtable: Any, table_json: Mapping[str, Any] | None, **kwargs: Any
) -> RawDataset:
    """A CatalogTable JVM object (its JSON gives identifier and schema without py4j calls)."""
    if table_json:
        database, table = _identifier(table_json.get("identifier"))
    else:
        ident = jtable.identifier()
        database = ident.database().get() if ident.database().isDefined() else None
        table = ident.table()
    return table_raw(ctx, table_location(ctx, jtable), database, table, **kwargs)


def lookup_table_raw(
    ctx: PlanContext,
    ident_json: Mapping[str, Any],
    jident: Any,
    *,
    with_schema: bool = False,
    **kwargs: Any,
) -> RawDataset | None:
    """A table by identifier through the session catalog (with its current schema if asked);
    None when it does not exist (any more)."""
    try:
        jtable = ctx.catalog.getTableMetadata(jident)
    except Exception:
        return None
    schema = plan_tree.struct_schema(jtable.schema().json()) if with_schema else None
    database, table = _identifier(ident_json)
    database = database or jtable.database() or None
    return table_raw(ctx, table_location(ctx, jtable), database, table, schema, **kwargs)


# --- JDBC ------------------------------------------------------------------------------------------


def _jdbc_dialect(url: str) -> str:
    from harvesters.sql_dialects import rules_for

    sub = re.sub(r"(?i)^jdbc:", "", url).split(":", 1)[0].lower()
    return sub if rules_for(sub) is not None else "ansi"


def _sql_tables(sql: str, dialect: str) -> list[str]:
    """Input table names of a JDBC ``query`` through the project's SQL parser."""
    from harvesters.sql import table_lineage

    try:
        return list(table_lineage(sql, dialect).inputs)
    except Exception as exc:  # a query outside the parser's grammar: no datasets rather than none at all
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
            return list(lineage(column, tree, None, dialect=dialect).walk())
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

    from harvesters.sql_dialects import rules_for

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
                    nested = {"fields": field.fields} if field.fields else {}
                    columns.setdefault(table, []).append(schema_dataset.SchemaDatasetFacetFields(
                        name=spelling.get(column.lower(), column), type=field.type, **nested))
    except Exception as exc:  # a query sqlglot cannot trace: no per-table schemas, as the JVM without lineage
        log.debug("cannot trace the columns of a JDBC query: %s", exc)
        return {}
    return {table: Schema(fields=fields) for table, fields in columns.items()}


def jdbc_raws(ctx: PlanContext, url: str, table: str | None, query: str | None, schema: Schema | None) -> list[RawDataset]:
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


# --- inputs ---------------------------------------------------------------------------------------


def _logical_relation(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``LogicalRelation``: catalog table, else HadoopFsRelation paths, else JDBC (JVM order)."""
    schema = plan_tree.output_schema(node.fields.get("output"))
    jnode = ctx.jvm_node(node)
    table_json = node.fields.get("catalogTable")
    if table_json:
        return [catalog_table_raw(ctx, jnode.catalogTable().get(), table_json, schema=schema)]
    relation = jnode.relation()
    kind = relation.getClass().getSimpleName()
    if kind == "HadoopFsRelation":
        return _file_raws(ctx, relation.location().rootPaths().mkString("\n"), schema)
    if kind == "JDBCRelation":
        options = relation.jdbcOptions()
        params = options.parameters()
        query = params.get("query")
        return jdbc_raws(
            ctx,
            options.url(),
            None if query.isDefined() else options.tableOrQuery(),
            query.get() if query.isDefined() else None,
            schema,
        )
    return []


def _file_raws(ctx: PlanContext, root_paths: str, schema: Schema | None) -> list[RawDataset]:
    """One single file -> that file; otherwise each root path's directory (files -> their parent)."""
    paths = [p for p in root_paths.split("\n") if p]
    if len(paths) == 1 and ctx.is_file(paths[0]):
        return [path_raw(paths[0], schema)]
    out: dict[tuple[str, str], RawDataset] = {}
    for p in paths:
        directory = p.rsplit("/", 1)[0] if len(paths) > 1 and ctx.is_file(p) else p
        raw = path_raw(directory, schema)
        out.setdefault((raw.namespace, raw.name), raw)
    return list(out.values())


def _hive_table_relation(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``HiveTableRelation`` (the JVM's HiveTableRelationVisitor): schema = the relation's output
    (data and partition columns)."""
    schema = plan_tree.output_schema(node.fields.get("output"))
    table_json = node.fields.get("tableMeta")
    jtable = ctx.jvm_node(node).tableMeta()
    if table_json and not schema:
        schema = plan_tree.struct_schema(table_json.get("schema"))
    return [hive_catalog(ctx, catalog_table_raw(ctx, jtable, table_json, schema=schema), always=True)]


def v2_relation_raws(ctx: PlanContext, jrel: Any, schema: Schema | None, **kwargs: Any) -> list[RawDataset]:
    """A ``DataSourceV2Relation``: by its table's kind (the JVM's ``DataSourceV2RelationDatasetExtractor``
    and catalog handlers: JDBC catalog -> url + identifier, session catalog -> the V1 table, file
    tables -> their root paths, else the ``location`` table property)."""
    table = jrel.table()
    kind = table.getClass().getSimpleName()
    if kind == "V1Table":  # the session catalog (the JVM's V2SessionCatalogHandler)
        return [hive_catalog(ctx, catalog_table_raw(ctx, table.v1Table(), None, schema=schema, **kwargs))]
    if kind == "JDBCTable":
        options = table.jdbcOptions()
        ident = table.ident()
        parts = [*list(ident.namespace()), ident.name()]
        namespace, name = naming.jdbc_dataset(
            options.url(),
            ".".join(parts),
            derby_home=ctx.derby_home if options.url().lower().startswith("jdbc:derby:") else None,
        )
        return [RawDataset(namespace, name, schema, **kwargs)]
    try:
        root_paths = table.fileIndex().rootPaths().mkString("\n")
    except Exception:
        root_paths = None
    if root_paths is not None:
        return [attrs.evolve(r, **kwargs) for r in _file_raws(ctx, root_paths, schema)]
    location = table.properties().get("location")
    if location:
        return [path_raw(location, schema, **kwargs)]
    return []


def _v2_relation(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    schema = plan_tree.output_schema(node.fields.get("output"))
    return v2_relation_raws(ctx, ctx.jvm_node(node), schema)


#: JVM objects looked at, at most, by one walk: an RDD lineage (a LogicalRDD back to its files) or a cached
#: physical plan (back to its logical plans); each step is a few py4j calls on the worker thread.
MAX_WALKED_NODES = 500
#: Hadoop input directories of a HadoopRDD (``getJobConf``) or NewHadoopRDD (``getConf``).
_HADOOP_INPUT_DIR = "mapreduce.input.fileinputformat.inputdir"


def _rdd_lineage(rdd: Any) -> Iterator[Any]:
    """``rdd`` and every RDD it depends on, each once, at most MAX_WALKED_NODES of them."""
    stack, seen = [rdd], set()
    while stack and len(seen) < MAX_WALKED_NODES:
        current = stack.pop()
        if current.id() in seen:
            continue
        seen.add(current.id())
        yield current
        dependencies = current.dependencies().iterator()
        while dependencies.hasNext():
            stack.append(dependencies.next().rdd())


def _rdd_input_dirs(rdd: Any) -> list[str]:
    """Directories of the files an RDD lineage reads: FileScanRDD's files (their parent directories),
    HadoopRDD's and NewHadoopRDD's input directories (the JVM's ``Rdds.findFileLikeRdds``/``RddPathUtils``)."""
    dirs: dict[str, None] = {}
    for current in _rdd_lineage(rdd):
        kind = current.getClass().getSimpleName()
        if kind == "FileScanRDD":
            partitions = current.filePartitions().iterator()
            while partitions.hasNext():
                for file in partitions.next().files():
                    dirs[file.toPath().getParent().toString()] = None
        elif kind in ("HadoopRDD", "NewHadoopRDD"):
            conf = current.getJobConf() if kind == "HadoopRDD" else current.getConf()
            for path in str(conf.get(_HADOOP_INPUT_DIR) or "").split(","):
                if path.strip():
                    dirs[path.strip()] = None
    return list(dirs)


def _logical_rdd(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``LogicalRDD``/``ExternalRDD`` (a DataFrame made from an RDD, e.g. ``df.rdd.map(...).toDF()``): the
    file directories its RDD lineage reads, without a schema (the JVM's ``LogicalRDDVisitor``). An RDD of
    local data (``parallelize``) reads none."""
    out: dict[tuple[str, str], RawDataset] = {}
    for directory in _rdd_input_dirs(ctx.jvm_node(node).rdd()):
        raw = path_raw(directory)
        out.setdefault((raw.namespace, raw.name), raw)
    return list(out.values())


def _linked_logical_plans(jplan: Any) -> Iterator[Any]:
    """The logical plans a physical plan was planned from: the top-most nodes with a ``logicalLink``
    (WholeStageCodegen and exchanges have none; the nodes under them do)."""
    stack, visited = [jplan], 0
    while stack and visited < MAX_WALKED_NODES:
        current = stack.pop()
        visited += 1
        link = current.logicalLink()
        if link.isDefined():
            yield link.get()
            continue
        children = current.children().iterator()
        while children.hasNext():
            stack.append(children.next())


def _in_memory_relation(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """A cached DataFrame (``InMemoryRelation``) on Spark 3.5, whose cache keeps only the physical plan:
    the relations of the logical plans it was planned from. (Spark 4 keeps the cached logical plan in the
    relation's ``cacheBuilder``: a nested tree walked with the rest, nothing to do here.)"""
    if "logicalPlan" in (node.fields.get("cacheBuilder") or {}):
        return []
    out: list[RawDataset] = []
    for jlogical in _linked_logical_plans(ctx.jvm_node(node).cacheBuilder().cachedPlan()):
        sub_root = plan_tree.parse_plan(jlogical)
        sub_ctx = PlanContext(ctx.qe, sub_root, jlogical, ctx.conf)
        for sub in plan_tree.walk(sub_root):
            handler = INPUT_HANDLERS.get(sub.name)
            if handler is not None:
                out.extend(handler(sub_ctx, sub))
    return out


def _load_data_path(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``LoadDataCommand``'s input: the loaded path (the JVM's ``LoadDataCommandInputVisitor``)."""
    path = node.fields.get("path")
    return [path_raw(path)] if isinstance(path, str) and path.strip() else []


InputHandler = Callable[[PlanContext, PlanNode], list[RawDataset]]

#: Leaf (relation) simple class name -> datasets. Nodes not listed give no dataset: LocalRelation
#: (createDataFrame, VALUES), Range, OneRowRelation. Views are gone from optimized plans; a cached
#: DataFrame's InMemoryRelation carries its logical plan as a nested tree on Spark 4 (walked like the rest),
#: only its physical plan on Spark 3.5 (:func:`_in_memory_relation`).
INPUT_HANDLERS: dict[str, InputHandler] = {
    "LogicalRelation": _logical_relation,
    "HiveTableRelation": _hive_table_relation,
    "DataSourceV2Relation": _v2_relation,
    "LoadDataCommand": _load_data_path,  # a command that reads a path it names, not a relation
    "LogicalRDD": _logical_rdd,
    "ExternalRDD": _logical_rdd,
    "InMemoryRelation": _in_memory_relation,
}

#: Fields that hold a command's write target, not something it reads: not walked for inputs.
TARGET_FIELDS: dict[str, frozenset[str]] = {
    "AppendData": frozenset({"table"}),
    "OverwriteByExpression": frozenset({"table"}),
    "OverwritePartitionsDynamic": frozenset({"table"}),
}


# --- outputs --------------------------------------------------------------------------------------


def _mode(jcmd: Any) -> str:
    return str(jcmd.mode().toString())


def _query_schema(jcmd: Any) -> Schema | None:
    return plan_tree.struct_schema(jcmd.query().schema().json())


def _insert_hadoop_fs(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``InsertIntoHadoopFsRelationCommand``: output path (with the table's symlink when it is one);
    OVERWRITE in overwrite mode; suffix = last two path segments."""
    jcmd = ctx.jvm_node(node)
    location = jcmd.outputPath().toString()
    schema = _query_schema(jcmd)
    lifecycle = "OVERWRITE" if _mode(jcmd) == "Overwrite" else None
    table_json = node.fields.get("catalogTable")
    if table_json:
        database, table = _identifier(table_json.get("identifier"))
        raw = table_raw(ctx, location, database, table, schema, lifecycle=lifecycle)
    else:
        raw = path_raw(location, schema, lifecycle=lifecycle)
    return [attrs.evolve(raw, suffix=trim_path(raw.name))]


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
    raw = lookup_table_raw(ctx, node.fields.get("tableName") or {}, ctx.jvm_node(node).tableName(), lifecycle="TRUNCATE")
    return [attrs.evolve(hive_catalog(ctx, raw), suffix=trim_path(raw.name))] if raw else []


def _alter_add_columns(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``AlterTableAddColumnsCommand``: ALTER with the table's new schema; no suffix."""
    raw = lookup_table_raw(ctx, node.fields.get("table") or {}, ctx.jvm_node(node).table(), with_schema=True, lifecycle="ALTER")
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
    except Exception:
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


def _save_as_v1_table(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``SaveAsV1TableCommand`` (Spark 4's ``saveAsTable`` wrapper around the CTAS/insert it runs as
    a nested action; unknown to the JVM integration): the table, CREATE for ErrorIfExists, OVERWRITE
    for Overwrite; suffix ``db_table`` like CTAS."""
    jcmd = ctx.jvm_node(node)
    database, table = _identifier((node.fields.get("tableDesc") or {}).get("identifier"))
    database = database or ctx.catalog.getCurrentDatabase()  # saveAsTable('t') is not qualified yet
    lifecycle = {"Overwrite": "OVERWRITE", "ErrorIfExists": "CREATE"}.get(_mode(jcmd))
    jtable = ctx.catalog.getTableMetadata(ctx.jvm.org.apache.spark.sql.catalyst.TableIdentifier(table, ctx.jvm.scala.Some(database)))
    raw = table_raw(ctx, table_location(ctx, jtable), database, table, _query_schema(jcmd), lifecycle=lifecycle)
    return [attrs.evolve(hive_catalog(ctx, raw), suffix=_db_table_suffix(database, table))]


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
    "SaveAsV1TableCommand": _save_as_v1_table,
    "AppendData": _v2_write(None, suffix_with_catalog=True),
    "OverwriteByExpression": _v2_write("OVERWRITE", suffix_with_catalog=False),
    "OverwritePartitionsDynamic": _v2_write("OVERWRITE", suffix_with_catalog=False),
    "CreateTable": _v2_create("CREATE", schema_from="table"),
    "CreateTableAsSelect": _v2_create("CREATE", schema_from="query"),
    "ReplaceTable": _v2_create("OVERWRITE", schema_from="table"),
    "ReplaceTableAsSelect": _v2_create("OVERWRITE", schema_from="query"),
    "DropTable": _v2_drop,
}
