"""The JSON-ready, redacted form of the events (:func:`event_dict`), and the memos that make it cheap.

Why memos: a harvest emits two events per statement run and shares most of their parts (the job, its jobType
facet, the parent facet, one Dataset instance per table), a Spark application shares its schema facets between
actions. Each part is serialized (and redacted) once while recent, remembered by the *identity* of the instance
it came from; the instance is kept in the memo, so its id cannot be reused while remembered.

The rule this relies on: **a facet, Dataset or job-facet mapping never changes after it is handed to the
emitter** (:mod:`emitter.records` says so to producers). ``LINEAGE_CAPTURE_CHECK_MEMOS=1`` makes every memo hit
re-serialize its instance and raise :class:`MemoStale` if the instance changed; the test suite runs with it on.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from datetime import date
from enum import Enum
from functools import lru_cache
from typing import Any
from uuid import UUID

import attrs
from openlineage.client import event_v2
from openlineage.client.constants import DEFAULT_PRODUCER

from emitter.deferred import Deferred
from emitter.events import PRODUCER, _core_event, _input, _job_type_facet, _namespace, _output, parent_facet
from emitter.records import Dataset, JobRef, JobType, RunRecord, RunRef
from emitter.redact import MASK, is_secret_key, redact

#: Re-check every memo hit (tests): the rule above, enforced where it can be observed.
CHECK_MEMOS = os.environ.get("LINEAGE_CAPTURE_CHECK_MEMOS", "") not in ("", "0", "false")


class MemoStale(AssertionError):
    """A remembered instance changed after it was handed over: its memoised form would be stale."""


def _memo_hit(memo: dict[int, Any], key: int, remembered: Any, fresh: Callable[[], Any], what: str) -> Any:
    """A memo's answer. With :data:`CHECK_MEMOS`, the entry is dropped and the instance serialized again: it must
    give the same answer, else the instance changed after it was handed over (:class:`MemoStale`)."""
    if not CHECK_MEMOS:
        return remembered
    del memo[key]
    again = fresh()
    if again != remembered:
        raise MemoStale(f"{what} changed after it was handed to the emitter: {remembered!r} -> {again!r}")
    return remembered


#: Fields whose values the emitter itself generates (ids, times, enums, schema URLs) or that are a source's own
#: ids (a warehouse's query id): no secret can be there, and skipping them halves the redaction work per event.
_OWN_FIELDS = frozenset({"_producer", "_schemaURL", "schemaURL", "producer", "eventType", "eventTime", "runId",
                         "jobType", "processingType", "integration", "externalQueryId"})
#: attrs class -> its fields as (name, whether the emitter itself generates the value)
_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}
#: Facet instances serialized lately, by identity (the instance is kept, so its id cannot be reused): a run's
#: START and COMPLETE share their ``sql`` facet, a Spark app's actions their schema facets.
_RECENT: dict[int, tuple[Any, dict[str, Any]]] = {}
_RECENT_MAX = 4096


def _remember(memo: dict[int, Any], key: int, entry: Any) -> None:
    """Store ``entry`` in one of the identity memos below, emptying it first when full: the entries keep their
    instances alive, so the memo is bounded and ids cannot be reused while remembered."""
    if len(memo) >= _RECENT_MAX:
        memo.clear()
    memo[key] = entry


@lru_cache(maxsize=16384)
def _redact_short(text: str) -> str:
    return redact(text)  # namespaces, names and types repeat across events: remember their answers


_is_secret_key = lru_cache(maxsize=4096)(is_secret_key)  # the same few field and property names every event


#: Strings up to this long go through the cache of answers: names and namespaces repeat, statements do not.
_REMEMBERED_CHARS = 96


def _string(value: str, key: str) -> str:
    if value and _is_secret_key(key):
        return MASK  # {"spark.hadoop.fs.s3a.secret.key": "..."}: the key says the whole value is secret
    return _redact_short(value) if len(value) <= _REMEMBERED_CHARS else redact(value)


def _plain(value: Any, key: str = "") -> Any:
    """One walk: attrs objects to JSON-ready values the way ``Serde.to_dict`` does (None dropped, empty
    dicts dropped from lists, enums/dates/UUIDs as strings), every string redacted on the way, and
    openlineage-python's default facet producer replaced by ours."""
    kind = type(value)
    if kind is str:
        if key in _OWN_FIELDS:
            return PRODUCER if key == "_producer" and value == DEFAULT_PRODUCER else value
        return _string(value, key)
    if kind is dict:
        return {k: _plain(v, k) for k, v in value.items() if v is not None}
    if kind is list or kind is tuple:
        items = [_plain(v, key) for v in value if v is not None]
        return [item for item in items if not (type(item) is dict and not item)]
    if kind is int or kind is float or kind is bool:
        return value
    recent = _RECENT.get(id(value))
    if recent is not None and recent[0] is value:
        return _memo_hit(_RECENT, id(value), recent[1], lambda: _plain(value, key), f"facet {kind.__name__}")
    if kind is Deferred:  # a facet described by a producer in another process (emitter.deferred): made now
        out = _plain(value.build(), key)
        _remember(_RECENT, id(value), (value, out))
        return out
    fields = _FIELDS.get(kind)
    if fields is None:
        if isinstance(value, Enum):
            return value.value
        if isinstance(value, (date, UUID)):
            return str(value) if isinstance(value, UUID) else value.isoformat()
        if not attrs.has(kind):
            return value
        fields = _FIELDS[kind] = tuple((f.name, f.name in _OWN_FIELDS) for f in attrs.fields(kind))
    out = {}
    for name, own in fields:
        field_value = getattr(value, name)
        if field_value is None:
            continue
        if own and type(field_value) is str:  # ids, times, schema URLs: nothing to redact
            out[name] = PRODUCER if name == "_producer" and field_value == DEFAULT_PRODUCER else field_value
        elif own and isinstance(field_value, Enum):  # eventType
            out[name] = field_value.value
        else:
            out[name] = _plain(field_value, name)
    if "_producer" in out:  # a facet: remember it for the next event that carries the same instance
        _remember(_RECENT, id(value), (value, out))
    return out


