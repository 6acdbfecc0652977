"""The ``columnLineage`` facet of real local-mode Spark writes: one table of SQL queries over two parquet
sources, each with every output field's input fields and transformations as the JVM integration's
``ExpressionTraverser`` rules give them (type, subtype, masking; descriptions are off by default, as there).

``S`` is ``src(a int, b string, c int)``, ``T`` is ``oth(a int, d string)``. An expected row is
``{output field: {(input dataset, input field, type, subtype, masking), ...}}``; ``{}`` means no facet. The table
runs with ``columnLineage.datasetLineageEnabled=false`` (the dataset-wide inputs on every field), as OpenLineage's
own container tests do; the JVM's defaults have a test of their own. A second table reads Derby tables through
JDBC ``dbtable``/``query`` options (the query traced to the tables' columns)."""
from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from spark_plugin.plan_lineage import action_lineage

P = "spark.openlineage."
DIRECT, INDIRECT = "DIRECT", "INDIRECT"


class Cll(NamedTuple):
    id: str
    query: str  # SELECT over S and T
    fields: dict[str, set[tuple[str, str, str, str, bool]]]
    conf: dict[str, str] = {}


def ident(ds: str, f: str) -> tuple[str, str, str, str, bool]:
    return (ds, f, DIRECT, "IDENTITY", False)


def tr(ds: str, f: str, masking: bool = False) -> tuple[str, str, str, str, bool]:
    return (ds, f, DIRECT, "TRANSFORMATION", masking)


def agg(ds: str, f: str, masking: bool = False) -> tuple[str, str, str, str, bool]:
    return (ds, f, DIRECT, "AGGREGATION", masking)


def ind(ds: str, f: str, subtype: str) -> tuple[str, str, str, str, bool]:
    return (ds, f, INDIRECT, subtype, False)


JOINED = {ind("src", "a", "JOIN"), ind("oth", "a", "JOIN"), ind("src", "a", "FILTER"), ind("oth", "a", "FILTER"),
          ind("oth", "d", "SORT")}
ROLLED = {ind("src", "b", "GROUP_BY"), ind("src", "c", "GROUP_BY")}

