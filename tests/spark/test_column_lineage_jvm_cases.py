"""OpenLineage's own column-lineage test table (``ColumnLineageWithTransformationTypesTest`` of the JVM
integration, snapshot 8f02abfb7) and its ``...OnlyFieldDependenciesTest`` twin (``datasetLineageEnabled=false``),
ported: the same tables, queries and assertions, with descriptions enabled as there. Each row's ``fields`` are the
``assertColumnDependsOnType`` calls (output field, input table, input field, type, subtype, description, masking;
a tuple of descriptions where theirs accepts either), ``dataset`` the ``assertDatasetDependsOnType`` calls,
``every_field`` the ``assertAllColumnsDependsOnType`` calls, ``counts`` the ``assertCountColumnDependencies`` /
``assertCountDatasetDependencies`` values (transformations over all fields / over the ``dataset`` list; -1 where
theirs asserts none). Their tables are Hive tables with a LOCATION; ours parquet tables with one (the same plan
leaves' names and descriptions), written by the query instead of collected (the same optimized plan)."""
from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from spark_plugin.plan_lineage import action_lineage

P = "spark.openlineage.columnLineage."
D, IND = "DIRECT", "INDIRECT"
Q = "spark_catalog.default."  # their descriptions name the tables' columns through the session catalog


class JvmCase(NamedTuple):
    id: str
    tables: dict[str, str]  # table -> columns
    query: str
    fields: list[tuple[str, str, str, str, str, str | tuple[str, ...], bool]]
    counts: tuple[int, int]  # (column dependencies, dataset dependencies)
    dataset: list[tuple[str, str, str, str, str]] = []  # (table, field, type, subtype, description)
    #: their ...OnlyFieldDependenciesTest: ``datasetLineageEnabled=false`` (dataset-wide inputs on every field)
    fields_only: bool = False
    #: ``assertAllColumnsDependsOnType``: (table, field, type, subtype, descriptions) on every output field
    every_field: list[tuple[str, str, str, str, tuple[str, ...]]] = []


def _window(function: str, frame: str) -> str:
    return (f"{function} OVER (PARTITION BY {Q}t1.b ORDER BY {Q}t1.c ASC NULLS FIRST {frame})")


CASE = f"CASE WHEN ({Q}t1.b > 1) THEN {Q}t1.a ELSE ({Q}t1.a + {Q}t1.b) END AS cond"
IF = f"(IF(({Q}t1.b > 1), {Q}t1.a, ({Q}t1.a + {Q}t1.b))) AS cond"
NULLIF = f"(IF(({Q}t1.a = {Q}t1.b), CAST(NULL AS INT), {Q}t1.a)) AS cond"
NVL = f"coalesce({Q}t1.a, {Q}t1.b) AS cond"
NVL2 = f"(IF(({Q}t1.a IS NOT NULL), {Q}t1.b, {Q}t1.c)) AS cond"
COALESCE = f"coalesce({Q}t1.a, {Q}t1.b, 0) AS cond"
RANK = _window("RANK()", "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW") + " AS rank"
WSUM = _window(f"sum({Q}t1.a)", "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW") + " AS s"
LAG = _window(f"lag({Q}t1.a, 3, 0)", "ROWS BETWEEN -3 FOLLOWING AND -3 FOLLOWING") + " AS l"
GROUP_A = f"GROUP BY {Q}t1.a"