#: Serialized datasets by Dataset instance identity (the instance is kept), inputs and outputs apart: a
#: harvest keeps one Dataset per table, so these hold a few hundred entries and are rarely cleared.
_INPUTS: dict[int, tuple[Dataset, dict[str, Any]]] = {}
_OUTPUTS: dict[int, tuple[Dataset, dict[str, Any]]] = {}


def _dataset_plain(ds: Dataset, output: bool, container: bool = False) -> dict[str, Any]:
    """An input or output dataset, written out like the RunEvent shell (see :data:`SHELL_FIELDS`); serialized once
    per Dataset instance while it is recent, unless it has input/output facets (row counts: one instance per run).
    ``container``: an empty ``inputFacets``/``outputFacets`` is written as ``{}`` (:attr:`RunRecord.io_containers`)."""
    if container and not ds.io_facets:  # the memoised form without the container, copied (it is shared)
        return {**_dataset_plain(ds, output), "outputFacets" if output else "inputFacets": {}}
    memo = _OUTPUTS if output else _INPUTS
    known = memo.get(id(ds))
    if known is not None and known[0] is ds:
        return _memo_hit(memo, id(ds), known[1], lambda: _dataset_plain(ds, output), f"dataset {ds.name}")
    built = _output(ds) if output else _input(ds)
    plain = {"namespace": _string(built.namespace, "namespace"), "name": _string(built.name, "name"),
             "facets": _facets_plain(built.facets)}  # type: ignore[arg-type]
    if ds.io_facets:
        io_facets = built.outputFacets if output else built.inputFacets  # type: ignore[union-attr]
        plain["outputFacets" if output else "inputFacets"] = _facets_plain(io_facets)  # type: ignore[arg-type]
        return plain
    _remember(memo, id(ds), (ds, plain))
    return plain


