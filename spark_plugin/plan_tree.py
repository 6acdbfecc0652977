"""A Spark plan read from one ``toJSON()`` call, with a way back to each node's JVM object.

Walking a plan node by node through py4j costs about 1 ms per node; ``TreeNode.toJSON()`` returns the
whole tree (children, nested plans in fields such as a CTAS ``query`` or a cached relation's
``logicalPlan``, expressions with subqueries) in one round trip. Fields Spark cannot serialize
(paths, relations, modes) come back ``null``: for those a node keeps the navigation ``path`` from
the JVM root so the few leaf details needed are fetched with a handful of targeted calls.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from emitter.deferred import facet_v2

if TYPE_CHECKING:  # the real classes for the type checker; at run time their deferred constructors (emitter.deferred)
    from openlineage.client.facet_v2 import schema_dataset
else:
    schema_dataset = facet_v2.schema_dataset

#: One navigation step from a JVM node: ("c", i) = children().apply(i); ("f", name) = name()
#: (a Scala ``Some`` is unwrapped); ("i", i) = apply(i) on a Seq.
Step = tuple[str, Any]

#: JSON keys Spark adds to every node; everything else is a constructor field.
_NODE_KEYS = frozenset({"class", "num-children"})


@attrs.frozen
class PlanNode:
    """One plan (or expression) node of a ``toJSON()`` tree."""

    cls: str  # fully qualified JVM class name
    fields: Mapping[str, Any]  # the node's JSON fields, child references as ints
    children: tuple[PlanNode, ...]
    nested: tuple[PlanNode, ...]  # roots of trees held in fields (CTAS query, cached plan, subqueries)
    path: tuple[Step, ...]  # from the JVM root of the ``toJSON()`` call to this node

    @property
    def name(self) -> str:
        """The simple class name (``InsertIntoHadoopFsRelationCommand``)."""
        return self.cls.rsplit(".", 1)[-1]


def _is_tree(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and isinstance(value[0], dict)
        and "class" in value[0]
        and "num-children" in value[0]
    )


def _nested_trees(value: Any, path: tuple[Step, ...]) -> Iterator[PlanNode]:
    """Trees held in a field value: a tree, a Seq of trees, or inside a product (case class)."""
    if _is_tree(value):
        yield parse(value, path)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _nested_trees(item, (*path, ("i", i)))
    elif isinstance(value, dict) and "product-class" in value:
        for key, item in value.items():
            yield from _nested_trees(item, (*path, ("f", key)))


def parse(nodes: list[dict[str, Any]], path: tuple[Step, ...] = ()) -> PlanNode:
    """Build the tree of a ``toJSON()`` node list (pre-order, ``num-children`` per node)."""
    position = 0

    def build(node_path: tuple[Step, ...]) -> PlanNode:
        nonlocal position
        raw = nodes[position]
        position += 1
        children = tuple(build((*node_path, ("c", i))) for i in range(raw["num-children"]))
        fields = {k: v for k, v in raw.items() if k not in _NODE_KEYS}
        # physical plans (e.g. a cache's cachedPlan) duplicate the logical plan next to them
        nested = tuple(
            tree
            for key, value in fields.items()
            for tree in _nested_trees(value, (*node_path, ("f", key)))
            if not tree.cls.endswith("Exec")
        )
        return PlanNode(raw["class"], fields, children, nested, node_path)

    return build(path)


def parse_plan(jplan: Any) -> PlanNode:
    """One py4j call: the JVM plan's JSON as a tree."""
    return parse(json.loads(jplan.toJSON()))


def walk(node: PlanNode) -> Iterator[PlanNode]:
    """Pre-order over children and nested trees."""
    yield node
    for child in node.children:
        yield from walk(child)
    for tree in node.nested:
        yield from walk(tree)


