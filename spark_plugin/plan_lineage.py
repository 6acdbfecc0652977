"""One Spark action's lineage: job name part, input/output datasets, SQL text, processing type.

:func:`action_lineage` reads the ``QueryExecution`` a ``QueryExecutionListener`` receives and returns
what the JVM OpenLineage integration would put in that action's events, or None for the actions it
does not emit. Cost: one ``toJSON()`` of the optimized plan plus a few targeted py4j calls per
relation and per output (each ~40 us), never a node-by-node walk.
"""
from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
from py4j.protocol import Py4JNetworkError

from emitter import naming
from emitter.deferred import facet_v2
from emitter.naming.resolvers import NamespaceResolver, java_regex, namespace_resolvers, resolve_namespace
from emitter.records import Dataset
from spark_plugin import plan_tree
from spark_plugin.config import jvm_list
from spark_plugin.facets import UNKNOWN_TIME, timed  # the debug facet's timer (a no-op unless it is on)
from spark_plugin.guard import short_error
from spark_plugin.plan_context import PlanContext, RawDataset
from spark_plugin.plan_inputs import INPUT_HANDLERS, TARGET_FIELDS
from spark_plugin.plan_outputs import OUTPUT_HANDLERS
from spark_plugin.plan_tree import PlanNode

if TYPE_CHECKING:  # the real classes for the type checker; at run time their deferred constructors (emitter.deferred)
    from openlineage.client.facet_v2 import (
        datasource_dataset,
        input_statistics_input_dataset,
        lifecycle_state_change_dataset,
        output_statistics_output_dataset,
        symlinks_dataset,
    )
else:
    datasource_dataset, symlinks_dataset = facet_v2.datasource_dataset, facet_v2.symlinks_dataset
    lifecycle_state_change_dataset = facet_v2.lifecycle_state_change_dataset
    input_statistics_input_dataset = facet_v2.input_statistics_input_dataset
    output_statistics_output_dataset = facet_v2.output_statistics_output_dataset

log = logging.getLogger(__name__)

__all__ = ["ActionLineage", "action_lineage"]

#: Optimized-plan roots the JVM integration does not emit (its ``SparkNodesFilter`` and
#: ``CreateViewFilter``): pure reads (``count()`` is an Aggregate, ``toPandas``/``show`` of a
#: projection a Project) and catalog bookkeeping. Project is kept for streaming plans (a
#: foreachBatch sink's plan starts with one and carries the stream's input).
FILTERED_ROOTS: frozenset[str] = frozenset(
    {
        "org.apache.spark.sql.catalyst.plans.logical.ShowTables",
        "org.apache.spark.sql.catalyst.plans.logical.CreateNamespace",
        "org.apache.spark.sql.catalyst.plans.logical.SetCatalogAndNamespace",
        "org.apache.spark.sql.catalyst.plans.logical.Project",
        "org.apache.spark.sql.catalyst.plans.logical.Aggregate",
        "org.apache.spark.sql.catalyst.plans.logical.Repartition",
        "org.apache.spark.sql.execution.command.CreateDatabaseCommand",
        "org.apache.spark.sql.execution.command.RefreshTableCommand",
        "org.apache.spark.sql.catalyst.plans.logical.LocalRelation",
        "org.apache.spark.sql.execution.command.CreateViewCommand",
    }
)
_KEPT_WHEN_STREAMING = frozenset({"org.apache.spark.sql.catalyst.plans.logical.Project"})