CASES = [
    Cll("identity_and_transformation", "select a, upper(b) as u from S",
        {"a": {ident("src", "a")}, "u": {tr("src", "b")}}),
    Cll("filter_goes_to_fields_with_inputs", "select a, 1 as one from S where c > 0",
        {"a": {ident("src", "a"), ind("src", "c", "FILTER")}}),
    Cll("case_when", "select case when c > 0 then b else 'none' end as x from S",
        {"x": {ind("src", "c", "CONDITIONAL"), tr("src", "b")}}),
    Cll("if_and_coalesce", "select if(c > 0, a, c) as x, coalesce(b, 'z') as y from S",
        {"x": {ind("src", "c", "CONDITIONAL"), tr("src", "a"), tr("src", "c")},
         "y": {ind("src", "b", "CONDITIONAL"), tr("src", "b")}}),
    Cll("masking_hash_and_count", "select sha2(b, 256) as h, count(a) as n from S group by b",
        {"h": {tr("src", "b", masking=True), ind("src", "b", "GROUP_BY")},
         "n": {agg("src", "a", masking=True), ind("src", "b", "GROUP_BY")}}),
    Cll("masking_mask_and_md5_through_a_cast", "select mask(b) as m, md5(b) as h, length(b) as n from S",
        {"m": {tr("src", "b", masking=True)}, "h": {tr("src", "b", masking=True)}, "n": {tr("src", "b")}}),
    Cll("aggregate_and_group_by", "select b, sum(a) + 1 as s from S group by b",
        {"b": {ident("src", "b"), ind("src", "b", "GROUP_BY")},
         "s": {agg("src", "a"), ind("src", "b", "GROUP_BY")}}),
    Cll("window_rank_and_sum",
        "select a, row_number() over (partition by b order by c) as rn, sum(a) over (partition by b) as s from S",
        {"a": {ident("src", "a")},
         "rn": {ind("src", "b", "WINDOW"), ind("src", "c", "WINDOW")},
         "s": {agg("src", "a"), ind("src", "b", "WINDOW")}}),
    Cll("explode", "select a, e from S lateral view explode(array(a, c)) t as e",
        {"a": {ident("src", "a")}, "e": {tr("src", "a"), tr("src", "c")}}),
    # the optimizer's `isnotnull` filters on the join keys are FILTERs of the plan, for the JVM too
    Cll("join_and_sort", "select S.a, T.d from S join T on S.a = T.a order by T.d",
        {"a": {ident("src", "a"), *JOINED},
         "d": {ident("oth", "d"), *JOINED}}),
    Cll("union_distinct_adds_no_group_by", "select a from S union select a from T",
        {"a": {ident("src", "a"), ident("oth", "a")}}),
    Cll("union_all_then_group_by",
        "select a, count(*) as n from (select a from S union all select a from T) group by a",
        {"a": {ident("src", "a"), ident("oth", "a"), ind("src", "a", "GROUP_BY"), ind("oth", "a", "GROUP_BY")}}),
    Cll("through_a_subquery", "select x as y, n from (select upper(b) as x, a + c as n from S)",
        {"y": {tr("src", "b")}, "n": {tr("src", "a"), tr("src", "c")}}),
    Cll("case_inside_an_aggregate", "select sum(case when b = 'x' then a end) as s from S",
        {"s": {ind("src", "b", "CONDITIONAL"), agg("src", "a")}}),
    # beyond the JVM (no rule for Expand there: no inputs for b, c, nor the GROUP_BY)
    Cll("rollup", "select b, c, sum(a) as s from S group by rollup(b, c)",
        {"b": {ident("src", "b"), *ROLLED}, "c": {ident("src", "c"), *ROLLED}, "s": {agg("src", "a"), *ROLLED}}),
    Cll("grouping_sets", "select b, count(a) as n from S group by grouping sets ((b), ())",
        {"b": {ident("src", "b"), ind("src", "b", "GROUP_BY")},
         "n": {agg("src", "a", masking=True), ind("src", "b", "GROUP_BY")}}),
    # beyond the JVM too (no rule for BatchEvalPython there: a Python UDF's output has no inputs)
    Cll("python_udf", "select a, plus(c, a) * 2 as p from S where plus(a, 1) > 0",
        {"a": {ident("src", "a"), ind("src", "a", "FILTER")},
         "p": {tr("src", "c"), tr("src", "a"), ind("src", "a", "FILTER")}}),
    Cll("only_literals_have_no_facet", "select 1 as one from S", {}),
    Cll("schema_size_limit", "select a, b from S", {}, {P + "columnLineage.schemaSizeLimit": "1"}),
]


def _seen(facet: Any) -> dict[str, set[tuple[str, str, str, str, bool]]]:
    if facet is None:
        return {}
    return {name: {(f.name.rsplit("/", 1)[-1], f.field, t.type, t.subtype, t.masking)
                   for f in fields.inputFields for t in f.transformations}
            for name, fields in facet.fields.items()}


def _lineage(spark: Any, capture: Any, tmp: str, query: str, conf: dict[str, str]) -> Any:
    spark.createDataFrame([(1, "x", 2)], "a int, b string, c int").write.parquet(f"{tmp}/src")
    spark.createDataFrame([(1, "y")], "a int, d string").write.parquet(f"{tmp}/oth")
    spark.read.parquet(f"{tmp}/src").createOrReplaceTempView("S")
    spark.read.parquet(f"{tmp}/oth").createOrReplaceTempView("T")
    # a lambda: cloudpickle sends it by value (this module is not importable in Spark's Python workers)
    spark.udf.register("plus", lambda x, y: x + y, "int")
    calls = capture.run(lambda: spark.sql(query).write.parquet(f"{tmp}/out"))
    lineage = action_lineage(calls[-1][1], conf)
    return lineage.outputs[0].facets.get("columnLineage")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_column_lineage(spark, qe_capture, workdir, case):
    facet = _lineage(spark, qe_capture, workdir, case.query, {P + "columnLineage.datasetLineageEnabled": "false",
                                                              **case.conf})
    assert _seen(facet) == case.fields
    assert facet is None or facet.dataset is None
    for fields in (facet.fields.values() if facet else []):
        assert all(t.description == "" for f in fields.inputFields for t in f.transformations)


