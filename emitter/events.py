"""RunRecord -> OpenLineage RunEvent (openlineage-python ``event_v2``/``facet_v2`` classes); the redacted JSON dict
every transport is handed is made from these by :func:`emitter.serialize.event_dict`.

The emitter adds what every event needs and producers must not forget: the ``jobType`` job facet (Marquez
rejects events without ``jobType.jobType``), the ``parent`` run facet with ``root`` (spec 1-2-0), and
namespaces Marquez accepts (``safe_namespace``).
"""
from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache

from openlineage.client import event_v2
from openlineage.client.facet_v2 import job_type_job, parent_run

from emitter.naming import safe_namespace
from emitter.records import Dataset, JobType, RunRecord, RunRef
from emitter.version import VERSION

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


@lru_cache(maxsize=256)  # one instance per job type: serialized once while recent (see _RECENT)
def _job_type_facet(job_type: JobType) -> job_type_job.JobTypeJobFacet:
    return job_type_job.JobTypeJobFacet(processingType=job_type.processing_type, integration=job_type.integration,
                                        jobType=job_type.job_type, producer=PRODUCER)


#: RunState by name: the enum's own lookup by value is ten times slower.
_RUN_STATES = {state.value: state for state in event_v2.RunState}
_namespace = lru_cache(maxsize=1024)(safe_namespace)  # a harvest has a handful of namespaces


def _core_event(record: RunRecord, job: event_v2.Job) -> event_v2.RunEvent:
    """The RunEvent with the producer's own facets, without the emitter's parent facet and without datasets
    (:func:`emitter.serialize.event_dict` writes those out)."""
    return event_v2.RunEvent(
        eventType=_RUN_STATES[record.event_type],
        eventTime=_iso(record.event_time),
        run=event_v2.Run(runId=record.run_id, facets=dict(record.run_facets)),
        job=job,
        inputs=[],
        outputs=[],
        producer=PRODUCER,
    )