# Nested executions (Spark 3.4+). A CTAS runs its write as a SQL execution of its own inside the command's
# (SPARK-41713), and Spark 4's saveAsTable adds one more level (SaveAsV1TableCommand runs the CTAS). The JVM
# integration makes one run per SQL execution (OpenLineageSparkListener -> one SparkSQLExecutionContext per
# execution id, no rootExecutionId check, no filter for nested ones), each named from its own executed plan
# (JobNameBuilder, cached per execution), so it emits every level; its CTAS fixtures (pysparkCTAS*, OCTAS*) had
# the job name and lifecycle removed in its Spark 3.4 commit so that the inner insert's events match them. Per
# execution, inner first (the order the listener reports them), `t` a managed table of `default`:
#
# | action (Spark)                      | runs the JVM emits                                   | output of each run   |
# |-------------------------------------|------------------------------------------------------|----------------------|
# | CTAS USING parquet (3.5, 4.x)       | execute_insert_into_hadoop_fs_relation_command.      | path, OVERWRITE, no  |
# |                                     |   warehouse_t                                        |   symlink (*)        |
# |                                     | execute_create_data_source_table_as_select_command.  | table + symlink,     |
# |                                     |   default_t                                          |   CREATE             |
# | saveAsTable new / overwrite (3.5)   | the same two (overwrite drops and re-creates)        | the same             |
# | saveAsTable append, table exists    | insert (catalogTable set: symlink, no state), CTAS   | CTAS: CREATE (JVM)   |
# | saveAsTable any mode (4.x)          | the same, then execute_save_as_v1_table_command      | none: no visitor, a  |
# |                                     |   (no suffix)                                        |   leaf: no inputs    |
# | CTAS STORED AS textfile (Hive)      | execute_insert_into_hive_table.warehouse_t           | symlink, no state    |
# |                                     | execute_create_hive_table_as_select_command.default_t| symlink, CREATE      |
# | CTAS STORED AS parquet (Hive, conv.)| insert_into_hadoop_fs_relation (catalogTable set),   | symlink; CTAS CREATE |
# |                                     |   then the Hive CTAS                                 |                      |
# | INSERT [OVERWRITE] into a table     | one run, not nested                                  | symlink [+OVERWRITE] |
#
# (*) the one difference: the nested insert writes the table's default location before the table exists, so
# Spark gives it no catalogTable and the JVM no symlink; ours names the table there (plan_outputs
# ._default_location_table), so every write to a catalog table carries its symlink and its own lifecycle state.
#: Roots whose writes run as nested executions reported on their own (Spark 4's saveAsTable wrapper): as in the
#: JVM, which has no visitor for them and does not look into their query (a leaf), their run has no datasets.
DELEGATING_ROOTS = frozenset({"SaveAsV1TableCommand"})
#: Streaming leaves whose ``isStreaming`` is a constant (absent from their JSON): a micro-batch of a V2 source
#: (rate, Kafka...) is streaming like one of a file source's ``LogicalRelation(isStreaming=true)``.
_STREAMING_LEAVES = frozenset({"StreamingDataSourceV2Relation", "StreamingDataSourceV2ScanRelation"})

#: Spark SQL metric name -> outputStatistics field (BasicWriteJobStatsTracker's metrics).
_STAT_METRICS: tuple[tuple[str, str], ...] = (
    ("numOutputRows", "rowCount"),
    ("numOutputBytes", "size"),
    ("numFiles", "fileCount"),
)

_CONF = "spark.openlineage."


@attrs.frozen
class ReadPlan:
    """An optimized plan read once: its JVM object, its ``toJSON()`` (None when Spark cannot serialize it) and
    the tree parsed from it. ``toJSON()`` is most of what reading an action's lineage costs (50 ms for a join and
    an aggregate): the plan read for an action's START is reused at its end (Spark's plans are immutable)."""

    jplan: Any
    json: Any
    root: PlanNode
    #: the JVM objects of its nodes the handlers reached (its START's reads make its end's free)
    nodes: plan_tree.JvmNodes = attrs.field(eq=False, repr=False)

    #: what was read of the action's logical plan at its START, for its end: its ``sql`` text (see _sql_text)
    logical: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)
    #: the datasets of its relations (:data:`_REREAD_FREE` nodes, by node identity) its START read, for its end:
    #: ~9 py4j calls a file relation (paths, size, file count), 1,350 for a union of 150 reads
    relations: dict[int, list[RawDataset]] = attrs.field(factory=dict, eq=False, repr=False)

    @nodes.default
    def _nodes(self) -> plan_tree.JvmNodes:
        return plan_tree.JvmNodes(self.jplan)