def test_descriptions_and_dataset_lineage_follow_the_jvm_keys(spark, qe_capture, workdir):
    """``columnLineage.descriptionsEnabled=true``: Spark's SQL of each step; ``datasetLineageEnabled=true``: the
    dataset-wide inputs in the facet's ``dataset`` list instead of on every field."""
    conf = {P + "columnLineage.descriptionsEnabled": "true", P + "columnLineage.datasetLineageEnabled": "true"}
    facet = _lineage(spark, qe_capture, workdir, "select a, upper(b) as u from S where c > 0 order by a", conf)
    assert {name: [(f.field, t.subtype, t.description) for f in fields.inputFields for t in f.transformations]
            for name, fields in facet.fields.items()} == {
        "a": [("a", "IDENTITY", "a")],  # a plain column: described by its name
        "u": [("b", "TRANSFORMATION", "upper(s.b) AS u")]}
    assert sorted((f.field, t.subtype, t.description) for f in facet.dataset for t in f.transformations) == [
        ("a", "SORT", "SORT BY s.a ASC NULLS FIRST"), ("c", "FILTER", "WHERE ((s.c IS NOT NULL) AND (s.c > 0))")]


def test_the_jvm_defaults_list_dataset_wide_inputs_apart_without_descriptions(spark, qe_capture, workdir):
    """No ``columnLineage.*`` key: the JVM's defaults (``datasetLineageEnabled`` true, descriptions off)."""
    facet = _lineage(spark, qe_capture, workdir, "select a, upper(b) as u, 1 as one from S where c > 0 order by a", {})
    assert _seen(facet) == {"a": {ident("src", "a")}, "u": {tr("src", "b")}}
    assert sorted((f.field, t.type, t.subtype, t.description, t.masking) for f in facet.dataset
                  for t in f.transformations) == [("a", INDIRECT, "SORT", "", False),
                                                  ("c", INDIRECT, "FILTER", "", False)]


DERBY = "org.apache.derby.jdbc.EmbeddedDriver"


class JdbcCll(NamedTuple):
    id: str
    read: dict[str, str]  # the JDBC read's `query` or `dbtable` option, over Derby tables src and oth
    fields: dict[str, set[tuple[str, str, str, str, bool]]]
    select: str = "select * from J"  # what is written, over the JDBC read's view J


# Spark creates the Derby tables with quoted lower-case column names: the queries quote them too
JOINED_QUERY = 'select s."b" || o."d" as "x" from src s join oth o on s."a" = o."a"'
JDBC_CASES = [
    JdbcCll("dbtable", {"dbtable": "src"}, {"a": {ident("src", "a")}, "b": {ident("src", "b")},
                                            "c": {ident("src", "c")}}),
    JdbcCll("select_star_is_every_column_by_name", {"query": "select * from src"},
            {"a": {ident("src", "a")}, "b": {ident("src", "b")}, "c": {ident("src", "c")}}),
    # the database's column, not the relation's alias for it (the JVM's SqlCollector)
    JdbcCll("an_alias_reads_its_column", {"query": 'select "a", "b" as "n" from src'},
            {"a": {ident("src", "a")}, "n": {ident("src", "b")}}),
    JdbcCll("several_tables", {"query": 'select s."a", ' + JOINED_QUERY.removeprefix("select ")},
            {"a": {ident("src", "a")}, "x": {ident("src", "b"), ident("oth", "d")}}),
    JdbcCll("subquery_dbtable", {"dbtable": '(select "a" + "c" as "s" from src) q'},
            {"s": {ident("src", "a"), ident("src", "c")}}),
    JdbcCll("then_transformed_in_spark", {"query": JOINED_QUERY},
            {"u": {tr("src", "b"), tr("oth", "d")}}, "select upper(x) as u from J"),
    JdbcCll("a_count_reads_no_column", {"query": 'select count(*) as "n" from src'}, {}),
]


