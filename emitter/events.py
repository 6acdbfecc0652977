"""RunRecord -> OpenLineage RunEvent (openlineage-python ``event_v2``/``facet_v2`` classes) -> redacted JSON dict.

The emitter adds what every event needs and producers must not forget: the ``jobType`` job facet (Marquez
rejects events without ``jobType.jobType``), the ``parent`` run facet with ``root`` (spec 1-2-0), and
namespaces Marquez accepts (``safe_namespace``).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from openlineage.client import event_v2
from openlineage.client.constants import DEFAULT_PRODUCER
from openlineage.client.facet_v2 import job_type_job, parent_run
from openlineage.client.serde import Serde

from emitter.naming import safe_namespace
from emitter.records import Dataset, RunRecord, RunRef
from emitter.redact import redact_obj

VERSION = "0.1.0"
#: Identifies this project as the producer of its events and facets.
PRODUCER = f"urn:lineage-capture:{VERSION}"


def parent_facet(parent: RunRef, root: RunRef | None) -> parent_run.ParentRunFacet:
    """ParentRun facet; ``root`` defaults to the parent itself (the parent is then the top of the tree)."""
    root = root or parent
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=parent.run_id),
        job=parent_run.Job(namespace=safe_namespace(parent.job.namespace), name=parent.job.name),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=root.run_id),
            job=parent_run.RootJob(namespace=safe_namespace(root.job.namespace), name=root.job.name),
        ),
        producer=PRODUCER,
    )


def _iso(instant: datetime) -> str:
    if instant.tzinfo is None:  # producers should pass aware datetimes; naive ones are taken as UTC
        instant = instant.replace(tzinfo=timezone.utc)
    return instant.isoformat()


def _input(ds: Dataset) -> event_v2.InputDataset:
    return event_v2.InputDataset(namespace=safe_namespace(ds.namespace), name=ds.name, facets=dict(ds.facets),
                                 inputFacets=dict(ds.io_facets) or None)


def _output(ds: Dataset) -> event_v2.OutputDataset:
    return event_v2.OutputDataset(namespace=safe_namespace(ds.namespace), name=ds.name, facets=dict(ds.facets),
                                  outputFacets=dict(ds.io_facets) or None)


def build_event(record: RunRecord) -> event_v2.RunEvent:
    """The openlineage-python RunEvent for one record."""
    job_facets: dict[str, Any] = dict(record.job_facets)
    job_facets["jobType"] = job_type_job.JobTypeJobFacet(
        processingType=record.job_type.processing_type,
        integration=record.job_type.integration,
        jobType=record.job_type.job_type,
        producer=PRODUCER,
    )
    run_facets: dict[str, Any] = dict(record.run_facets)
    if record.parent is not None:
        run_facets["parent"] = parent_facet(record.parent, record.root)
    return event_v2.RunEvent(
        eventType=event_v2.RunState(record.event_type),
        eventTime=_iso(record.event_time),
        run=event_v2.Run(runId=record.run_id, facets=run_facets),
        job=event_v2.Job(namespace=safe_namespace(record.job.namespace), name=record.job.name, facets=job_facets),
        inputs=[_input(ds) for ds in record.inputs],
        outputs=[_output(ds) for ds in record.outputs],
        producer=PRODUCER,
    )


def _own_producer(node: Any) -> Any:
    """Facets built without ``producer=`` carry openlineage-python's default producer: claim them."""
    if isinstance(node, dict):
        return {k: (PRODUCER if k == "_producer" and v == DEFAULT_PRODUCER else _own_producer(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_own_producer(v) for v in node]
    return node


def event_dict(record: RunRecord) -> dict[str, Any]:
    """The JSON-ready, redacted event for one record: what every transport is handed."""
    return redact_obj(_own_producer(Serde.to_dict(build_event(record))))