def read_plan(qe: Any, func_name: str = "", jplan: Any = None) -> ReadPlan:
    """The optimized plan of ``qe`` (``jplan`` when given), read with one ``toJSON()``."""
    jplan = jplan if jplan is not None else qe.optimizedPlan()
    try:
        plan_json = json.loads(jplan.toJSON())
        return ReadPlan(jplan, plan_json, plan_tree.parse(plan_json))
    except Py4JNetworkError:
        raise  # the JVM is gone: nothing to report
    except Exception as error:  # noqa: BLE001 - a node Spark cannot serialize: name the action, report no datasets
        # (a Py4JJavaError, or the SparkRuntimeException PySpark's handler converts it to: ml's KMeans plans hold
        # Scala reflection types toJSON() cannot write). Spark's limit, not the application's: INFO, not WARN.
        log.info("cannot serialize the plan of %s (%s): reported without datasets", func_name or "an action",
                 type(error).__name__)
        log.debug("plan serialization failure", exc_info=True)
        return ReadPlan(jplan, None, PlanNode(jplan.getClass().getName(), {}, (), (), ()))


@attrs.frozen
class ActionLineage:
    """What one Spark action contributes to its OpenLineage events."""

    #: normalized executed-plan root node name (``execute_insert_into_hadoop_fs_relation_command``)
    command: str
    #: ``{command}.{table}`` or ``{command}``; the action job name is ``{app}.{job_suffix}``
    job_suffix: str
    inputs: tuple[Dataset, ...]
    outputs: tuple[Dataset, ...]
    #: SQL text when the action came from ``spark.sql(...)``
    sql: str | None
    processing_type: str  # BATCH or STREAMING
    #: the optimized plan's JSON when the ``spark.logicalPlan`` facet is enabled
    logical_plan: Any = None
    #: the ``spark_unknown`` facet's content when enabled
    unknown: Any = None
    #: the plan it was read from (to read the same action again without another ``toJSON()``)
    plan: ReadPlan | None = attrs.field(default=None, eq=False, repr=False)


def action_lineage(qe: Any, spark_conf: Mapping[str, str], *, func_name: str = "",
                   strict: bool = False, plan: ReadPlan | None = None) -> ActionLineage | None:
    """Lineage of the action behind ``qe`` (a py4j ``QueryExecution``), or None if the JVM
    integration would not emit it (see :data:`FILTERED_ROOTS`).

    ``spark_conf`` is the flat Spark conf; read here: ``spark.openlineage.jobName.appendDatasetName``,
    ``jobName.replaceDotWithUnderscore``, ``dataset.removePath.pattern``, ``facets.<name>.disabled``.
    A relation or command whose details cannot be read is logged and skipped (``strict``: raises, for a
    plan read while its action still runs); py4j errors on the plan itself (a dead JVM) propagate.
    ``plan``: ``qe``'s plan as read before (:attr:`ActionLineage.plan` of its START).
    """
    if plan is None:
        jplan = qe.optimizedPlan()
        if _filtered_unread(jplan, spark_conf):
            return None
        plan = read_plan(qe, func_name, jplan)
    jplan, plan_json, root = plan.jplan, plan.json, plan.root
    nodes = list(plan_tree.walk(root))
    streaming = any(n.fields.get("isStreaming") is True or n.name in _STREAMING_LEAVES for n in nodes)
    if _filtered(root.cls, streaming, spark_conf):
        return None

    ctx = PlanContext(qe, root, jplan, spark_conf, plan.nodes)
    executed, executed_name = _executed_root(qe)
    command = naming.normalize_name(executed_name)  # the JVM's JobNameBuilder
    if _flag(spark_conf, "jobName.replaceDotWithUnderscore", False):
        command = command.replace(".", "_")

    outputs = _safe(OUTPUT_HANDLERS.get(root.name), ctx, root, strict) if root.name in OUTPUT_HANDLERS else []
    inputs: list[RawDataset] = []
    read_by: list[tuple[PlanNode, list[RawDataset]]] = []  # relation -> its datasets (column lineage)
    for node in _input_nodes(root):
        raws = plan.relations.get(id(node)) if node.name in _REREAD_FREE else None
        if raws is None:
            raws = _safe(INPUT_HANDLERS[node.name], ctx, node, strict)
            if raws and node.name in _REREAD_FREE:
                plan.relations[id(node)] = raws
        read_by.append((node, raws))
        inputs.extend(raws)

    suffix = next((o.suffix for o in outputs if o.suffix), None)
    job_suffix = command
    if suffix and _flag(spark_conf, "jobName.appendDatasetName", True):
        job_suffix = f"{command}.{suffix.replace('.', '_')}"

    stats = _output_statistics(executed) if outputs else None
    facets = _FacetBuilder(spark_conf)
    output_datasets = [facets.dataset(r, stats if i == 0 else None) for i, r in enumerate(_dedupe(outputs))]
    if output_datasets and output_datasets[0].facets.get("schema") is not None and facets.enabled("columnLineage"):
        # a cached relation's datasets (Spark 3.5) are read by the relations of its plans, not by its attributes
        leaf_reads = [(n, r) for n, r in [*read_by, *ctx.cached_reads] if id(n) not in ctx.cached_plans]
        output_datasets[0] = _with_column_lineage(output_datasets[0], plan.nodes, root, leaf_reads, facets,
                                                  ctx.cached_plans)
    return ActionLineage(
        command=command,
        job_suffix=job_suffix,
        inputs=tuple(facets.dataset(r) for r in _dedupe(inputs)),
        outputs=tuple(output_datasets),
        sql=_plan_sql(plan, qe),
        processing_type="STREAMING" if streaming else "BATCH",
        logical_plan=plan_json if plan_json is not None and jvm_facet_enabled(spark_conf, LOGICAL_PLAN) else None,
        unknown=timed(UNKNOWN_TIME, _unknown_entries, root, read_by)
        if jvm_facet_enabled(spark_conf, UNKNOWN) else None,
        plan=plan,
    )