@pytest.fixture(scope="module")
def derby_url(spark, tmp_path_factory) -> str:
    url = f"jdbc:derby:{tmp_path_factory.mktemp('cll_jdbc')}/db;create=true"
    spark.createDataFrame([(1, "x", 2)], "a int, b string, c int").write.jdbc(url, "src", properties={"driver": DERBY})
    spark.createDataFrame([(1, "y")], "a int, d string").write.jdbc(url, "oth", properties={"driver": DERBY})
    return url


@pytest.mark.parametrize("case", JDBC_CASES, ids=[c.id for c in JDBC_CASES])
def test_column_lineage_of_jdbc_reads(spark, qe_capture, workdir, derby_url, case):
    """A JDBC query's columns are traced through the query to the tables it reads (the JVM's
    ``JdbcColumnLineageVisitor``): each relation field to the columns it is computed from, as IDENTITY."""
    reader = spark.read.format("jdbc").option("url", derby_url).option("driver", DERBY)
    for key, value in case.read.items():
        reader = reader.option(key, value)
    reader.load().createOrReplaceTempView("J")
    calls = qe_capture.run(lambda: spark.sql(case.select).write.parquet(f"{workdir}/out"))
    lineage = action_lineage(calls[-1][1], {})
    assert _seen(lineage.outputs[0].facets.get("columnLineage")) == case.fields


def test_a_read_of_several_paths_gives_each_path_its_column(spark, qe_capture, workdir):
    """A relation over several paths: each field reads the same-named column of every path, as the JVM's
    ``InputFieldsCollector``."""
    for part in ("p1", "p2"):
        spark.createDataFrame([(1, "x")], "a int, b string").write.parquet(f"{workdir}/{part}")
    calls = qe_capture.run(lambda: spark.read.parquet(f"{workdir}/p1", f"{workdir}/p2").selectExpr("a", "upper(b) as u")
                           .write.parquet(f"{workdir}/out"))
    facet = action_lineage(calls[-1][1], {}).outputs[0].facets.get("columnLineage")
    assert _seen(facet) == {"a": {ident("p1", "a"), ident("p2", "a")}, "u": {tr("p1", "b"), tr("p2", "b")}}


class CachedCll(NamedTuple):
    id: str
    cached: Any  # S (a DataFrame of src) -> the DataFrame cached
    query: Any  # the cached DataFrame -> what is written
    fields: dict[str, set[tuple[str, str, str, str, bool]]]


CACHED_CASES = [
    CachedCll("used_as_cached", lambda s: s.selectExpr("a", "upper(b) as u"), lambda d: d,
              {"a": {ident("src", "a")}, "u": {tr("src", "b")}}),
    # the cached plan's own filter and projection are traced; the renamed column gets a new id
    CachedCll("renamed_after_the_cache", lambda s: s.selectExpr("a", "upper(b) as u", "c").where("c > 0"),
              lambda d: d.withColumnRenamed("u", "uu").select("uu", "a"),
              {"uu": {tr("src", "b"), ind("src", "c", "FILTER")}, "a": {ident("src", "a"), ind("src", "c", "FILTER")}}),
    # a cache of a cached DataFrame: both plans traced
    CachedCll("cache_of_a_cache",
              lambda s: s.selectExpr("a", "upper(b) as u").cache().selectExpr("u as v", "a + 1 as n"),
              lambda d: d, {"v": {tr("src", "b")}, "n": {tr("src", "a")}}),
    # the second use of the cache has ids of its own
    CachedCll("self_join", lambda s: s.selectExpr("a", "lower(b) as u"),
              lambda d: d.alias("x").join(d.alias("y"), "a").selectExpr("a", "y.u as yu"),
              {"a": {ident("src", "a"), ind("src", "a", "JOIN"), ind("src", "a", "FILTER")},
               "yu": {tr("src", "b"), ind("src", "a", "JOIN"), ind("src", "a", "FILTER")}}),
]