@lru_cache(maxsize=4096)  # equal RunRefs made anew for each child (a producer's choice) still hit this
def _parent_plain_by_value(parent: RunRef, root: RunRef | None) -> dict[str, Any]:
    return _plain(parent_facet(parent, root))


#: Serialized parent facets by the parent RunRef's identity (kept, with the root it was made with): every child
#: of a task run or Spark app carries the same RunRef instances, and hashing a RunRef costs more than this.
_PARENTS: dict[int, tuple[RunRef, RunRef | None, dict[str, Any]]] = {}


def _parent_plain(parent: RunRef, root: RunRef | None) -> dict[str, Any]:
    known = _PARENTS.get(id(parent))
    if known is not None and known[0] is parent and known[1] is root:
        return known[2]
    plain = _parent_plain_by_value(parent, root)
    _remember(_PARENTS, id(parent), (parent, root, plain))
    return plain


def _facets_plain(facets: dict[str, Any]) -> dict[str, Any]:
    return {name: _plain(facet, name) for name, facet in facets.items() if facet is not None} if facets else {}


#: The Job of recent records and its serialized form, by the identity of their job facets mapping: a run's
#: START and COMPLETE carry one mapping, so the second event reuses the first one's Job.
_JOBS: dict[int, tuple[Any, JobRef, JobType, event_v2.Job, dict[str, Any]]] = {}


def _job(record: RunRecord) -> tuple[event_v2.Job, dict[str, Any]]:
    """The record's Job (with the emitter's jobType facet) and its serialized form."""
    facets = record.job_facets
    known = _JOBS.get(id(facets))
    if known is not None and known[0] is facets and known[1] is record.job and known[2] is record.job_type:
        return known[3], _memo_hit(_JOBS, id(facets), known[4], lambda: _job(record)[1], f"job {record.job.name}")
    job = event_v2.Job(namespace=_namespace(record.job.namespace), name=record.job.name,
                       facets={**facets, "jobType": _job_type_facet(record.job_type)})
    plain = {"namespace": _string(job.namespace, "namespace"), "name": _string(job.name, "name"),
             "facets": _facets_plain(job.facets)}  # type: ignore[arg-type]
    _remember(_JOBS, id(facets), (facets, record.job, record.job_type, job, plain))
    return job, plain


#: The fields :func:`event_dict` writes out for these classes: a new openlineage-python field fails the test
#: that compares it with the generic walk instead of going missing from events.
SHELL_FIELDS = {
    event_v2.RunEvent: ("eventTime", "producer", "schemaURL", "run", "job", "eventType", "inputs", "outputs"),
    event_v2.Run: ("runId", "facets"),
    event_v2.Job: ("namespace", "name", "facets"),
    event_v2.InputDataset: ("namespace", "name", "facets", "inputFacets"),
    event_v2.OutputDataset: ("namespace", "name", "facets", "outputFacets"),
}


def event_dict(record: RunRecord) -> dict[str, Any]:
    """The JSON-ready, redacted event for one record: what every transport is handed (read-only: the job, the
    jobType and parent facets and the datasets are shared with other events).

    The RunEvent, Run and Job shells are serialized written out (a third of the generic walk's time), their
    facets and the datasets through the generic walk.
    """
    # No validator switch here: this runs inside a Spark driver too, where flipping attrs' process-wide switch
    # would turn off the application's own validators. A harvest process switches them off for its whole run.
    job, job_plain = _job(record)
    event = _core_event(record, job)
    run_facets = _facets_plain(event.run.facets)  # type: ignore[arg-type]
    if record.parent is not None:  # the same facet for every child of a task run or Spark app
        run_facets["parent"] = _parent_plain(record.parent, record.root)
    return {
        "eventTime": event.eventTime, "producer": event.producer, "schemaURL": event.schemaURL,
        "run": {"runId": event.run.runId, "facets": run_facets},
        "job": job_plain,
        "eventType": event.eventType.value,  # type: ignore[union-attr]
        "inputs": [_dataset_plain(ds, False, record.io_containers) for ds in record.inputs],
        "outputs": [_dataset_plain(ds, True, record.io_containers) for ds in record.outputs],
    }