UNKNOWN = "spark_unknown"


def _attribute_fields(trees: list[PlanNode]) -> list[dict[str, Any]]:
    out = []
    for tree in trees:
        if tree.name == "AttributeReference":
            datatype = tree.fields.get("dataType")
            type_name = datatype if isinstance(datatype, str) else (datatype or {}).get("type")
            metadata = tree.fields.get("metadata")
            out.append({"name": tree.fields.get("name"), "type": type_name,
                        "metadata": metadata if isinstance(metadata, dict) else {}})
    return out


def _node_output(node: PlanNode) -> list[dict[str, Any]]:
    depth = len(node.path)
    return _attribute_fields([t for t in node.nested if t.path[depth:depth + 1] == (("f", "output"),)])


def _entry(node: PlanNode, inputs: list[dict[str, Any]]) -> dict[str, Any]:
    description = {"class": node.cls, **{k: v for k, v in node.fields.items() if k != "data"}}
    return {"description": description, "inputAttributes": inputs, "outputAttributes": _node_output(node)}


def _unknown_entries(root: PlanNode, read_by: list[tuple[PlanNode, list[RawDataset]]]) -> dict[str, Any] | None:
    """The JVM's ``spark_unknown`` facet: the plan's root and leaves that no dataset builder handled, each with
    its node (as Spark's JSON), the attributes it reads (its children's output) and those it produces."""
    handled = {node.path for node, _ in read_by}
    leaves = [n for n in plan_tree.walk(root) if not n.children and n.path not in handled
              and not n.cls.startswith("org.apache.spark.sql.catalyst.expressions")
              and root.name not in DELEGATING_ROOTS]  # the JVM does not look into those (leaf commands)
    output = None
    if root.name not in OUTPUT_HANDLERS:
        output = _entry(root, [a for child in root.children for a in _node_output(child)])
    inputs = [_entry(leaf, []) for leaf in leaves if leaf is not root]
    if output is None and not inputs:
        return None
    return {"output": output, "inputs": inputs}




#: Run facets the JVM integration disables unless configured (its ``facets.disabled`` default).
JVM_DEFAULT_DISABLED = ("spark_unknown", "spark.logicalPlan", "debug")
LOGICAL_PLAN = "spark.logicalPlan"


