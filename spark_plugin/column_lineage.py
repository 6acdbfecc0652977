"""The ``columnLineage`` dataset facet of an action's output, as the JVM integration builds it.

Read from the same ``toJSON()`` tree as the datasets (expressions are nested trees there): every attribute
(``exprId``) an expression defines gets its dependencies:

- DIRECT, from a ``Project``'s or ``Aggregate``'s aliases: IDENTITY (the alias of an attribute),
  AGGREGATION (attributes inside an aggregate function), TRANSFORMATION (anything else); description the
  alias as SQL (``t1.a AS ident``);
- INDIRECT, for the whole dataset: FILTER (``WHERE <condition>``), JOIN (``INNER JOIN ON <condition>``),
  GROUP_BY (``GROUP BY <keys>``), SORT (``ORDER BY <keys>``), added to every output field as the JVM does
  when ``columnLineage.datasetLineageEnabled`` is false (its default).

Each output field (the write's query output, by position, named as the output schema) is traced back to
the attributes of the input relations; transformations met on the way are merged (the strongest subtype
wins: AGGREGATION over TRANSFORMATION over IDENTITY). Descriptions are Spark's own ``Expression.sql`` of the
optimized plan (one py4j call each, on the worker). Disabled by ``facets.columnLineage.disabled``.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from openlineage.client.facet_v2 import column_lineage_dataset as cl

from spark_plugin import plan_tree
from spark_plugin.plan_tree import PlanNode

log = logging.getLogger(__name__)

_RANK = {"IDENTITY": 0, "TRANSFORMATION": 1, "AGGREGATION": 2}
#: (type, subtype, description)
Transformation = tuple[str, str, "str | None"]
#: ExprId as (id, jvmId) so attributes of two JVMs' plans never collide
ExprId = tuple[int, str]


def _expr_id(node: PlanNode) -> ExprId | None:
    ident = node.fields.get("exprId")
    if isinstance(ident, Mapping) and "id" in ident:
        return int(ident["id"]), str(ident.get("jvmId", ""))
    return None


def _walk(node: PlanNode) -> Iterable[PlanNode]:
    yield node
    for child in node.children:
        yield from _walk(child)


def _references(tree: PlanNode) -> list[ExprId]:
    """Attributes an expression tree reads."""
    out = []
    for node in _walk(tree):
        if node.name in ("AttributeReference", "OuterReference"):
            ident = _expr_id(node)
            if ident is not None:
                out.append(ident)
    return out


def _expressions(node: PlanNode, field: str) -> list[PlanNode]:
    """The expression trees held in one field of a plan node (a Seq of trees, or one tree)."""
    return [tree for tree in node.nested if len(tree.path) > len(node.path)
            and tree.path[len(node.path)] == ("f", field)]


class _Builder:
    def __init__(self, nodes: plan_tree.JvmNodes, leaves: Mapping[ExprId, tuple[str, str, str]]) -> None:
        self._nodes = nodes
        self._leaves = leaves  # input attribute -> (namespace, name, field)
        self.direct: dict[ExprId, list[tuple[ExprId, Transformation]]] = {}
        self.indirect: list[tuple[list[ExprId], Transformation]] = []

    def _sql(self, tree: PlanNode) -> str | None:
        try:
            return str(self._nodes.get(tree.path).sql())
        except Exception:  # noqa: BLE001 - an expression without SQL form: no description
            return None

    def _sqls(self, trees: list[PlanNode]) -> str | None:
        parts = [self._sql(t) for t in trees]
        return ", ".join(p for p in parts if p) if all(parts) else None

    def _aliases(self, trees: list[PlanNode]) -> None:
        for tree in trees:
            if tree.name != "Alias":
                continue
            target = _expr_id(tree)
            if target is None:
                continue
            child = tree.children[0] if tree.children else None
            description = self._sql(tree)
            if child is not None and child.name == "AttributeReference":
                kinds = {ref: "IDENTITY" for ref in _references(child)}
            else:
                kinds = {ref: "TRANSFORMATION" for ref in _references(tree)}
                for node in _walk(tree):
                    if node.name == "AggregateExpression":
                        kinds.update({ref: "AGGREGATION" for ref in _references(node)})
            self.direct[target] = [(ref, ("DIRECT", kind, description)) for ref, kind in kinds.items()]

    def visit(self, node: PlanNode) -> None:
        name = node.name
        if name == "Project":
            self._aliases(_expressions(node, "projectList"))
        elif name == "Aggregate":
            self._aliases(_expressions(node, "aggregateExpressions"))
            keys = _expressions(node, "groupingExpressions")
            if keys:
                refs = [r for k in keys for r in _references(k)]
                sql = self._sqls(keys)
                self.indirect.append((refs, ("INDIRECT", "GROUP_BY", f"GROUP BY {sql}" if sql else None)))
        elif name == "Filter":
            conditions = _expressions(node, "condition")
            for condition in conditions:
                sql = self._sql(condition)
                self.indirect.append((_references(condition), ("INDIRECT", "FILTER",
                                                                f"WHERE {sql}" if sql else None)))
        elif name == "Join":
            for condition in _expressions(node, "condition"):
                sql = self._sql(condition)
                try:
                    kind = str(self._nodes.get(node.path).joinType().sql())
                except Exception:  # noqa: BLE001 - a join type without SQL form: no description
                    kind = None
                description = f"{kind} JOIN ON {sql}" if sql and kind else None
                self.indirect.append((_references(condition), ("INDIRECT", "JOIN", description)))
        elif name == "Sort":
            orders = _expressions(node, "order")
            refs = [r for o in orders for r in _references(o)]
            sql = self._sqls(orders)
            self.indirect.append((refs, ("INDIRECT", "SORT", f"ORDER BY {sql}" if sql else None)))
        elif name == "Union":
            outputs = [_output(child) for child in node.children]
            for i, target in enumerate(outputs[0] if outputs else []):
                self.direct.setdefault(target, [])
                for other in outputs[1:]:
                    if i < len(other) and other[i] != target:
                        self.direct[target].append((other[i], ("DIRECT", "IDENTITY", None)))
        for child in node.children:
            self.visit(child)

    def sources(self, target: ExprId, seen: frozenset[ExprId] = frozenset()) -> dict[tuple, Transformation | None]:
        """Input fields ``target`` is computed from -> the merged direct transformation (None: identity)."""
        if target in self._leaves:
            return {self._leaves[target]: None}
        found: dict[tuple, Transformation | None] = {}
        for source, transformation in self.direct.get(target, []):
            if source in seen:
                continue
            for field, below in self.sources(source, seen | {target}).items():
                merged = _merge(transformation, below)
                found[field] = _merge(found[field], merged) if field in found else merged
        return found


def _merge(a: Transformation | None, b: Transformation | None) -> Transformation | None:
    if a is None or b is None:
        return a or b
    return a if _RANK.get(a[1], 0) >= _RANK.get(b[1], 0) else b


def _output(node: PlanNode) -> list[ExprId]:
    """The attributes a logical plan node produces, in order."""
    name = node.name
    if name in ("Project", "Aggregate"):
        field = "projectList" if name == "Project" else "aggregateExpressions"
        return [i for tree in _expressions(node, field) if (i := _expr_id(tree)) is not None]
    if name == "Join":
        kind = str((node.fields.get("joinType") or {}).get("object", "")) if isinstance(
            node.fields.get("joinType"), Mapping) else str(node.fields.get("joinType", ""))
        left = _output(node.children[0]) if node.children else []
        if "LeftSemi" in kind or "LeftAnti" in kind or "ExistenceJoin" in kind:
            return left
        return left + (_output(node.children[1]) if len(node.children) > 1 else [])
    if "output" in node.fields or "dataCols" in node.fields:  # relations
        trees = _expressions(node, "output") or [*_expressions(node, "dataCols"), *_expressions(node, "partitionCols")]
        return [i for tree in trees if (i := _expr_id(tree)) is not None]
    if node.children:
        return _output(node.children[0])
    return []


def query_of(root: PlanNode) -> PlanNode | None:
    """The plan a write command writes: its ``query`` field, else its child."""
    queries = _expressions(root, "query")
    if queries:
        return queries[0]
    return root.children[0] if root.children else None


def build(nodes: plan_tree.JvmNodes, root: PlanNode, leaves: Mapping[ExprId, tuple[str, str, str]],
          field_names: list[str]) -> cl.ColumnLineageDatasetFacet | None:
    """The facet for the output whose schema names are ``field_names`` (positional over the query output);
    ``nodes``: the JVM objects of ``root``'s plan (expression descriptions are Spark's ``sql()`` of them)."""
    query = query_of(root)
    if query is None or not field_names:
        return None
    builder = _Builder(nodes, leaves)
    builder.visit(query)
    indirect: list[tuple[tuple, Transformation]] = []
    for refs, transformation in builder.indirect:
        for ref in dict.fromkeys(refs):
            for field in builder.sources(ref):
                indirect.append((field, transformation))
    fields = {}
    for name, target in zip(field_names, _output(query)):
        per_input: dict[tuple, list[Transformation]] = {}
        for field, direct in builder.sources(target).items():
            per_input.setdefault(field, []).append(direct or ("DIRECT", "IDENTITY", None))
        for field, transformation in indirect:
            if transformation not in per_input.setdefault(field, []):
                per_input[field].append(transformation)
        if per_input:
            fields[name] = cl.Fields(inputFields=[
                cl.InputField(namespace=ns, name=ds, field=column, transformations=[
                    cl.Transformation(type=t, subtype=s, description=d, masking=False) for t, s, d in ts])
                for (ns, ds, column), ts in per_input.items()])
    return cl.ColumnLineageDatasetFacet(fields=fields) if fields else None


def leaf_fields(node: PlanNode, namespace: str, name: str) -> dict[ExprId, tuple[str, str, str]]:
    """A relation's output attributes as input fields of the dataset (namespace, name)."""
    out = {}
    # a HiveTableRelation's output is its data and partition columns (no ``output`` field in Spark 3.5's JSON)
    trees = _expressions(node, "output") or [*_expressions(node, "dataCols"), *_expressions(node, "partitionCols")]
    for tree in trees:
        ident = _expr_id(tree)
        if ident is not None and tree.fields.get("name"):
            out[ident] = (namespace, name, str(tree.fields["name"]))
    return out