CASES = [
    JvmCase("simpleQueryOnlyIdentity", {"t1": "a int"}, "SELECT a FROM t1",
            [("a", "t1", "a", D, "IDENTITY", "a", False)], (1, 0)),
    JvmCase("simpleQueryOnlyTransform", {"t1": "a int, b int"}, "SELECT concat(a, 'test') AS a, a+b as b FROM t1",
            [("a", "t1", "a", D, "TRANSFORMATION", f"concat(CAST({Q}t1.a AS STRING), 'test') AS a", False),
             ("b", "t1", "a", D, "TRANSFORMATION", f"({Q}t1.a + {Q}t1.b) AS b", False),
             ("b", "t1", "b", D, "TRANSFORMATION", f"({Q}t1.a + {Q}t1.b) AS b", False)], (3, 0)),
    JvmCase("simpleQueryOnlyAggregation", {"t1": "a int"}, "SELECT count(a) AS a FROM t1",
            [("a", "t1", "a", D, "AGGREGATION", f"count({Q}t1.a) AS a", True)], (1, 0)),
    JvmCase("simpleQueryIndirect", {"t1": "a int, b int"}, "SELECT a FROM t1 WHERE b > 1",
            [("a", "t1", "a", D, "IDENTITY", "a", False)], (1, 1),
            [("t1", "b", IND, "FILTER", f"WHERE (({Q}t1.b IS NOT NULL) AND ({Q}t1.b > 1))")]),
    JvmCase("simpleQueryMultipleIndirect", {"t1": "a int, b int, c int"},
            "SELECT a, c FROM t1 WHERE b > 1 GROUP BY a, c ORDER BY c",
            [("a", "t1", "a", D, "IDENTITY", "a", False), ("c", "t1", "c", D, "IDENTITY", "c", False)], (2, 4),
            [("t1", "a", IND, "GROUP_BY", f"GROUP BY {Q}t1.a, {Q}t1.c"),
             ("t1", "b", IND, "FILTER", f"WHERE (({Q}t1.b IS NOT NULL) AND ({Q}t1.b > 1))"),
             ("t1", "c", IND, "GROUP_BY", f"GROUP BY {Q}t1.a, {Q}t1.c"),
             ("t1", "c", IND, "SORT", f"SORT BY {Q}t1.c ASC NULLS FIRST")]),
    JvmCase("simpleQueryPriorityDirect", {"t1": "a int, b int"},
            "SELECT a as i, a + 1 as t, sum(b) as a, 2 * sum(b) as ta, 2 * sum(b + 3) as tat FROM t1 GROUP BY a",
            [("i", "t1", "a", D, "IDENTITY", f"{Q}t1.a AS i", False),
             ("t", "t1", "a", D, "TRANSFORMATION", f"({Q}t1.a + 1) AS t", False),
             ("a", "t1", "b", D, "AGGREGATION", f"sum({Q}t1.b) AS a", False),
             ("ta", "t1", "b", D, "AGGREGATION", (f"(sum({Q}t1.b) * 2L) AS ta", f"(2L * sum({Q}t1.b)) AS ta"), False),
             ("tat", "t1", "b", D, "AGGREGATION",
              (f"(sum(({Q}t1.b + 3)) * 2L) AS tat", f"(2L * sum(({Q}t1.b + 3))) AS tat"), False)], (5, 1),
            [("t1", "a", IND, "GROUP_BY", GROUP_A)]),
    JvmCase("simpleQueryMasking", {"t1": "a int, b int"},
            "SELECT a as i, a + 1 as t, sha1(string(a + 1)) as mt, sum(b) as a, sha1(string(sum(b))) as ma "
            "FROM t1 GROUP BY a",
            [("i", "t1", "a", D, "IDENTITY", f"{Q}t1.a AS i", False),
             ("t", "t1", "a", D, "TRANSFORMATION", f"({Q}t1.a + 1) AS t", False),
             ("mt", "t1", "a", D, "TRANSFORMATION", f"sha1(CAST(CAST(({Q}t1.a + 1) AS STRING) AS BINARY)) AS mt", True),
             ("a", "t1", "b", D, "AGGREGATION", f"sum({Q}t1.b) AS a", False),
             ("ma", "t1", "b", D, "AGGREGATION", f"sha1(CAST(CAST(sum({Q}t1.b) AS STRING) AS BINARY)) AS ma", True)],
            (5, 1), [("t1", "a", IND, "GROUP_BY", GROUP_A)]),
    JvmCase("simpleQueryWithCaseWhenConditional", {"t1": "a int, b int"},
            "SELECT CASE WHEN b > 1 THEN a ELSE a + b END AS cond FROM t1",
            [("cond", "t1", "a", D, "TRANSFORMATION", CASE, False),
             ("cond", "t1", "b", D, "TRANSFORMATION", CASE, False),
             ("cond", "t1", "b", IND, "CONDITIONAL", CASE, False)], (3, 0)),
    JvmCase("simpleQueryWithIfConditional", {"t1": "a int, b int"}, "SELECT IF(b > 1, a, a + b) AS cond FROM t1",
            [("cond", "t1", "a", D, "TRANSFORMATION", IF, False), ("cond", "t1", "b", D, "TRANSFORMATION", IF, False),
             ("cond", "t1", "b", IND, "CONDITIONAL", IF, False)], (3, 0)),
    JvmCase("simpleQueryWithNullIfConditional", {"t1": "a int, b int"}, "SELECT NULLIF(a, b) AS cond FROM t1",
            [("cond", "t1", "a", D, "TRANSFORMATION", NULLIF, False),
             ("cond", "t1", "a", IND, "CONDITIONAL", NULLIF, False),
             ("cond", "t1", "b", IND, "CONDITIONAL", NULLIF, False)], (3, 0)),
    JvmCase("simpleQueryWithNvlConditional", {"t1": "a int, b int"}, "SELECT NVL(a, b) AS cond FROM t1",
            [("cond", "t1", "a", D, "TRANSFORMATION", NVL, False), ("cond", "t1", "a", IND, "CONDITIONAL", NVL, False),
             ("cond", "t1", "b", D, "TRANSFORMATION", NVL, False), ("cond", "t1", "b", IND, "CONDITIONAL", NVL, False)],
            (4, 0)),
    JvmCase("simpleQueryWithNvl2Conditional", {"t1": "a int, b int, c int"}, "SELECT NVL2(a, b, c) AS cond FROM t1",
            [("cond", "t1", "a", IND, "CONDITIONAL", NVL2, False),
             ("cond", "t1", "b", D, "TRANSFORMATION", NVL2, False),
             ("cond", "t1", "c", D, "TRANSFORMATION", NVL2, False)], (3, 0)),
    JvmCase("simpleQueryWithCoalesceConditional", {"t1": "a int, b int"}, "SELECT coalesce(a, b, 0) AS cond FROM t1",
            [("cond", "t1", "a", D, "TRANSFORMATION", COALESCE, False),
             ("cond", "t1", "a", IND, "CONDITIONAL", COALESCE, False),
             ("cond", "t1", "b", D, "TRANSFORMATION", COALESCE, False),
             ("cond", "t1", "b", IND, "CONDITIONAL", COALESCE, False)], (4, 0)),
    JvmCase("simpleQueryExplode", {"t1": "a string"}, "SELECT a FROM (SELECT explode(split(a, ' ')) AS a FROM t1)",
            [("a", "t1", "a", D, "TRANSFORMATION", f"explode(split({Q}t1.a, ' ', -1))", False)], (1, 0)),
    JvmCase("simpleQueryRank", {"t1": "a string, b string, c int"},
            "SELECT a, RANK() OVER (PARTITION BY b ORDER BY c) as rank FROM t1",
            [("a", "t1", "a", D, "IDENTITY", "a", False), ("rank", "t1", "b", IND, "WINDOW", RANK, False),
             ("rank", "t1", "c", IND, "WINDOW", RANK, False)], (3, 0)),
    JvmCase("simpleQueryWindowedAggregate", {"t1": "a int, b string, c int"},
            "SELECT sum(a) OVER (PARTITION BY b ORDER BY c) AS s FROM t1",
            [("s", "t1", "a", D, "AGGREGATION", WSUM, False), ("s", "t1", "b", IND, "WINDOW", WSUM, False),
             ("s", "t1", "c", IND, "WINDOW", WSUM, False)], (3, 0)),
    JvmCase("simpleQueryWindowedTransformation", {"t1": "a int, b string, c int"},
            "SELECT LAG(a, 3, 0) OVER (PARTITION BY b ORDER BY c) AS l FROM t1",
            [("l", "t1", "a", D, "TRANSFORMATION", LAG, False), ("l", "t1", "b", IND, "WINDOW", LAG, False),
             ("l", "t1", "c", IND, "WINDOW", LAG, False)], (3, 0)),
    JvmCase("union", {"t1": "a int, b string", "t2": "a int, c string"},
            "SELECT a, b, 'table1' as source FROM t1 UNION ALL SELECT a, c, 'table2' as source FROM t2",
            [("a", "t1", "a", D, "IDENTITY", "a", False), ("a", "t2", "a", D, "IDENTITY", f"{Q}t2.a", False),
             ("b", "t1", "b", D, "IDENTITY", "b", False), ("b", "t2", "c", D, "IDENTITY", f"{Q}t2.c", False)], (4, 0)),
    JvmCase("simpleQueryMultipleJoinsToSameTable",
            {"t1": "oder_id int, order_date int, shipped_date int", "t2": "date_id int"},
            "SELECT t1.oder_id, t2alias1.date_id as order_date, t2alias2.date_id as shipped_date FROM t1 "
            "LEFT JOIN t2 t2alias1 ON t1.order_date = t2alias1.date_id "
            "LEFT JOIN t2 t2alias2 ON t1.shipped_date = t2alias2.date_id "
            "WHERE t1.order_date IS NOT NULL AND t1.shipped_date IS NOT NULL", [], (3, 8)),
    JvmCase("simpleDistinctQuery", {"t1": "a int"}, "SELECT distinct a as a FROM t1",
            [("a", "t1", "a", D, "IDENTITY", "a", False)], (1, 1), [("t1", "a", IND, "GROUP_BY", GROUP_A)]),
    JvmCase("queryWithProgressivelyComplexTransformations", {"t1": "a string, b string, c string, d string, e string"},
            "SELECT a AS col1, concat(b, e) AS col2, upper(concat(c, e)) AS col3, "
            "substring(upper(concat(d, e)), 1, 5) AS col4 FROM t1", [], (-1, 0)),
]