def _filtered(root_class: str, streaming: bool, conf: Mapping[str, str]) -> bool:
    """The JVM's ``SparkNodesFilter``: a plan whose root is in :data:`FILTERED_ROOTS` is not emitted, unless the
    root's class is in ``filter.allowedSparkNodes``; one in ``filter.deniedSparkNodes`` is filtered too (both
    ``[a;b]`` lists of class names). A streaming plan keeps a Project root and ignores both lists, as there."""
    if streaming:
        return root_class in FILTERED_ROOTS and root_class not in _KEPT_WHEN_STREAMING
    if root_class in _conf_list(conf, "filter.allowedSparkNodes"):
        return False
    return root_class in FILTERED_ROOTS or root_class in _conf_list(conf, "filter.deniedSparkNodes")


#: :data:`FILTERED_ROOTS` by node name (a logical plan node's ``nodeName`` is its class's simple name).
_FILTERED_NODE_NAMES = frozenset(name.rsplit(".", 1)[1] for name in FILTERED_ROOTS)


def _filtered_unread(jplan: Any, conf: Mapping[str, str]) -> bool:
    """:func:`_filtered` asked of the JVM before the plan is read: an action the JVM integration does not emit
    (``count()``, ``collect()`` of a projection, ``show()``: Aggregate, Project, LocalRelation roots) costs one py4j
    call (``nodeName``; four when filtered) instead of its plan's ``toJSON()`` (~2 ms of a py4j thread, and the
    Scala reflection code it runs, which the JIT then compiles). A streaming plan, or one that cannot be asked, is
    left to :func:`_filtered` on its read plan (its streaming leaves are found there)."""
    try:
        if jplan.nodeName() not in _FILTERED_NODE_NAMES and not _conf_list(conf, "filter.deniedSparkNodes"):
            return False
        return _filtered(jplan.getClass().getName(), False, conf) and not jplan.isStreaming()
    except Py4JNetworkError:
        raise  # the JVM is gone: nothing to report
    except Exception:  # noqa: BLE001 - a plan node without these methods: decided on the read plan instead
        return False


def _conf_list(conf: Mapping[str, str], key: str) -> list[str]:
    return jvm_list(conf.get(_CONF + key))


def jvm_facet_enabled(conf: Mapping[str, str], name: str) -> bool:
    """The JVM's ``FacetUtils.isFacetDisabled`` negated: ``facets.<name>.disabled`` when set, else whether
    ``name`` is missing from ``facets.disabled`` (``[a;b]``; default: :data:`JVM_DEFAULT_DISABLED`)."""
    own = conf.get(f"{_CONF}facets.{name}.disabled")
    if own is not None:
        return str(own).strip().lower() != "true"
    disabled = JVM_DEFAULT_DISABLED if conf.get(_CONF + "facets.disabled") is None else _conf_list(
        conf, "facets.disabled")
    return name not in disabled


#: the JVM's ``columnLineage.schemaSizeLimit`` default: outputs with more top-level fields get no column lineage
SCHEMA_SIZE_LIMIT = 1000




def _with_column_lineage(output: Dataset, nodes: plan_tree.JvmNodes, root: PlanNode,
                         read_by: list[tuple[PlanNode, list[RawDataset]]], facets: _FacetBuilder,
                         cached_plans: Mapping[int, list[tuple[PlanNode, plan_tree.JvmNodes]]]) -> Dataset:
    """``output`` with the ``columnLineage`` facet (see :mod:`spark_plugin.column_lineage`); as it was when
    the plan cannot be traced. ``cached_plans``: :attr:`PlanContext.cached_plans`."""
    from spark_plugin import column_lineage

    try:
        names = [f.name for f in output.facets["schema"].fields]
        if len(names) > facets.number("columnLineage.schemaSizeLimit", SCHEMA_SIZE_LIMIT):
            return output  # the JVM's limit: no column lineage for wider outputs (checked before any work)
        leaves: dict = {}  # a relation's attribute -> the input fields it reads, from each of its datasets
        for node, raws in read_by:
            for raw in raws:
                found = column_lineage.leaf_fields(node, facets.namespace(raw.namespace), facets._name(raw.name),
                                                   raw.columns)
                for ident, fields in found.items():
                    leaves.setdefault(ident, []).extend(fields)
        # the JVM's defaults: descriptions off, dataset-wide inputs in the facet's `dataset` list
        facet = column_lineage.build(nodes, root, leaves, names,
                                     descriptions=facets.flag("columnLineage.descriptionsEnabled", False),
                                     dataset_lineage=facets.flag("columnLineage.datasetLineageEnabled", True),
                                     cached_plans=cached_plans)
    except Exception:  # noqa: BLE001 - column lineage is a bonus: the datasets stay
        log.debug("cannot trace the columns of %s", root.cls, exc_info=True)
        return output
    if facet is None:
        return output
    return Dataset(output.namespace, output.name, facets={**output.facets, "columnLineage": facet},
                   io_facets=output.io_facets)


