"""Plain records the producers hand to the emitter: what happened, not how it becomes an event.

A producer (the Spark plugin, a harvester) describes one run state change as a :class:`RunRecord`.
Facets are openlineage-python ``facet_v2`` instances; the emitter adds jobType, parent and redaction. A facet
instance is not changed once handed over (the emitter reuses its serialized form for the next event carrying it).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import attrs

#: The OpenLineage run states the producers use.
START, RUNNING, COMPLETE, FAIL, ABORT = "START", "RUNNING", "COMPLETE", "FAIL", "ABORT"
TERMINAL_STATES = frozenset({COMPLETE, FAIL, ABORT})
EVENT_TYPES = frozenset({START, RUNNING, COMPLETE, FAIL, ABORT})


@attrs.frozen
class JobRef:
    """A job: its namespace and name."""

    namespace: str
    name: str


@attrs.frozen
class RunRef:
    """One run of a job, as a parent or root of another run."""

    run_id: str
    job: JobRef

    @classmethod
    def parse(cls, parent_id: str) -> RunRef:
        """Read ``{namespace}/{job}/{runId}``, the form Airflow's ``lineage_parent_id`` macro renders.

        The namespace may itself contain ``/`` (``sqlserver://host:1433``): the run id is the last part
        and the job name the one before it. Raises ValueError on anything else.
        """
        namespace, sep, rest = parent_id.strip().rpartition("/")
        namespace, sep2, job = namespace.rpartition("/")
        if not (sep and sep2 and namespace and job and rest):
            raise ValueError(f"not a <namespace>/<job>/<runId> parent id: {parent_id!r}")
        return cls(run_id=rest, job=JobRef(namespace, job))


@attrs.frozen
class JobType:
    """The jobType job facet's fields; Marquez rejects events without ``jobType``."""

    job_type: str  # APPLICATION, SQL_JOB, QUERY, TASK, ...
    integration: str  # SPARK, SQLSERVER, SNOWFLAKE
    processing_type: str = "BATCH"  # BATCH, STREAMING, NONE


@attrs.frozen
class Dataset:
    """An input or output dataset with its facets (``facet_v2`` dataset facet instances)."""

    namespace: str
    name: str
    facets: Mapping[str, Any] = attrs.field(factory=dict)
    #: input-only facets (``inputFacets``) or output-only facets (``outputFacets``: outputStatistics)
    io_facets: Mapping[str, Any] = attrs.field(factory=dict)


def _datasets(datasets: Iterable[Dataset]) -> tuple[Dataset, ...]:
    """Producers may pass lists; the record keeps a tuple (a typed converter: mypy cannot read ``tuple``)."""
    return tuple(datasets)


@attrs.frozen
class RunRecord:
    """One state change of one run: becomes one RunEvent.

    ``parent`` is the run this run belongs to; ``root`` the top of the hierarchy (defaults to the
    parent's own root as known by the producer; when None the parent is the root).
    """

    event_type: str = attrs.field(validator=attrs.validators.in_(EVENT_TYPES))
    event_time: datetime
    job: JobRef
    run_id: str
    job_type: JobType
    parent: RunRef | None = None
    root: RunRef | None = None
    inputs: tuple[Dataset, ...] = attrs.field(default=(), converter=_datasets)
    outputs: tuple[Dataset, ...] = attrs.field(default=(), converter=_datasets)
    run_facets: Mapping[str, Any] = attrs.field(factory=dict)
    job_facets: Mapping[str, Any] = attrs.field(factory=dict)
    #: write ``inputFacets``/``outputFacets`` on every dataset, ``{}`` when it has none (the JVM Spark
    #: integration's SQL events do); off: an empty container is left out
    io_containers: bool = False

    @property
    def is_terminal(self) -> bool:
        return self.event_type in TERMINAL_STATES

    @property
    def run(self) -> RunRef:
        return RunRef(self.run_id, self.job)


class unvalidated:  # noqa: N801 - used like a function: ``with unvalidated():``
    """``attrs.validators.disabled()`` at 40% of its cost (a class, not a generator context manager).

    openlineage-python's validators re-check what we build from our own records (UUIDs, ISO times, the
    constant schema URLs) and cost three quarters of a build; the official JSON schemas check our events in
    the tests instead. The flag is process-wide, so a host process holds it for the build only; a ``harvest``
    process holds it for the whole run, and the nested ones then switch nothing.
    """

    __slots__ = ("_was",)

    def __enter__(self) -> None:
        self._was = attrs.validators.get_disabled()
        if not self._was:  # nested in an outer unvalidated() (a whole harvest): nothing to switch
            attrs.validators.set_disabled(True)

    def __exit__(self, *_exc: object) -> None:
        if not self._was:
            attrs.validators.set_disabled(False)
