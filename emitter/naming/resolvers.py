"""Dataset namespace resolvers: the OpenLineage Java client's ``dataset.namespaceResolvers``.

A resolver gives a logical name to the hosts of one system, so that the datasets of a cluster reached through
several hosts (Kafka brokers, database replicas) land in one namespace: ``kafka://kafka-host:9092`` ->
``kafka://kafka-cluster-prod:9092``. Configured per resolver name (the name is what a match is replaced with,
except for ``patternGroup``), with the Java client's three types and rules:

- ``hostList``: ``hosts`` (a list); the first host found in the namespace (case-insensitively) is replaced by
  the resolver's name.
- ``pattern``: ``regex``; every match in the namespace is replaced by the resolver's name.
- ``patternGroup``: ``regex`` and ``matchingGroup``; every match is replaced by that named group of the first
  match.

Each may have a ``schema``: the resolver then applies only to namespaces starting with ``{schema}://``. The
first resolver that changes a namespace wins (the Java client's ``DatasetNamespaceCombinedResolver``).
Regular expressions are written as for Java: ``(?<name>...)`` groups are accepted.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

TYPES = ("hostList", "pattern", "patternGroup")


def java_regex(pattern: str) -> re.Pattern[str]:
    """A Java regular expression compiled by Python's ``re``: named groups ``(?<name>...)`` become
    ``(?P<name>...)``; lookbehinds ``(?<=``/``(?<!`` are left alone."""
    return re.compile(re.sub(r"\(\?<(?=[A-Za-z])", "(?P<", pattern))


@attrs.frozen
class NamespaceResolver:
    """One configured resolver (see the module's docstring)."""

    name: str
    type: str
    hosts: tuple[str, ...] = ()
    regex: re.Pattern[str] | None = None
    matching_group: str | None = None
    schema: str | None = None

    def resolve(self, namespace: str) -> str:
        """``namespace`` with this resolver applied (unchanged when it does not match)."""
        if self.schema and not namespace.startswith(f"{self.schema}://"):
            return namespace
        if self.type == "hostList":
            lowered = namespace.lower()
            host = next((h for h in self.hosts if h and h.lower() in lowered), None)
            return namespace if host is None else re.sub(re.escape(host), lambda _: self.name, namespace,
                                                          flags=re.IGNORECASE)
        assert self.regex is not None  # built so by namespace_resolvers for the two pattern types
        first = self.regex.search(namespace)
        if first is None:
            return namespace
        replacement = self.name if self.type == "pattern" else (first.group(self.matching_group or 0) or "")
        return self.regex.sub(lambda _: replacement, namespace)


def namespace_resolvers(config: Mapping[str, Mapping[str, Any]]) -> tuple[NamespaceResolver, ...]:
    """Resolvers from ``{name: {type, hosts, regex, matchingGroup, schema}}`` (``hosts``: a list, or the
    Spark configuration's ``[a;b]`` form). Raises ``ValueError`` naming the resolver that is invalid."""
    out = []
    for name, entry in config.items():
        kind = str(entry.get("type", ""))
        found = next((t for t in TYPES if t.lower() == kind.lower()), None)
        if found is None:
            raise ValueError(f"dataset namespace resolver {name!r}: type {kind!r} is not one of {', '.join(TYPES)}")
        schema = str(entry["schema"]) if entry.get("schema") else None
        if found == "hostList":  # no hosts: it matches nothing, as in the Java client
            out.append(NamespaceResolver(name, found, hosts=_list(entry.get("hosts")), schema=schema))
            continue
        if not entry.get("regex"):
            raise ValueError(f"dataset namespace resolver {name!r}: {found} needs a regex")
        try:
            regex = java_regex(str(entry["regex"]))
        except re.error as error:
            raise ValueError(f"dataset namespace resolver {name!r}: bad regex ({error})") from None
        group = str(entry["matchingGroup"]) if entry.get("matchingGroup") else None
        if found == "patternGroup" and (group is None or group not in regex.groupindex):
            raise ValueError(f"dataset namespace resolver {name!r}: patternGroup needs a matchingGroup of its regex")
        out.append(NamespaceResolver(name, found, regex=regex, matching_group=group, schema=schema))
    return tuple(out)


def resolve_namespace(resolvers: Iterable[NamespaceResolver], namespace: str) -> str:
    """The first resolver's result that differs from ``namespace``; ``namespace`` when none applies."""
    for resolver in resolvers:
        resolved = resolver.resolve(namespace)
        if resolved != namespace:
            return resolved
    return namespace


def _list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(h.strip() for h in value.strip().strip("[]").split(";") if h.strip())
    return tuple(str(h).strip() for h in value if str(h).strip())