def _input_nodes(root: PlanNode) -> list[PlanNode]:
    """Relations anywhere in the plan (children and nested trees), except a write command's target; none
    under a :data:`DELEGATING_ROOTS` command (its nested executions report them)."""
    if root.name in DELEGATING_ROOTS:
        return []
    skip = TARGET_FIELDS.get(root.name, frozenset())
    depth = len(root.path)
    trees = [root] if not skip else [*root.children, *(t for t in root.nested if t.path[depth][1] not in skip)]
    return [node for tree in trees for node in plan_tree.walk(tree) if node.name in INPUT_HANDLERS]


#: Relations whose datasets an action's end takes from its START: their handlers only read the node (no PlanContext
#: state, unlike a cached relation's), and what they read is fixed when the plan is analyzed (the file index's
#: listing, the catalog table's snapshot), so the end would read the same again.
_REREAD_FREE = frozenset({"LogicalRelation"})


def _safe(handler: Any, ctx: PlanContext, node: PlanNode, strict: bool = False) -> list[RawDataset]:
    try:
        return list(handler(ctx, node))
    except Exception as error:  # one unreadable relation must not lose the action's other datasets
        if strict:
            raise
        log.warning("lineage capture: cannot read the datasets of %s (%s: %s)", node.cls, type(error).__name__,
                    short_error(error), exc_info=log.isEnabledFor(logging.DEBUG))
        return []


def _dedupe(raws: list[RawDataset]) -> list[RawDataset]:
    seen: dict[tuple[str, str], RawDataset] = {}
    for raw in raws:
        seen.setdefault((raw.namespace, raw.name), raw)
    return list(seen.values())


#: Executed-plan wrappers that are not the action itself -> how to reach what they wrap. Spark 4 runs a
#: write under adaptive execution as AdaptiveSparkPlan -> ResultQueryStage -> Execute InsertInto...Command.
_PLAN_WRAPPERS = {
    "AdaptiveSparkPlan": lambda plan: plan.executedPlan(),  # the final plan, whose nodes hold the metrics
    "ResultQueryStage": lambda plan: plan.plan(),
    "WholeStageCodegen": lambda plan: plan.child(),  # nodeName "WholeStageCodegen (n)"
}


def _executed_root(qe: Any) -> tuple[Any, str]:
    """The executed plan's root with adaptive-execution and codegen wrappers removed, and its ``nodeName``. Read
    once an action: the job's name and the output statistics both come from it (2 py4j calls, not 5)."""
    plan = qe.executedPlan()
    for _ in range(8):  # wrappers nest a few levels at most
        name = plan.nodeName()
        unwrap = _PLAN_WRAPPERS.get(name.split(" (")[0])
        if unwrap is None:
            return plan, name
        plan = unwrap(plan)
    return plan, plan.nodeName()


#: How many nodes below a logical plan's root are asked for an SQL text (~6 py4j calls each) when the root has none.
#: The JVM asks every node; a DataFrame-API plan has none to find (every node is asked: 0.1 ms of CPU each, once per
#: action: its end reuses its START's answer), and a ``spark.sql`` DataFrame transformed further is found within a
#: few nodes.
SQL_SEARCH_NODES = 64


def _plan_sql(plan: ReadPlan, qe: Any) -> str | None:
    """:func:`_sql_text` once per plan: an action's end reuses what its START found."""
    if "sql" not in plan.logical:
        plan.logical["sql"] = _sql_text(qe, plan.root)
    return plan.logical["sql"]


