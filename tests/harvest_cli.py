"""One CLI harness for both harvesters: run ``harvest <source> ...`` in-process with the file transport and
return its exit code and the events this run wrote (each validated against the OpenLineage schemas)."""
from __future__ import annotations

import json
from pathlib import Path

from harvesters.cli import main

from ol_schema import assert_valid_event


def run_harvest(target: Path, args: list[str], conf: list[str] | None = None) -> tuple[int, list[dict]]:
    """``harvest *args`` writing to ``target`` (unless ``conf`` says otherwise): (exit code, new events)."""
    before = target.read_text(encoding="utf-8").count("\n") if target.exists() else 0
    conf = conf if conf is not None else ["transport.type=file", f"transport.location={target}"]
    code = main([*args, *[a for c in conf for a in ("--conf", c)]])
    lines = target.read_text(encoding="utf-8").split("\n")[before:-1] if target.exists() else []
    events = [json.loads(line) for line in lines]
    for event in events:
        assert_valid_event(event)
    return code, events


def brief(event: dict) -> tuple:
    """(event type, job, parent job, input names, output names): what most assertions compare."""
    parent = event["run"]["facets"].get("parent")
    return (event["eventType"], event["job"]["name"], parent and parent["job"]["name"],
            [d["name"] for d in event["inputs"]], [d["name"] for d in event["outputs"]])