@pytest.mark.parametrize("case", CACHED_CASES, ids=[c.id for c in CACHED_CASES])
def test_column_lineage_through_a_cached_dataframe(spark, qe_capture, workdir, case):
    """A cached DataFrame (``InMemoryRelation``): its plan is traced as the rest, on Spark 4 (which keeps it in
    the relation) and 3.5 (only its physical plan's logical links), each attribute of the relation being the
    cached plan's output at the same position."""
    spark.createDataFrame([(1, "x", 2)], "a int, b string, c int").write.parquet(f"{workdir}/src")
    cached = case.cached(spark.read.parquet(f"{workdir}/src")).cache()
    try:
        calls = qe_capture.run(lambda: case.query(cached).write.parquet(f"{workdir}/out"))
        lineage = action_lineage(calls[-1][1], {P + "columnLineage.datasetLineageEnabled": "false"})
    finally:
        spark.catalog.clearCache()  # this one and any cache under it
    assert _seen(lineage.outputs[0].facets.get("columnLineage")) == case.fields


def test_descriptions_inside_a_cached_plan_are_its_own(spark, qe_capture, workdir):
    """With descriptions on, a cached plan's steps are described from its own JVM nodes (on 3.5 a plan apart from
    the action's: its paths start at its own root). Spark 4 keeps the analyzed cached plan, 3.5 the optimized one
    (with the inferred ``IS NOT NULL``)."""
    spark.createDataFrame([(1, "x", 2)], "a int, b string, c int").write.parquet(f"{workdir}/src")
    cached = spark.read.parquet(f"{workdir}/src").selectExpr("a", "upper(b) as u").where("a > 0").cache()
    try:
        calls = qe_capture.run(lambda: cached.selectExpr("lower(u) as l").write.parquet(f"{workdir}/out"))
        conf = {P + "columnLineage.descriptionsEnabled": "true"}
        facet = action_lineage(calls[-1][1], conf).outputs[0].facets["columnLineage"]
    finally:
        spark.catalog.clearCache()
    assert [(f.field, t.subtype, t.description) for f in facet.fields["l"].inputFields
            for t in f.transformations] == [("b", "TRANSFORMATION", "lower(u) AS l")]
    [(field, description)] = [(f.field, t.description) for f in facet.dataset for t in f.transformations]
    assert field == "a"
    assert description in ("WHERE (a > 0)", "WHERE ((a IS NOT NULL) AND (a > 0))")


# a JDBC query's tables as the SQL engine names them (a part holding a dot joined as it is) -> the columns each
# relation field is computed from
TRACED_CASES = [
    ("SELECT o.x AS a, o.y AS b FROM dbo.[t.2024] o", "jdbc:sqlserver://h:1433;databaseName=d",
     {"a": [("dbo.t.2024", "x")], "b": [("dbo.t.2024", "y")]}),
    ("SELECT o.x AS a, r.z AS b FROM dbo.orders o JOIN [10.0.0.5].db.dbo.refs r ON r.id = o.id",
     "jdbc:sqlserver://h:1433",
     {"a": [("dbo.orders", "x")], "b": [("10.0.0.5.db.dbo.refs", "z")]}),
    ("SELECT x AS a, y AS b FROM s.t", "jdbc:postgresql://h/db", {"a": [("s.t", "x")], "b": [("s.t", "y")]}),
]


@pytest.mark.parametrize("sql, url, expected", TRACED_CASES)
def test_a_jdbc_querys_columns_are_traced_to_the_tables_the_engine_names(sql: str, url: str,
                                                                         expected: dict[str, Any]) -> None:
    from emitter.deferred import facet_v2
    from spark_plugin.plan_jdbc import _jdbc_dialect, _sql_tables, _traced_columns

    fields = facet_v2.schema_dataset.SchemaDatasetFacetFields
    schema = facet_v2.schema_dataset.SchemaDatasetFacet(fields=[fields(name="a", type="int"),
                                                                fields(name="b", type="int")])
    dialect = _jdbc_dialect(url)
    assert _traced_columns(sql, dialect, schema, _sql_tables(sql, dialect)) == expected
