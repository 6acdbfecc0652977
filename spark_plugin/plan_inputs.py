"""Datasets of the relations (leaves) of a Spark optimized plan: :data:`INPUT_HANDLERS`, keyed by the node's
simple class name, and :data:`TARGET_FIELDS` (a command's write target, not walked for inputs)."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from emitter import naming
from spark_plugin import plan_tree
from spark_plugin.plan_context import (
    PlanContext,
    RawDataset,
    Schema,
    catalog_table_raw,
    hadoop_is_file,
    hive_catalog,
    path_raw,
)
from spark_plugin.plan_jdbc import jdbc_raws
from spark_plugin.plan_tree import PlanNode

log = logging.getLogger(__name__)


def _logical_relation(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``LogicalRelation``: catalog table, else HadoopFsRelation paths, else JDBC (JVM order)."""
    schema = plan_tree.output_schema(node.fields.get("output"))
    jnode = ctx.jvm_node(node)
    table_json = node.fields.get("catalogTable")
    if table_json:
        jtable = jnode.catalogTable().get()
        stats = _catalog_statistics(jnode, jtable, table_json)
        return [catalog_table_raw(ctx, jtable, table_json, schema=schema, input_stats=stats)]
    relation = jnode.relation()
    kind = relation.getClass().getSimpleName()
    if kind == "HadoopFsRelation":
        stats = _file_statistics(relation)
        return [attrs.evolve(r, input_stats=stats)
                for r in _file_raws(ctx, relation.location().rootPaths().mkString("\n"), schema)]
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


#: Spark's "size unknown" (``spark.sql.defaultSizeInBytes``, Long.MaxValue): no statistics (as the JVM).
_UNKNOWN_SIZE = 2**63 - 1


def _catalog_statistics(jnode: Any, jtable: Any, table_json: Any) -> tuple[tuple[str, int], ...]:
    """The JVM's inputStatistics of a catalog table's LogicalRelation: the catalog's statistics (size, and the
    file count Hive recorded) when it has any, else the relation's estimated size. The plan's JSON tells
    whether the table has statistics (an empty Option is left out of it): a table without any costs two py4j
    calls (~60 us, benchmarks/spark_input_statistics.py), not five."""
    try:
        if "stats" in table_json:
            # a Scala BigInt (py4j may hand it over as an int or as an object): its decimal text either way
            stats: tuple[tuple[str, int], ...] = (("size", int(str(jtable.stats().get().sizeInBytes()))),)
            files = jtable.ignoredProperties().get("numFiles")
            return stats + ((("fileCount", int(files.get())),) if files.isDefined() else ())
        size = int(jnode.relation().sizeInBytes())
    except Exception:  # noqa: BLE001 - statistics are a bonus: the dataset stays without them
        log.debug("cannot read the statistics of a catalog table", exc_info=True)
        return ()
    return (("size", size),) if size < _UNKNOWN_SIZE else ()


def _file_statistics(relation: Any) -> tuple[tuple[str, int], ...]:
    """The JVM's inputStatistics of a HadoopFsRelation: its size and file count (the file index's listing)."""
    try:
        return ("size", int(relation.sizeInBytes())), ("fileCount", len(relation.inputFiles()))
    except Exception:  # noqa: BLE001 - statistics are a bonus: the dataset stays without them
        log.debug("cannot read the statistics of a file relation", exc_info=True)
        return ()


def _file_raws(ctx: PlanContext, root_paths: str, schema: Schema | None) -> list[RawDataset]:
    """One single file -> that file; otherwise each root path's directory (files -> their parent)."""
    paths = [naming.escape_literal_path(p) for p in root_paths.split("\n") if p]
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
    except Exception:  # noqa: BLE001 - a relation without a file index: no root paths
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
    stack: list[Any] = [rdd]
    seen: set[Any] = set()
    while stack and len(seen) < MAX_WALKED_NODES:
        current = stack.pop()
        if current.id() in seen:
            continue
        seen.add(current.id())
        yield current
        dependencies = current.dependencies().iterator()
        while dependencies.hasNext():
            stack.append(dependencies.next().rdd())