def _sql_text(qe: Any, root: PlanNode) -> str | None:
    """The text given to ``spark.sql`` (Spark's parser records it in the origin of every node it builds): the
    logical plan's first node that has one, in the JVM's order (``SparkSQLExecutionContext.resolveSQLFacets``:
    the root, then depth first, last child first), e.g. below a CTE's ``WithCTE`` or in a ``spark.sql`` DataFrame
    filtered or joined further. A V1 CTAS command rebuilt by the analyzer has lost it on its root and holds its
    query as an inner child only: its query is searched as its child."""
    try:
        logical = qe.logical()
        text = _origin_sql(logical)
        if text is not None:
            return text
        below = _children(logical)
        if not below and "query" in root.fields:
            below = [logical.query]
        return _first_sql(below)
    except Exception:  # noqa: BLE001 - Spark without origins (< 3.4), or a command without a query accessor
        return None


def _first_sql(stack: list[Callable[[], Any]]) -> str | None:
    for _ in range(SQL_SEARCH_NODES):
        if not stack:
            return None
        node = stack.pop()()
        text = _origin_sql(node)
        if text is not None:
            return text
        stack.extend(_children(node))
    return None


def _origin_sql(node: Any) -> str | None:
    text = node.origin().sqlText()
    return text.get() if text.isDefined() else None


def _children(node: Any) -> list[Callable[[], Any]]:
    """Getters of ``node``'s children: a child is fetched (one py4j call) only if the search gets to it (a union of
    150 relations is not fetched whole when its last child has the text)."""
    children = node.children()
    return [functools.partial(children.apply, i) for i in range(children.size())]


#: One entry of a Scala ``Map[String, SQLMetric]``'s ``toString`` (``Map(`` or, Scala 2.13, ``HashMap(``), e.g.
#: ``numFiles -> SQLMetric(id: 12, name: Some(number of written files), value: 1)`` (AccumulatorV2's toString).
_METRIC_ENTRY = re.compile(r"(\w+) -> SQLMetric\(id: -?\d+, name: .*?, value: (-?\d+)\)(?=, \w+ -> |\)$)")


def _output_statistics(executed: Any) -> dict[str, int] | None:
    """rowCount/size/fileCount from the write node's SQL metrics (absent for non-writes). The metrics map is read
    as its ``toString`` (one py4j call, where asking each metric's Option takes four and leaves four proxies for
    py4j to release later); a text not in that form is asked metric by metric."""
    try:
        metrics = executed.metrics()
        values = _metric_values(str(metrics.toString()))
        if values is None:
            values = {}
            for metric, _ in _STAT_METRICS:
                value = metrics.get(metric)
                if value.isDefined():
                    values[metric] = str(value.get().value())
        stats = {field: int(values[metric]) for metric, field in _STAT_METRICS if metric in values}
        return stats or None
    except Exception:  # noqa: BLE001 - metrics this Spark does not have: no statistics
        return None


def _metric_values(text: str) -> dict[str, str] | None:
    """Metric name -> value from a metrics map's ``toString``; None unless every entry is in the form Spark 3.5 and
    4 give (:data:`_METRIC_ENTRY`)."""
    found = dict(_METRIC_ENTRY.findall(text))
    if len(found) != text.count(" -> ") or not text.endswith(")") or "Map(" not in text[:8]:
        return None
    return found


def _flag(conf: Mapping[str, str], key: str, default: bool) -> bool:
    value = conf.get(_CONF + key)
    return default if value is None else str(value).strip().lower() == "true"


#: ``spark.openlineage.dataset.namespaceResolvers.<name>.<setting>`` (the Java client's DatasetConfig).
_RESOLVERS = _CONF + "dataset.namespaceResolvers."
_RESOLVER_KEY = re.compile(r"(.+)\.(type|hosts|schema|regex|matchingGroup)")


def _namespace_resolvers(conf: Mapping[str, str]) -> tuple[NamespaceResolver, ...]:
    """The configured dataset namespace resolvers, in the order of their names."""
    entries = tuple(sorted((k[len(_RESOLVERS):], str(v)) for k, v in conf.items() if k.startswith(_RESOLVERS)))
    return _built_resolvers(entries) if entries else ()


