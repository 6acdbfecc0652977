"""The ``columnLineage`` dataset facet of an action's output, as the JVM integration builds it.

Read from the same ``toJSON()`` tree as the datasets (expressions are nested trees there). As the JVM's
``ExpressionTraverser`` does, every attribute (``exprId``) an operator defines gets its dependencies by walking
its expression, each step adding its transformation:

- ``Alias``: IDENTITY; an aggregate function: AGGREGATION; ``CASE WHEN`` / ``IF``: their conditions INDIRECT
  CONDITIONAL, their values TRANSFORMATION; ``COALESCE``: each argument both; a window function: its
  argument TRANSFORMATION (none for rank-like functions), its ``PARTITION BY`` / ``ORDER BY`` INDIRECT WINDOW;
  ``explode`` and other generators: TRANSFORMATION; anything else TRANSFORMATION, masking for hash functions,
  ``count`` and ``mask`` (the JVM's list);
- for the whole dataset: FILTER (``WHERE``), JOIN (``ON``), GROUP_BY (no GROUP BY of a ``UNION``'s
  distinct) and SORT, listed in the facet's ``dataset`` as the JVM does by default
  (``columnLineage.datasetLineageEnabled`` unset or true); with it false, added to every output field that has
  inputs of its own. No facet when no output field has inputs of its own.

Along a path, the first INDIRECT step from the output wins, else the strongest DIRECT one (AGGREGATION over
TRANSFORMATION over IDENTITY); masking if any step masks. An input field reached by paths with different
transformations lists each. Each output field (the write's query output by position, named as the output
schema; by name when a ``Generate``'s dropped columns make the count differ) is traced back to the attributes
of the input relations. Descriptions, as the JVM, only with
``columnLineage.descriptionsEnabled=true`` (else ``""``): Spark's own ``Expression.sql`` of the optimized plan,
one py4j call each, so they cost nothing when off. Disabled by ``facets.columnLineage.disabled``.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from emitter.deferred import facet_v2
from spark_plugin import plan_tree
from spark_plugin.plan_tree import PlanNode

if TYPE_CHECKING:  # the real classes for the type checker; at run time their deferred constructors (emitter.deferred)
    from openlineage.client.facet_v2 import column_lineage_dataset as cl
else:
    cl = facet_v2.column_lineage_dataset

#: (type, subtype, description, masking)
Transformation = tuple[str, str, str, bool]
#: ExprId as (id, jvmId) so attributes of two JVMs' plans never collide
ExprId = tuple[int, str]
Field = tuple[str, str, str]  # (namespace, dataset name, field)
#: id() of a Spark 3.5 InMemoryRelation -> the logical plans it was built from, each with its JVM objects
CachedPlans = Mapping[int, list[tuple[PlanNode, plan_tree.JvmNodes]]]

#: the JVM's ``TransformationInfo.Subtypes`` order of the DIRECT subtypes: the lower one wins a merge
_DIRECT_ORDER = {"AGGREGATION": 0, "TRANSFORMATION": 1, "IDENTITY": 2}
IDENTITY: Transformation = ("DIRECT", "IDENTITY", "", False)
TRANSFORMATION: Transformation = ("DIRECT", "TRANSFORMATION", "", False)
MASKING: Transformation = ("DIRECT", "TRANSFORMATION", "", True)
AGGREGATION: Transformation = ("DIRECT", "AGGREGATION", "", False)
CONDITIONAL: Transformation = ("INDIRECT", "CONDITIONAL", "", False)
WINDOW: Transformation = ("INDIRECT", "WINDOW", "", False)

_EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions."
#: the JVM's ``ExpressionTraverser`` masking expressions (exact classes)
MASKING_CLASSES = frozenset(_EXPRESSIONS + name for name in (
    "Crc32", "HiveHash", "Md5", "Murmur3Hash", "Sha1", "Sha2", "XxHash64", "aggregate.Count", "Mask"))
#: window functions whose children are the window's ORDER BY (RankLike, RowNumberLike): no direct input
RANK_LIKE = frozenset({"Rank", "DenseRank", "PercentRank", "RowNumber", "CumeDist", "NTile"})


def merge(near: Transformation, far: Transformation) -> Transformation:
    """Two steps of one path (``near`` closer to the output) as one, by the JVM's ``TransformationInfo.merge``:
    an INDIRECT near step wins, then an INDIRECT far one, then the lower DIRECT subtype; masking if either is."""
    if near[0] == "INDIRECT":
        chosen = near
    elif far[0] == "INDIRECT" or _DIRECT_ORDER.get(far[1], 2) < _DIRECT_ORDER.get(near[1], 2):
        chosen = far
    else:
        chosen = near
    return chosen[0], chosen[1], chosen[2] or near[2], near[3] or far[3]


def _expr_id(node: PlanNode) -> ExprId | None:
    ident = node.fields.get("exprId")
    if isinstance(ident, Mapping) and "id" in ident:
        return int(ident["id"]), str(ident.get("jvmId", ""))
    return None


def _expressions(node: PlanNode, field: str) -> list[PlanNode]:
    """The expression trees held in one field of a plan node (a Seq of trees, or one tree)."""
    return [tree for tree in node.nested if len(tree.path) > len(node.path)
            and tree.path[len(node.path)] == ("f", field)]


def _steps(tree: PlanNode) -> Iterable[tuple[PlanNode, Transformation]]:
    """The children of an expression to walk, each with the transformation of that step (the JVM's
    expression visitors, then its generic rule)."""
    name, kids = tree.name, tree.children
    if name == "Alias":
        return [(kids[0], IDENTITY)] if kids else []
    if name == "CaseWhen":  # children: condition, value, condition, value, ..., [else]
        pairs = len(kids) // 2
        return [*((c, CONDITIONAL) for c in kids[0:2 * pairs:2]),
                *((v, TRANSFORMATION) for v in [*kids[1:2 * pairs:2], *kids[2 * pairs:]])]
    if name == "If" and len(kids) == 3:
        return [(kids[0], CONDITIONAL), (kids[1], TRANSFORMATION), (kids[2], TRANSFORMATION)]
    if name == "Coalesce":
        return [(k, t) for k in kids for t in (CONDITIONAL, TRANSFORMATION)]
    if name == "AggregateExpression":  # the function, not its FILTER
        return [(kids[0], AGGREGATION)] if kids else []
    if name == "WindowExpression" and len(kids) == 2:
        function, spec = kids
        direct = [] if function.name in RANK_LIKE else [(function, TRANSFORMATION)]
        return [*direct, *((k, WINDOW) for k in spec.children)]
    step = MASKING if tree.cls in MASKING_CLASSES else TRANSFORMATION
    return [(k, step) for k in kids]


class _Builder:
    def __init__(self, nodes: plan_tree.JvmNodes, leaves: Mapping[ExprId, list[Field]], descriptions: bool,
                 cached_plans: CachedPlans) -> None:
        self._nodes = nodes
        # Spark 3.5: id() of an InMemoryRelation -> the plans it was built from, with their own JVM objects
        self._cached_plans = cached_plans
        self._leaves = leaves  # input attribute -> the (namespace, name, field)s it reads
        self._descriptions = descriptions
        self.direct: dict[ExprId, list[tuple[ExprId, Transformation]]] = {}
        self.dataset: list[ExprId] = []  # targets of the dataset-wide dependencies (WHERE, JOIN ON, ...)
        self._ids = itertools.count(-1, -1)
        self._memo: dict[ExprId, dict[Field, list[Transformation]]] = {}

    def _sql(self, tree: PlanNode) -> str:
        if not self._descriptions:
            return ""
        try:
            return str(self._nodes.get(tree.path).sql())
        except Exception:  # noqa: BLE001 - an expression without SQL form: no description
            return ""

    def _sqls(self, trees: list[PlanNode], separator: str) -> str:
        parts = [self._sql(t) for t in trees]
        return separator.join(parts) if all(parts) else ""

    def _walk(self, tree: PlanNode, target: ExprId, transformation: Transformation) -> None:
        if tree.name == "AttributeReference":
            ident = _expr_id(tree)
            if ident is not None and ident != target:
                self.direct.setdefault(target, []).append((ident, transformation))
            return
        for child, step in _steps(tree):
            self._walk(child, target, merge(transformation, step))

    def _named(self, trees: list[PlanNode]) -> None:
        """Project/Aggregate/Window expressions: each defines the attribute of its ``exprId``."""
        for tree in trees:
            target = _expr_id(tree)
            if target is not None and tree.name != "AttributeReference":
                self._walk(tree, target, ("DIRECT", "IDENTITY", self._sql(tree), False))

    def _dataset_wide(self, trees: list[PlanNode], subtype: str, description: str) -> None:
        target = (next(self._ids), "")
        self.dataset.append(target)
        for tree in trees:
            self._walk(tree, target, ("INDIRECT", subtype, description, False))

    def visit(self, node: PlanNode) -> None:
        name = node.name
        if name == "Project":
            self._named(_expressions(node, "projectList"))
        elif name == "Aggregate":
            self._aggregate(node)
        elif name == "Window":
            self._named(_expressions(node, "windowExpressions"))
        elif name == "Generate":
            self._generate(node)
        elif name == "Filter":
            for condition in _expressions(node, "condition"):
                sql = self._sql(condition)
                self._dataset_wide([condition], "FILTER", f"WHERE {sql}" if sql else "")
        elif name == "Join":
            for condition in _expressions(node, "condition"):
                sql = self._sql(condition)
                kind = self._join_type(node) if sql else ""
                self._dataset_wide([condition], "JOIN", f"{kind} JOIN ON {sql}" if sql and kind else "")
        elif name == "Sort":
            orders = _expressions(node, "order")
            sql = self._sqls(orders, ";")
            self._dataset_wide(orders, "SORT", f"SORT BY {sql}" if sql else "")
        elif name == "Union":
            self._union(node)
        elif name == "InMemoryRelation":
            self._cached(node)
        elif name == "Expand":
            self._expand(node)
        elif "udfs" in node.fields and "resultAttrs" in node.fields:  # BatchEvalPython, ArrowEvalPython
            self._python_udfs(node)
        for child in node.children:
            self.visit(child)

    def _join_type(self, node: PlanNode) -> str:
        try:
            return str(self._nodes.get(node.path).joinType().sql())
        except Exception:  # noqa: BLE001 - a join type without SQL form: no description
            return ""

    def _aggregate(self, node: PlanNode) -> None:
        keys = _expressions(node, "groupingExpressions")
        outputs = _expressions(node, "aggregateExpressions")
        if node.children and node.children[0].name == "Union":
            # the JVM's AggregateVisitor: a UNION's DISTINCT (every output a grouping key) adds nothing
            key_ids = {_expr_id(k) for k in keys if k.name == "AttributeReference"}
            if {_expr_id(o) for o in outputs} <= key_ids:
                return
        if keys:
            sql = self._sqls(keys, ", ")
            self._dataset_wide(keys, "GROUP_BY", f"GROUP BY {sql}" if sql else "")
        self._named(outputs)

    def _generate(self, node: PlanNode) -> None:
        generators = _expressions(node, "generator")
        if not generators:
            return
        generator = generators[0]
        step = ("DIRECT", "TRANSFORMATION", self._sql(generator), False)
        for attribute in _expressions(node, "generatorOutput"):
            target = _expr_id(attribute)
            if target is not None:
                for child in generator.children:
                    self._walk(child, target, step)

    def _cached(self, node: PlanNode) -> None:
        """A cached DataFrame: its plan (Spark 4 keeps it in the relation, 3.5 only the physical plan, whose
        logical links were read with the datasets) is traced like the rest, and each attribute of the relation
        is the plan's output at the same position: a renamed column or a second use of the cache (a self-join)
        has ids of its own. (The JVM maps them by name from the CacheManager's plan.)"""
        depth = len(node.path) + 1
        kept = [(t, self._nodes) for t in _expressions(node, "cacheBuilder")
                if t.path[depth:] == (("f", "logicalPlan"),)]
        with_nodes = kept or self._cached_plans.get(id(node), [])
        outer = self._nodes
        try:
            for plan, nodes in with_nodes:
                self._nodes = nodes  # a 3.5 cached plan's paths start at its own root (for descriptions)
                self.visit(plan)
        finally:
            self._nodes = outer
        below = [ident for ident, _ in _output(with_nodes[0][0])] if len(with_nodes) == 1 else []
        for (target, _), source in zip(_named_ids(_relation_output(node)), below):
            if source != target:
                self.direct.setdefault(target, []).append((source, IDENTITY))

    def _expand(self, node: PlanNode) -> None:
        """ROLLUP / CUBE / GROUPING SETS: each output attribute is, in each of the projections, the expression at
        its position (a grouping column or a null). The JVM has no rule for ``Expand``: there the grouping
        columns of such an aggregate, and its GROUP_BY, have no inputs."""
        outputs = [ident for ident, _ in _named_ids(_expressions(node, "output"))]
        depth = len(node.path)
        for tree in _expressions(node, "projections"):
            step = tree.path[depth:]  # ("f", "projections"), ("i", projection), ("i", position)
            position = step[2][1] if len(step) == 3 else None
            if isinstance(position, int) and position < len(outputs):
                self._walk(tree, outputs[position], ("DIRECT", "IDENTITY", self._sql(tree), False))

    def _python_udfs(self, node: PlanNode) -> None:
        """Python UDFs (the optimizer moves them into a ``BatchEvalPython``/``ArrowEvalPython`` node): each result
        attribute is computed from its UDF's arguments (TRANSFORMATION). The JVM has no rule for these nodes:
        there a UDF's output has no inputs."""
        results = [ident for ident, _ in _named_ids(_expressions(node, "resultAttrs"))]
        for udf, target in zip(_expressions(node, "udfs"), results):
            self._walk(udf, target, ("DIRECT", "IDENTITY", self._sql(udf), False))

    def _union(self, node: PlanNode) -> None:
        """Each output of the first child is, at the same position, the output of every other child, described
        (when descriptions are on) by that attribute's qualified name, as the JVM's ``UnionVisitor``."""
        outputs = [[ident for ident, _ in _output(child)] for child in node.children]
        qualified = _qualified_names(node) if self._descriptions else {}
        for i, target in enumerate(outputs[0] if outputs else []):
            for other in outputs[1:]:
                if i < len(other) and other[i] != target:
                    step = ("DIRECT", "IDENTITY", qualified.get(other[i], ""), False)
                    self.direct.setdefault(target, []).append((other[i], step))

    def sources(self, target: ExprId, seen: frozenset[ExprId] = frozenset()) -> dict[Field, list[Transformation]]:
        """Input fields ``target`` is computed from -> the distinct transformations of the paths to each."""
        if target in self._memo:
            return self._memo[target]
        found: dict[Field, list[Transformation]] = {}
        for field in self._leaves.get(target, ()):
            found[field] = [IDENTITY]
        for source, transformation in self.direct.get(target, []):
            if source in seen:
                continue
            for field, below in self.sources(source, seen | {target}).items():
                _add_distinct(found, field, (merge(transformation, far) for far in below))
        self._memo[target] = found
        return found


def _qualified_names(node: PlanNode) -> dict[ExprId, str]:
    """The qualified name (``spark_catalog.default.t.a``) of each attribute defined or referenced under ``node``,
    as Spark's ``Attribute.qualifiedName``."""
    names: dict[ExprId, str] = {}
    for tree in plan_tree.walk(node):
        ident, qualifier = _expr_id(tree), tree.fields.get("qualifier")
        if isinstance(qualifier, str):  # Spark's toJSON writes the Seq as "[spark_catalog, default, t]"
            qualifier = [part for part in qualifier.strip("[]").split(", ") if part]
        # a relation's own attributes have no qualifier in the optimized plan; the references to them have one
        if ident is not None and isinstance(qualifier, list) and (qualifier or ident not in names):
            names[ident] = ".".join([*map(str, qualifier), str(tree.fields.get("name", ""))])
    return names


def _relation_output(node: PlanNode) -> list[PlanNode]:
    """A relation's output attributes; a HiveTableRelation's are its data and partition columns (no ``output``
    field in Spark 3.5's JSON)."""
    return _expressions(node, "output") or [*_expressions(node, "dataCols"), *_expressions(node, "partitionCols")]


def _named_ids(trees: list[PlanNode]) -> list[tuple[ExprId, str]]:
    return [(i, str(tree.fields.get("name", ""))) for tree in trees if (i := _expr_id(tree)) is not None]


def _output(node: PlanNode) -> list[tuple[ExprId, str]]:
    """The attributes (id, name) a logical plan node produces, in order (a ``Generate`` over columns it does
    not keep gives more: its JSON leaves out which; :func:`build` then matches by name)."""
    name = node.name
    if name in ("Project", "Aggregate"):
        return _named_ids(_expressions(node, "projectList" if name == "Project" else "aggregateExpressions"))
    if name == "Join":
        kind = str((node.fields.get("joinType") or {}).get("object", "")) if isinstance(
            node.fields.get("joinType"), Mapping) else str(node.fields.get("joinType", ""))
        left = _output(node.children[0]) if node.children else []
        if "LeftSemi" in kind or "LeftAnti" in kind or "ExistenceJoin" in kind:
            return left
        return left + (_output(node.children[1]) if len(node.children) > 1 else [])
    below = _output(node.children[0]) if node.children else []
    if name == "Window":
        return below + _named_ids(_expressions(node, "windowExpressions"))
    if name == "Generate":
        return below + _named_ids(_expressions(node, "generatorOutput"))
    if "output" in node.fields or "dataCols" in node.fields:  # relations
        return _named_ids(_relation_output(node))
    return below


def _targets(query: PlanNode, field_names: list[str]) -> list[tuple[str, ExprId]]:
    """Each output field with the attribute it is written from: by position, or by name (as the JVM
    matches them) when the query's output cannot be counted exactly."""
    output = _output(query)
    if len(output) == len(field_names):
        return [(name, ident) for name, (ident, _) in zip(field_names, output)]
    by_name: dict[str, ExprId] = {}
    for ident, name in output:
        # the last of a name: a generator's output comes after (and shadows) a dropped child column it is named after
        by_name[name.lower()] = ident
    return [(name, by_name[name.lower()]) for name in field_names if name.lower() in by_name]


def query_of(root: PlanNode) -> PlanNode | None:
    """The plan a write command writes: its ``query`` field, else its child."""
    queries = _expressions(root, "query")
    if queries:
        return queries[0]
    return root.children[0] if root.children else None


def _add_distinct(by_field: dict[Field, list[Transformation]], field: Field,
                  transformations: Iterable[Transformation]) -> None:
    """Append to ``field``'s list the transformations it does not list yet (the JVM keeps distinct ones)."""
    kept = by_field.setdefault(field, [])
    kept.extend(t for t in transformations if t not in kept)


def _input_fields(per_input: Mapping[Field, list[Transformation]]) -> list[cl.InputField]:
    return [cl.InputField(namespace=ns, name=ds, field=column, transformations=[
        cl.Transformation(type=t, subtype=s, description=d, masking=m) for t, s, d, m in ts])
        for (ns, ds, column), ts in per_input.items()]


def build(nodes: plan_tree.JvmNodes, root: PlanNode, leaves: Mapping[ExprId, list[Field]], field_names: list[str],
          descriptions: bool = False, dataset_lineage: bool = True,
          cached_plans: CachedPlans | None = None) -> cl.ColumnLineageDatasetFacet | None:
    """The facet for the output whose schema names are ``field_names`` (positional over the query output);
    ``nodes``: the JVM objects of ``root``'s plan (read only for descriptions); ``descriptions`` and
    ``dataset_lineage``: the JVM's ``columnLineage.descriptionsEnabled`` / ``datasetLineageEnabled``."""
    query = query_of(root)
    if query is None or not field_names:
        return None
    builder = _Builder(nodes, leaves, descriptions, cached_plans or {})
    builder.visit(query)
    dataset: dict[Field, list[Transformation]] = {}
    for target in builder.dataset:
        for field, transformations in builder.sources(target).items():
            _add_distinct(dataset, field, transformations)
    fields = {}
    for name, target in _targets(query, field_names):
        # a path without an expression of its own is described by the field's name, as the JVM's root step
        per_input = {field: [t if t[2] or not descriptions else (*t[:2], name, t[3]) for t in ts]
                     for field, ts in builder.sources(target).items()}
        if not per_input:  # as the JVM: dataset-wide inputs only go with a field's own
            continue
        if not dataset_lineage:
            for field, transformations in dataset.items():
                _add_distinct(per_input, field, transformations)
        fields[name] = cl.Fields(inputFields=_input_fields(per_input))
    if not fields:  # as the JVM: no facet without a field, whatever the dataset-wide inputs
        return None
    # no `dataset` key unless it has inputs, as the JVM (openlineage-python would write an empty list)
    return cl.ColumnLineageDatasetFacet(fields=fields,
                                        dataset=_input_fields(dataset) if dataset_lineage and dataset else None)


def leaf_fields(node: PlanNode, namespace: str, name: str,
                columns: Sequence[tuple[str, Sequence[str]]] | None = None) -> dict[ExprId, list[Field]]:
    """A relation's output attributes as input fields of the dataset (namespace, name): each the dataset's field
    of the same name, or, for a relation computed by a query (``columns``: each relation field -> the dataset's
    columns it is computed from), those columns."""
    computed = dict(columns) if columns is not None else None
    out = {}
    for tree in _relation_output(node):
        ident, field = _expr_id(tree), tree.fields.get("name")
        if ident is None or not field:
            continue
        read = [str(field)] if computed is None else computed.get(str(field), ())
        if read:
            out[ident] = [(namespace, name, column) for column in read]
    return out
