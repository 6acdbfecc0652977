"""Run and job facets the plugin puts on every event, and the ``facets.<name>.disabled`` filter."""
from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

import attr
from openlineage.client.facet_v2 import RunFacet, ownership_job, processing_engine_run, tags_job, tags_run

from emitter.records import Dataset, RunRecord
from spark_plugin.config import PluginConfig

DISTRIBUTION = "lineage-capture"


@attr.define
class SparkPropertiesRunFacet(RunFacet):
    """The JVM integration's ``spark_properties`` facet: the properties named by ``capturedProperties``.

    It has no schema file of its own (Java's ``SparkPropertyFacet`` extends the spec's generic RunFacet),
    so it keeps the base ``RunFacet`` schema URL.
    """

    properties: dict[str, str] = attr.field(factory=dict)


@functools.lru_cache(maxsize=1)
def adapter_version() -> str:
    """This package's installed version (the ``openlineageAdapterVersion`` of ``processing_engine``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # running from a source checkout that is not installed
        from emitter.events import VERSION

        return VERSION


def engine_facets(spark_version: str, spark_conf: Mapping[str, str], captured: Iterable[str]) -> dict[str, Any]:
    """``processing_engine`` and ``spark_properties``: the same on every event of one application."""
    return {
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
            version=spark_version, name="spark", openlineageAdapterVersion=adapter_version()
        ),
        "spark_properties": SparkPropertiesRunFacet(
            properties={key: spark_conf[key] for key in captured if key in spark_conf}
        ),
    }


def config_run_facets(config: PluginConfig) -> dict[str, Any]:
    """``tags`` from ``run.tags``, on every event's run (the JVM's ``TagsRunFacetBuilder``); none when unset."""
    if not config.run_tags:
        return {}
    return {"tags": tags_run.TagsRunFacet(
        tags=[tags_run.TagsRunFacetFields(key=k, value=v, source=s) for k, v, s in config.run_tags])}


def config_job_facets(config: PluginConfig) -> dict[str, Any]:
    """``tags`` from ``job.tags`` and ``ownership`` from ``job.owners.<type>``, on every event's job (the JVM's
    ``TagsJobFacetBuilder`` and ``OwnershipJobFacetBuilder``); each only when configured."""
    facets: dict[str, Any] = {}
    if config.job_tags:
        facets["tags"] = tags_job.TagsJobFacet(
            tags=[tags_job.TagsJobFacetFields(key=k, value=v, source=s) for k, v, s in config.job_tags])
    if config.owners:
        facets["ownership"] = ownership_job.OwnershipJobFacet(
            owners=[ownership_job.Owner(name=name, type=kind) for kind, name in config.owners])
    return facets


def _keep(facets: Mapping[str, Any], disabled: frozenset[str]) -> dict[str, Any]:
    return {name: facet for name, facet in facets.items() if name not in disabled}


def _dataset(ds: Dataset, disabled: frozenset[str]) -> Dataset:
    return Dataset(ds.namespace, ds.name, facets=_keep(ds.facets, disabled), io_facets=_keep(ds.io_facets, disabled))


def without_disabled(record: RunRecord, disabled: frozenset[str]) -> RunRecord:
    """``record`` minus every run, job and dataset facet named in ``disabled``."""
    if not disabled:
        return record
    return attr.evolve(
        record,
        run_facets=_keep(record.run_facets, disabled),
        job_facets=_keep(record.job_facets, disabled),
        inputs=tuple(_dataset(ds, disabled) for ds in record.inputs),
        outputs=tuple(_dataset(ds, disabled) for ds in record.outputs),
    )
