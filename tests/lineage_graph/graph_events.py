"""Plain-dict OpenLineage run events (spec 2-0-2) for the lineage_graph tests."""
from __future__ import annotations

import uuid

PRODUCER = "https://example.com/tests/lineage_graph"
SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


def rid(name: str) -> str:
    """A stable run id per test name (uuid5), so tables of cases read as names."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def ds(name: str, ns: str = "db") -> dict:
    return {"namespace": ns, "name": name, "facets": {}}


def event(t: int, run: str, job: str, etype: str | None = "COMPLETE", *, ns: str = "ns", inputs=(), outputs=(),
          parent: tuple[str, str] | tuple[str, str, str] | None = None, job_type: str | None = None,
          integration: str = "SPARK", code: str | None = None, error: str | None = None) -> dict:
    """One run event at minute ``t`` of 2024-01-01; ``run`` is a name turned into a UUID; ``parent`` is
    (job name, run name[, namespace])."""
    e = {"eventTime": f"2024-01-01T{t // 60:02d}:{t % 60:02d}:00.000Z", "producer": PRODUCER, "schemaURL": SCHEMA,
         "run": {"runId": rid(run), "facets": {}}, "job": {"namespace": ns, "name": job, "facets": {}},
         "inputs": [ds(i) if isinstance(i, str) else ds(*i) for i in inputs],
         "outputs": [ds(o) if isinstance(o, str) else ds(*o) for o in outputs]}
    if etype is not None:
        e["eventType"] = etype
    if parent is not None:
        pns = parent[2] if len(parent) > 2 else ns
        e["run"]["facets"]["parent"] = {"_producer": PRODUCER, "_schemaURL": SCHEMA,
                                        "job": {"namespace": pns, "name": parent[0]},
                                        "run": {"runId": rid(parent[1])}}
    if job_type is not None:
        e["job"]["facets"]["jobType"] = {"_producer": PRODUCER, "_schemaURL": SCHEMA, "processingType": "BATCH",
                                         "integration": integration, "jobType": job_type}
    if code is not None:
        e["job"]["facets"]["sourceCodeLocation"] = {"_producer": PRODUCER, "_schemaURL": SCHEMA, "type": "git",
                                                    "url": "https://git.example.com/repo", "version": code}
    if error is not None:
        e["run"]["facets"]["errorMessage"] = {"_producer": PRODUCER, "_schemaURL": SCHEMA, "message": error,
                                              "programmingLanguage": "python"}
    return e
