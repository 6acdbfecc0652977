"""The plugin's own run facets as openlineage-python ``RunFacet`` classes (the JVM integration's facets that have no
class in openlineage-python).

The driver never imports this module (it would import openlineage-python): it describes these facets as
:class:`emitter.deferred.Deferred` calls (``spark_plugin.facets.own``), which the process serializing the events builds.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attr
from openlineage.client.facet_v2 import RunFacet


def environment_facet(values: Mapping[str, str | None]) -> dict[str, Any]:
    """The JVM's ``environment-properties`` facet: a plain dict with the base RunFacet's ``_producer``/
    ``_schemaURL``, as its one field's name has a hyphen, which no attrs class can have."""
    return {**attr.asdict(RunFacet()), "environment-properties": dict(values)}


@attr.define
class SparkPropertiesRunFacet(RunFacet):
    """The JVM integration's ``spark_properties`` facet: the properties named by ``capturedProperties``.

    It has no schema file of its own (Java's ``SparkPropertyFacet`` extends the spec's generic RunFacet),
    so it keeps the base ``RunFacet`` schema URL.
    """

    properties: dict[str, str] = attr.field(factory=dict)


@attr.define
class SparkApplicationDetailsRunFacet(RunFacet):
    """The JVM integration's ``spark_applicationDetails`` facet (a DefaultRunFacet: the base RunFacet schema URL),
    on the events its listener builds from an application, job or SQL execution start: START events."""

    master: str
    appName: str  # noqa: N815 - the JVM's field names
    applicationId: str  # noqa: N815
    deployMode: str  # noqa: N815
    userName: str  # noqa: N815
    driverHost: str | None = None  # noqa: N815
    uiWebUrl: str | None = None  # noqa: N815
    proxyUrl: str | None = None  # noqa: N815
    historyUrl: str | None = None  # noqa: N815


@attr.define
class SparkJobDetailsRunFacet(RunFacet):
    """The JVM integration's ``spark_jobDetails`` facet (a DefaultRunFacet: the base RunFacet schema URL), on the
    events its listener builds from a Spark job's start: here the START of an RDD job."""

    jobId: int  # noqa: N815 - the JVM's field names
    jobDescription: str | None = None  # noqa: N815
    jobGroup: str | None = None  # noqa: N815
    jobCallSite: str | None = None  # noqa: N815


@attr.define
class DebugRunFacet(RunFacet):
    """The JVM integration's ``debug`` run facet, as its serializer writes it (``classpath``, ``system``,
    ``config``, ``logicalPlan``, ``metrics``, ``logs``; its ``memory`` part is never written there either).
    Off by default; on with ``facets.debug.disabled=false``."""

    classpath: dict | None = None
    system: dict | None = None
    config: dict | None = None
    logicalPlan: dict | None = None  # noqa: N815 - the JVM's field name
    metrics: dict | None = None
    logs: list = attr.field(factory=list)


@attr.define
class UnknownEntryRunFacet(RunFacet):
    """The JVM integration's ``spark_unknown`` run facet (off by default, as there)."""

    output: Any = None
    inputs: list = attr.field(factory=list)


@attr.define
class LogicalPlanRunFacet(RunFacet):
    """The JVM integration's ``spark.logicalPlan`` run facet: the optimized plan as Spark's ``toJSON``
    (a list of nodes in pre-order). Off by default, as there."""

    plan: list = attr.field(factory=list)
