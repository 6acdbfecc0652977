"""Facets described as deferred calls (emitter/deferred.py) serialize exactly as the openlineage-python instances they
stand for, pickle as their call, give back the fields passed without building anything; the Spark plugin's modules
make their facets without importing openlineage-python's client; emitter.naming's partition trimmers are
openlineage-python's, loaded without its client package."""
from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    error_message_run,
    lifecycle_state_change_dataset,
    schema_dataset,
    symlinks_dataset,
)

from emitter.deferred import Constructors, Deferred, facet_v2
from emitter.naming import paths
from emitter.serialize import _plain

ROOT = Path(__file__).resolve().parents[2]

# (deferred, the real instance)
CASES = [
    pytest.param(facet_v2.schema_dataset.SchemaDatasetFacet(fields=[
        facet_v2.schema_dataset.SchemaDatasetFacetFields(name="a", type="struct", fields=[
            facet_v2.schema_dataset.SchemaDatasetFacetFields(name="b", type="int", description="inner")])]),
        schema_dataset.SchemaDatasetFacet(fields=[schema_dataset.SchemaDatasetFacetFields(
            name="a", type="struct", fields=[
                schema_dataset.SchemaDatasetFacetFields(name="b", type="int", description="inner")])]), id="nested"),
    pytest.param(facet_v2.lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
        lifecycleStateChange=facet_v2.lifecycle_state_change_dataset.LifecycleStateChange("OVERWRITE")),
        lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=lifecycle_state_change_dataset.LifecycleStateChange("OVERWRITE")), id="enum"),
    pytest.param(facet_v2.symlinks_dataset.SymlinksDatasetFacet(identifiers=(
        facet_v2.symlinks_dataset.Identifier(namespace="hive", name="db.t", type="TABLE"),)),
        symlinks_dataset.SymlinksDatasetFacet(identifiers=(  # type: ignore[arg-type]
            symlinks_dataset.Identifier(namespace="hive", name="db.t", type="TABLE"),)), id="tuple"),
    pytest.param(facet_v2.column_lineage_dataset.ColumnLineageDatasetFacet(fields={
        "a": facet_v2.column_lineage_dataset.Fields(inputFields=[facet_v2.column_lineage_dataset.InputField(
            namespace="file", name="/in", field="x", transformations=[facet_v2.column_lineage_dataset.Transformation(
                type="DIRECT", subtype="IDENTITY", description="", masking=False)])])}),
        column_lineage_dataset.ColumnLineageDatasetFacet(fields={
            "a": column_lineage_dataset.Fields(inputFields=[column_lineage_dataset.InputField(
                namespace="file", name="/in", field="x", transformations=[column_lineage_dataset.Transformation(
                    type="DIRECT", subtype="IDENTITY", description="", masking=False)])])}), id="dict of lists"),
    pytest.param(facet_v2.error_message_run.ErrorMessageRunFacet(message="boom password=hunter2",
                                                                 programmingLanguage="PYTHON"),
                 error_message_run.ErrorMessageRunFacet(message="boom password=hunter2", programmingLanguage="PYTHON"),
                 id="redacted like the instance"),
]


@pytest.mark.parametrize("deferred,real", CASES)
def test_a_deferred_facet_serializes_as_the_instance(deferred, real):
    assert isinstance(deferred, Deferred)
    assert _plain(deferred) == _plain(real)
    assert "hunter2" not in str(_plain(deferred))
    assert deferred == real


@pytest.mark.parametrize("deferred,real", CASES)
def test_a_deferred_facet_pickles_as_its_call(deferred, real):
    again = pickle.loads(pickle.dumps(deferred))
    assert again._built is None and again.target == deferred.target
    assert again == real


def test_the_fields_passed_are_read_back_without_building():
    fields = [facet_v2.schema_dataset.SchemaDatasetFacetFields(name="a", type="int")]
    facet = facet_v2.schema_dataset.SchemaDatasetFacet(fields=fields)
    assert facet.fields is fields and [f.name for f in facet.fields] == ["a"]
    assert facet._built is None and fields[0]._built is None
    assert facet.fields[0].description is None  # a default: the instance is built for it
    assert fields[0]._built is not None


def test_a_target_that_does_not_exist_fails_when_built_not_when_described():
    facet = Constructors("emitter.deferred").NoSuchFacet(x=1)
    with pytest.raises(AttributeError):
        facet.build()


def test_the_spark_plugins_facets_are_made_without_openlineage_python():
    """In a fresh interpreter: the plugin's modules imported and their facets made (schema, symlinks, column
    lineage, run facets), and openlineage-python's client never imported."""
    code = """
import sys
from spark_plugin import facets, lifecycle, plan_lineage, column_lineage, plan_tree, streaming, rdd_jobs
from spark_plugin.config import PluginConfig
from emitter.naming import trim_partitions
config = PluginConfig.from_spark_conf({"spark.app.name": "x", "spark.openlineage.run.tags": "a:b",
                                       "spark.openlineage.job.owners.team": "t"})
made = [facets.engine_facets("4.0", {}, ()), facets.config_run_facets(config, {}), facets.config_job_facets(config),
        plan_tree.struct_schema({"type": "struct", "fields": [{"name": "a", "type": "long", "nullable": True}]}),
        trim_partitions("/data/t/dt=2025-01-01")]
assert made[-1] == "/data/t", made
assert not [m for m in sys.modules if m.startswith("openlineage.")], sorted(sys.modules)
"""
    ran = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-3000:]


def test_the_trimmers_are_openlineage_pythons_builtin_ones():
    from openlineage.client.dataset.dataset import BUILTIN_TRIMMERS

    assert paths.BUILTIN_TRIMMER_NAMES == tuple(cls.__name__ for cls in BUILTIN_TRIMMERS)
    standalone = paths._trimmers_module()
    for name in ["/a/b/dt=2025-01-01", "/a/b/2025/01/02", "/a/b/20250901T0930Z", "/a/b/2025-09", "/a/b/c",
                 "/a/b/01.09.2025", "/a/k=v/b"]:
        assert [getattr(standalone, n)().trim(name) for n in paths.BUILTIN_TRIMMER_NAMES] == [
            cls().trim(name) for cls in BUILTIN_TRIMMERS], name