def _rdd_input_dirs(rdd: Any, jvm: Any) -> list[str]:
    """Directories of the files an RDD lineage reads: FileScanRDD's files (their parent directories),
    HadoopRDD's and NewHadoopRDD's input paths as directories (the JVM's ``RddDatasetInfoExtractor``)."""
    dirs: dict[str, None] = {}
    for current in _rdd_lineage(rdd):
        kind = current.getClass().getSimpleName()
        if kind == "FileScanRDD":
            partitions = current.filePartitions().iterator()
            while partitions.hasNext():
                for file in partitions.next().files():
                    dirs[naming.escape_literal_path(file.toPath().getParent().toString())] = None
        elif kind in ("HadoopRDD", "NewHadoopRDD"):
            conf = current.getJobConf() if kind == "HadoopRDD" else current.getConf()
            for directory in _directories(jvm, conf, hadoop_input_paths(str(conf.get(_HADOOP_INPUT_DIR) or ""))):
                dirs[naming.escape_literal_path(directory)] = None
    return list(dirs)


def hadoop_input_paths(value: str) -> list[str]:
    """The paths of a Hadoop input directory setting, as ``FileInputFormat.getInputPaths`` reads it: split on the
    commas no backslash escapes, ``\\,`` and ``\\\\`` unescaped. A brace glob's commas are escaped there
    (``sc.textFile("/in/{2020,2021}")`` stores ``/in/{2020\\,2021}``)."""
    paths, current, escaped = [], [], False
    for char in value:
        if escaped:
            current.append(char if char in ",\\" else "\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            paths.append("".join(current))
            current = []
        else:
            current.append(char)
    paths.append("".join(current) + ("\\" if escaped else ""))
    return [path for path in paths if path.strip()]


def _directories(jvm: Any, conf: Any, paths: list[str]) -> list[str]:
    """The JVM's ``PlanUtils.getDirectoryPaths``: a file's parent directory, anything else (a directory, or a glob,
    which has no status) itself; a path whose parent is listed already is not looked at."""
    out: dict[str, None] = {}
    for text in paths:
        path = jvm.org.apache.hadoop.fs.Path(text)
        parent = path.getParent()
        if parent is None or parent.toString() in out:
            continue
        out[(parent if hadoop_is_file(path, conf) else path).toString()] = None
    return list(out)


def _logical_rdd(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``LogicalRDD``/``ExternalRDD`` (a DataFrame made from an RDD, e.g. ``df.rdd.map(...).toDF()``): the
    file directories its RDD lineage reads, without a schema (the JVM's ``LogicalRDDVisitor``). An RDD of
    local data (``parallelize``) reads none."""
    out: dict[tuple[str, str], RawDataset] = {}
    for directory in _rdd_input_dirs(ctx.jvm_node(node).rdd(), ctx.jvm):
        raw = path_raw(directory)
        out.setdefault((raw.namespace, raw.name), raw)
    return list(out.values())


#: Physical leaves that wrap a plan (adaptive execution, which a cached plan over a cached DataFrame or an
#: exchange gets): the plan they wrap, where the logical links are.
_WRAPPED_PLANS = {"AdaptiveSparkPlanExec": "inputPlan", "TableCacheQueryStageExec": "plan",
                  "ShuffleQueryStageExec": "plan", "BroadcastQueryStageExec": "plan"}


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
        wrapped = _WRAPPED_PLANS.get(current.getClass().getSimpleName())
        if wrapped is not None:
            stack.append(getattr(current, wrapped)())
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
        # one record for the action, whatever the depth (a cache of a cached DataFrame)
        sub_ctx.cached_plans, sub_ctx.cached_reads = ctx.cached_plans, ctx.cached_reads
        ctx.cached_plans.setdefault(id(node), []).append((sub_root, sub_ctx.nodes))
        for sub in plan_tree.walk(sub_root):
            handler = INPUT_HANDLERS.get(sub.name)
            if handler is not None:
                raws = handler(sub_ctx, sub)
                ctx.cached_reads.append((sub, raws))
                out.extend(raws)
    return out


def _load_data_path(ctx: PlanContext, node: PlanNode) -> list[RawDataset]:
    """``LoadDataCommand``'s input: the loaded path (the JVM's ``LoadDataCommandInputVisitor``)."""
    path = node.fields.get("path")
    return [path_raw(naming.escape_literal_path(path))] if isinstance(path, str) and path.strip() else []


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
