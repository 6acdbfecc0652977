"""Validate emitted events against the official OpenLineage JSON schemas in ../shared/openlineage-spec/.

The core schema validates the event; each facet whose ``_schemaURL`` names a facet schema file is validated
against that file too (the core schema only checks the facet base shape).
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from paths import SHARED

SPEC_DIR = SHARED / "openlineage-spec"


@lru_cache(maxsize=1)
def _registry() -> tuple[Any, dict[str, dict]]:
    from referencing import Registry, Resource

    schemas: dict[str, dict] = {}
    for path in [SPEC_DIR / "OpenLineage.json", *sorted((SPEC_DIR / "facets").glob("*.json"))]:
        schema = json.loads(path.read_text())
        schemas[schema["$id"]] = schema
    registry = Registry().with_resources((uri, Resource.from_contents(s)) for uri, s in schemas.items())
    return registry, schemas


def _validator(uri: str, ref: str | None = None):
    from jsonschema import Draft202012Validator, FormatChecker

    registry, schemas = _registry()
    schema = {"$ref": f"{uri}#{ref}"} if ref else schemas[uri]
    return Draft202012Validator(schema, registry=registry, format_checker=FormatChecker())


def _facet_schema_uri(schema_url: str) -> str | None:
    """Map a facet's ``_schemaURL`` (``.../spec/facets/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet``)
    to the id of the schema file we hold, ignoring the version if ours differs."""
    _, schemas = _registry()
    base = schema_url.split("#", 1)[0]
    if base in schemas:
        return base
    file_name = base.rsplit("/", 1)[-1]
    matches = [uri for uri in schemas if uri.endswith("/" + file_name) and "/facets/" in uri]
    return matches[0] if matches else None


def _facet_dicts(event: dict) -> list[dict]:
    found = []
    for key in ("run", "job"):
        found += list((event.get(key, {}).get("facets") or {}).values())
    for ds in event.get("inputs", []) + event.get("outputs", []):
        for facets_key in ("facets", "inputFacets", "outputFacets"):
            found += list((ds.get(facets_key) or {}).values())
    return found


def assert_valid_event(event: dict) -> None:
    """Raise AssertionError listing every schema violation of ``event`` (core schema and facet schemas)."""
    core_uri = next(uri for uri in _registry()[1] if uri.endswith("/OpenLineage.json"))
    errors = [f"core: {e.json_path}: {e.message}" for e in _validator(core_uri).iter_errors(event)]
    for facet in _facet_dicts(event):
        schema_url = facet.get("_schemaURL", "")
        uri = _facet_schema_uri(schema_url)
        if uri is None:
            if "/spec/facets/" in schema_url:
                errors.append(f"facet schema not held here: {schema_url}")
            continue  # a custom facet: the core schema already checked its base shape
        ref = schema_url.split("#", 1)[1] if "#" in schema_url else None
        errors += [f"{schema_url}: {e.json_path}: {e.message}" for e in _validator(uri, ref).iter_errors(facet)]
    assert not errors, "event does not match the OpenLineage schemas:\n" + "\n".join(errors)


def read_events(path: Path) -> list[dict]:
    """The JSON events written by the file transport (one per line), in order."""
    if not Path(path).exists():
        return []
    lines = Path(path).read_text(encoding="utf-8").split("\n")  # not splitlines(): U+2028 may sit inside a string
    return [json.loads(line) for line in lines if line.strip()]