FILTER_B = f"WHERE (({Q}t1.b IS NOT NULL) AND ({Q}t1.b > 1))"
SHA_MT = f"sha1(CAST(CAST(({Q}t1.a + 1) AS STRING) AS BINARY)) AS mt"
SHA_MA = f"sha1(CAST(CAST(sum({Q}t1.b) AS STRING) AS BINARY)) AS ma"
G_A = ("t1", "a", IND, "GROUP_BY", GROUP_A, False)

#: ColumnLineageWithTransformationTypesOnlyFieldDependenciesTest
CASES += [
    JvmCase("onlyFields.simpleQueryIndirect", {"t1": "a int, b int"}, "SELECT a FROM t1 WHERE b > 1",
            [("a", "t1", "a", D, "IDENTITY", "a", False), ("a", "t1", "b", IND, "FILTER", FILTER_B, False)], (2, 0),
            fields_only=True),
    JvmCase("onlyFields.simpleQueryMultipleIndirect", {"t1": "a int, b int, c int"},
            "SELECT a FROM t1 WHERE b > 1 GROUP BY a, c ORDER BY c",
            [("a", "t1", "a", D, "IDENTITY", "a", False),
             ("a", "t1", "a", IND, "GROUP_BY", f"GROUP BY {Q}t1.a, {Q}t1.c", False),
             ("a", "t1", "b", IND, "FILTER", FILTER_B, False),
             ("a", "t1", "c", IND, "GROUP_BY", f"GROUP BY {Q}t1.a, {Q}t1.c", False),
             ("a", "t1", "c", IND, "SORT", f"SORT BY {Q}t1.c ASC NULLS FIRST", False)], (5, 0), fields_only=True),
    JvmCase("onlyFields.simpleQueryMasking", {"t1": "a int, b int"},
            "SELECT a as i, a + 1 as t, sha1(string(a + 1)) as mt, sum(b) as a, sha1(string(sum(b))) as ma "
            "FROM t1 GROUP BY a",
            [("i", "t1", "a", D, "IDENTITY", f"{Q}t1.a AS i", False), ("i", *G_A),
             ("t", "t1", "a", D, "TRANSFORMATION", f"({Q}t1.a + 1) AS t", False), ("t", *G_A),
             ("mt", "t1", "a", D, "TRANSFORMATION", SHA_MT, True), ("mt", *G_A),
             ("a", "t1", "b", D, "AGGREGATION", f"sum({Q}t1.b) AS a", False), ("a", *G_A),
             ("ma", "t1", "b", D, "AGGREGATION", SHA_MA, True), ("ma", *G_A)], (10, 0), fields_only=True),
    # their count of column dependencies is commented out there (a known bug of theirs): not asserted
    JvmCase("onlyFields.complexQueryCTEJoinsFilter",
            {"t1": "a int, b string", "t2": "a int, c int", "t3": "a int, d int"},
            "WITH tmp as (SELECT * FROM t1 where b = '1'), tmp2 as (SELECT * FROM t2 where c = 1), "
            "tmp3 as (SELECT tmp.a, b, c from tmp join tmp2 on tmp.a = tmp2.a) "
            "SELECT tmp3.a as a, b, c, d FROM tmp3 join t3 on tmp3.a = t3.a order by d",
            [("a", "t1", "a", D, "IDENTITY", "a", False), ("b", "t1", "b", D, "IDENTITY", "b", False),
             ("c", "t2", "c", D, "IDENTITY", "c", False), ("d", "t3", "d", D, "IDENTITY", "d", False)], (-1, 0),
            fields_only=True,
            every_field=[
                ("t1", "a", IND, "JOIN", ("INNER JOIN ON (tmp.a = tmp2.a)",)),
                ("t2", "a", IND, "JOIN", ("INNER JOIN ON (tmp.a = tmp2.a)",)),
                ("t3", "a", IND, "JOIN", (f"INNER JOIN ON (tmp3.a = {Q}t3.a)", f"INNER JOIN ON (tmp.a = {Q}t3.a)")),
                ("t1", "b", IND, "FILTER",
                 (f"WHERE ((({Q}t1.b IS NOT NULL) AND ({Q}t1.b = '1')) AND (tmp.a IS NOT NULL))",)),
                ("t2", "c", IND, "FILTER",
                 (f"WHERE ((({Q}t2.c IS NOT NULL) AND ({Q}t2.c = 1)) AND (tmp2.a IS NOT NULL))",)),
                ("t3", "d", IND, "SORT", (f"SORT BY {Q}t3.d ASC NULLS FIRST",))]),
]