def _step(obj: Any, step: Step) -> Any:
    """One step of a path other than to a child (:class:`JvmNodes` keeps each node's children sequence)."""
    kind, key = step
    if kind == "i":
        return obj.apply(key)
    obj = getattr(obj, key)()
    return obj.get() if obj.getClass().getSimpleName() == "Some" else obj


class JvmNodes:
    """The JVM objects of one plan's nodes by path, each path prefix resolved once: the handlers and the column
    lineage of an action reach the same relations, and its START and end read the same plan (a relation deep in a
    join is a dozen py4j calls away from the root)."""

    def __init__(self, jroot: Any) -> None:
        self._objects: dict[tuple[Step, ...], Any] = {(): jroot}
        #: each node's ``children()`` sequence, asked once: a union of 150 reads is 150 steps from one node
        self._children: dict[tuple[Step, ...], Any] = {}

    def get(self, path: tuple[Step, ...]) -> Any:
        """The JVM object at ``path`` below the root (one or two py4j calls per step not taken before)."""
        known = len(path)
        while path[:known] not in self._objects:
            known -= 1
        obj = self._objects[path[:known]]
        for i in range(known, len(path)):
            kind, key = path[i]
            if kind == "c":
                children = self._children.get(path[:i])
                if children is None:
                    children = self._children[path[:i]] = obj.children()
                obj = children.apply(key)
            else:
                obj = _step(obj, path[i])
            self._objects[path[:i + 1]] = obj
        return obj


# --- schemas -------------------------------------------------------------------------------------


def _type_fields(datatype: Any) -> tuple[str, list[schema_dataset.SchemaDatasetFacetFields] | None]:
    """Spark ``typeName()`` of a JSON data type and, for struct/map/array, the nested fields as the
    JVM integration builds them (map -> key/value, array -> _element)."""
    if isinstance(datatype, str):
        return datatype, None
    kind = datatype.get("type")
    if kind == "struct":
        return "struct", [field_facet(f) for f in datatype.get("fields", [])]
    if kind == "map":
        return "map", [
            _field("key", datatype["keyType"], None),
            _field("value", datatype["valueType"], None),
        ]
    if kind == "array":
        return "array", [_field("_element", datatype["elementType"], None)]
    if kind == "udt":
        return _type_fields(datatype.get("sqlType", "udt"))
    return str(kind), None


def _field(name: str, datatype: Any, comment: str | None) -> schema_dataset.SchemaDatasetFacetFields:
    type_name, nested = _type_fields(datatype)
    if nested is None:
        return schema_dataset.SchemaDatasetFacetFields(name=name, type=type_name, description=comment)
    return schema_dataset.SchemaDatasetFacetFields(
        name=name, type=type_name, description=comment, fields=nested
    )


def field_facet(field: Mapping[str, Any]) -> schema_dataset.SchemaDatasetFacetFields:
    """A StructField JSON (``{name, type, nullable, metadata}``) as a schema facet field."""
    return _field(field["name"], field["type"], (field.get("metadata") or {}).get("comment"))


def struct_schema(struct: Mapping[str, Any] | str | None) -> schema_dataset.SchemaDatasetFacet | None:
    """A StructType (JSON string or parsed) as a schema facet; None when it has no fields."""
    parsed: Mapping[str, Any] | None = json.loads(struct) if isinstance(struct, str) else struct
    fields = [field_facet(f) for f in (parsed or {}).get("fields", [])]
    return schema_dataset.SchemaDatasetFacet(fields=fields) if fields else None


def output_schema(output: list[Any] | None) -> schema_dataset.SchemaDatasetFacet | None:
    """A node's ``output`` attribute list (each a one-node expression tree) as a schema facet."""
    fields = []
    for attr in output or []:
        node = attr[0] if isinstance(attr, list) else attr
        metadata = node.get("metadata") or {}
        fields.append(_field(node["name"], node["dataType"], metadata.get("comment")))
    return schema_dataset.SchemaDatasetFacet(fields=fields) if fields else None
