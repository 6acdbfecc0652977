"""Column lineage (plain data) -> the ``columnLineage`` dataset facet of a statement's outputs.

Both harvesters have a statement's column lineage as plain tuples: from the SQL text
(:func:`harvesters.sql.columns.column_lineage`, kept by :class:`harvesters.sql.cache.Lineage`) or from
Snowflake's ACCESS_HISTORY. :func:`output_facets` turns them into openlineage-python's
``ColumnLineageDatasetFacet`` (1-2-0), one ``{"columnLineage": facet}`` per output table, for
:attr:`harvesters.core.tasks.Statement.output_facets`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import attrs
from openlineage.client.facet_v2 import column_lineage_dataset

from emitter.records import unvalidated

#: (input table, input column, subtype: IDENTITY / TRANSFORMATION / AGGREGATION, "" when the source does not say)
Source = tuple[str, str, str]
#: ((output table, ((output column, (sources...)), ...)), ...): hashable, so the facets are built once per shape
Columns = tuple[tuple[str, tuple[tuple[str, tuple[Source, ...]], ...]], ...]


#: the last answers by the identity of their ``columns`` (a cached statement shape hands the same tuple every
#: time): skips hashing the nested tuple for every statement. The tuple is kept with the answer, so its id
#: cannot be reused while the entry exists.
_BY_IDENTITY: dict[int, tuple[str, Columns, Mapping[str, Mapping[str, Any]]]] = {}


def output_facets(namespace: str, columns: Columns) -> Mapping[str, Mapping[str, Any]]:
    """``{output table: {"columnLineage": facet}}`` for tables and inputs of the dataset ``namespace`` (a
    statement reads and writes one server or account). Every source is a ``DIRECT`` transformation, with its
    subtype when known. The mappings and facets are shared: never changed once made."""
    hit = _BY_IDENTITY.get(id(columns))
    if hit is not None and hit[1] is columns and hit[0] == namespace:
        return hit[2]
    facets = _output_facets(namespace, columns)
    if len(_BY_IDENTITY) >= 4096:
        _BY_IDENTITY.clear()
    _BY_IDENTITY[id(columns)] = (namespace, columns, facets)
    return facets


@lru_cache(maxsize=16384)  # the same statements over and over: one facet instance each, shared by their events
def _output_facets(namespace: str, columns: Columns) -> Mapping[str, Mapping[str, Any]]:
    facets: dict[str, Mapping[str, Any]] = {}
    with unvalidated():  # the validators only re-check the constant schema URL and producer
        for table, fields in columns:
            facets[table] = {"columnLineage": column_lineage_dataset.ColumnLineageDatasetFacet(fields={
                column: column_lineage_dataset.Fields(inputFields=[
                    column_lineage_dataset.InputField(namespace=namespace, name=source, field=field, transformations=[
                        column_lineage_dataset.Transformation(type="DIRECT", subtype=subtype or None)])
                    for source, field, subtype in sources])
                for column, sources in fields})}
    return facets


def relocated(facets: Mapping[str, Any], locate: Callable[[str, str], tuple[str, str]]) -> Mapping[str, Any]:
    """A statement's ``{"columnLineage": facet}`` of one output with each input field's table named where
    ``locate`` puts it (see :attr:`harvesters.core.tasks.TaskGrouper.locate`: a linked server's table); the same
    mapping when every input field stays where it is named."""
    facet = facets.get("columnLineage")
    if facet is None or all(locate(source.namespace, source.name) == (source.namespace, source.name)
                            for field in facet.fields.values() for source in field.inputFields):
        return facets  # (the usual case: no new objects, so the facet stays shared between statements)
    with unvalidated():
        fields = {column: attrs.evolve(field, inputFields=[_moved(source, locate) for source in field.inputFields])
                  for column, field in facet.fields.items()}
        return {**facets, "columnLineage": attrs.evolve(facet, fields=fields)}


def _moved(source: Any, locate: Callable[[str, str], tuple[str, str]]) -> Any:
    namespace, name = locate(source.namespace, source.name)
    if (namespace, name) == (source.namespace, source.name):
        return source
    return attrs.evolve(source, namespace=namespace, name=name)


@lru_cache(maxsize=4096)  # the same statement shapes with the same ACCESS_HISTORY objects, over and over
def restricted(columns: Columns, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> Columns:
    """``columns`` kept to the statement's final datasets: its outputs, and the columns whose every source is
    one of its inputs (temp tables taken out of the inputs take the columns they fed with them)."""
    if not columns:
        return ()
    read, written = set(inputs), set(outputs)
    kept = []
    for table, fields in columns:
        if table not in written:
            continue
        good = tuple(field for field in fields if all(source[0] in read for source in field[1]))
        if good:
            kept.append((table, good))
    return tuple(kept)