def _column_lineage(spark: Any, capture: Any, tmp: str, case: JvmCase) -> Any:
    for table in ("t1", "t2", "t3"):
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    for table, columns in case.tables.items():
        spark.sql(f"CREATE TABLE {table} ({columns}) USING parquet LOCATION '{tmp}/{table}'")
    try:
        calls = capture.run(lambda: spark.sql(case.query).write.parquet(f"{tmp}/out"))
        conf = {P + "descriptionsEnabled": "true", P + "datasetLineageEnabled": str(not case.fields_only).lower()}
        return action_lineage(calls[-1][1], conf).outputs[0].facets["columnLineage"]
    finally:
        for table in case.tables:
            spark.sql(f"DROP TABLE IF EXISTS {table}")


def _found(fields: Any) -> set[tuple[str, str, str, str, str, bool]]:
    return {(f.name.rsplit("/", 1)[-1], f.field, t.type, t.subtype, t.description, t.masking)
            for f in fields for t in f.transformations}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_their_column_lineage_table(spark, qe_capture, workdir, case):
    facet = _column_lineage(spark, qe_capture, workdir, case)
    per_field = {name: _found(field.inputFields) for name, field in facet.fields.items()}
    for output, table, field, kind, subtype, descriptions, masking in case.fields:
        allowed = descriptions if isinstance(descriptions, tuple) else (descriptions,)
        assert any((table, field, kind, subtype, d, masking) in per_field.get(output, set()) for d in allowed), (
            output, table, field, kind, subtype, per_field.get(output))
    for table, field, kind, subtype, descriptions in case.every_field:
        for output, found in per_field.items():
            assert any((table, field, kind, subtype, d, False) in found for d in descriptions), (output, found)
    dataset = _found(facet.dataset or [])
    for table, field, kind, subtype, description in case.dataset:
        assert (table, field, kind, subtype, description, False) in dataset, dataset
    columns, datasets = case.counts
    if columns >= 0:
        assert sum(len(v) for v in per_field.values()) == columns, per_field
    assert len(dataset) == datasets, dataset