@functools.lru_cache(maxsize=8)  # per configuration: read for every action, an invalid one is warned about once
def _built_resolvers(entries: tuple[tuple[str, str], ...]) -> tuple[NamespaceResolver, ...]:
    config: dict[str, dict[str, str]] = {}
    for key, value in entries:
        m = _RESOLVER_KEY.fullmatch(key)
        if m is not None:
            config.setdefault(m.group(1), {})[m.group(2)] = value
    resolvers: list[NamespaceResolver] = []
    for name, entry in config.items():
        try:
            resolvers.extend(namespace_resolvers({name: entry}))
        except ValueError as error:
            log.warning("lineage capture: %s; it is not applied", error)
    return tuple(resolvers)


class _FacetBuilder:
    """RawDataset -> emitter Dataset with facet_v2 facets, honouring disabled facets and removePath."""

    def __init__(self, conf: Mapping[str, str]) -> None:
        self._conf = conf
        self._disabled = set(_conf_list(conf, "facets.disabled"))
        pattern = conf.get(_CONF + "dataset.removePath.pattern")
        self._remove = java_regex(pattern) if pattern else None
        self._resolvers = _namespace_resolvers(conf)

    def namespace(self, namespace: str) -> str:
        """A dataset namespace as the configured resolvers name it (the JVM resolves every dataset's)."""
        return resolve_namespace(self._resolvers, namespace) if self._resolvers else namespace

    def enabled(self, facet: str) -> bool:
        return facet not in self._disabled and not _flag(self._conf, f"facets.{facet}.disabled", False)

    def flag(self, key: str, default: bool) -> bool:
        """A boolean ``spark.openlineage.<key>``."""
        return _flag(self._conf, key, default)

    def number(self, key: str, default: int) -> int:
        """An integer ``spark.openlineage.<key>``; ``default`` when unset or not a number."""
        try:
            return int(str(self._conf.get(_CONF + key, default)).strip())
        except ValueError:
            return default

    def _name(self, name: str) -> str:
        # the JVM's RemovePathPatternUtils: cut the "remove" group of the first match
        if self._remove is None:
            return name
        m = self._remove.search(name)
        if m is None or "remove" not in m.re.groupindex or not m.group("remove"):
            return name
        return name[: m.start("remove")] + name[m.end("remove") :]

    # stats: keyword arguments of OutputStatisticsOutputDatasetFacet (rowCount, size, ...)
    def dataset(self, raw: RawDataset, stats: dict[str, Any] | None = None) -> Dataset:
        facets: dict[str, Any] = {}
        namespace = self.namespace(raw.namespace)
        if self.enabled("dataSource"):
            facets["dataSource"] = datasource_dataset.DatasourceDatasetFacet(name=namespace, uri=namespace)
        if raw.schema is not None and self.enabled("schema"):
            facets["schema"] = raw.schema
        if raw.symlink is not None and self.enabled("symlinks"):
            facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
                identifiers=[symlinks_dataset.Identifier(namespace=raw.symlink[0], name=raw.symlink[1], type="TABLE")]
            )
        if raw.catalog is not None and self.enabled("catalog"):
            facets["catalog"] = raw.catalog
        if raw.lifecycle is not None and self.enabled("lifecycleStateChange"):
            previous = None
            if raw.previous is not None:
                previous = lifecycle_state_change_dataset.PreviousIdentifier(
                    name=raw.previous[1], namespace=raw.previous[0]
                )
            facets["lifecycleStateChange"] = lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
                lifecycleStateChange=lifecycle_state_change_dataset.LifecycleStateChange(raw.lifecycle),
                previousIdentifier=previous,
            )
        io_facets: dict[str, Any] = {}
        if raw.input_stats and self.enabled("inputStatistics"):
            read = dict(raw.input_stats)
            io_facets["inputStatistics"] = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
                size=read.get("size"), fileCount=read.get("fileCount"))
        if stats and self.enabled("outputStatistics"):
            io_facets["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(**stats)
        return Dataset(namespace, self._name(raw.name), facets=facets, io_facets=io_facets)
