"""The plugin's own reading of the ``spark.openlineage.*`` SparkConf keys.

Transport and spool keys are the emitter's business (:mod:`emitter.config`); this module reads what
decides *which* events exist and how they are named: namespace, app name, external parent and root,
captured properties, disabled facets, the kill switch and the Python plugin's own ``python.*`` keys.
Pure functions over a plain mapping, so every rule is testable without Spark.
"""
from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from typing import TypeVar

import attrs

from emitter.records import JobRef, RunRef
from spark_plugin.circuit_breaker import Settings as CircuitBreakerSettings
from spark_plugin.circuit_breaker import settings as circuit_breaker_settings

log = logging.getLogger(__name__)
_N = TypeVar("_N", int, float)

PREFIX = "spark.openlineage."
#: The activation key read by the start-up hook (prefix included: it is looked up in the SparkConf).
ENABLED_KEY = PREFIX + "python.enabled"

#: Keys (prefix removed) this project reads; with :data:`KNOWN_PATTERNS`, everything else is warned about.
KNOWN_KEYS = frozenset({
    "disabled", "namespace", "appName", "capturedProperties", "context",
    "parentJobNamespace", "parentJobName", "parentRunId",
    "rootParentJobNamespace", "rootParentJobName", "rootParentRunId",
    "jobName.appendDatasetName", "jobName.replaceDotWithUnderscore",  # read by plan_lineage
    "dataset.removePath.pattern",  # read by plan_lineage
    "job.tags", "run.tags",
    # the debug facet's settings (the JVM's DebugConfig); logPlanAsJson (a log line of the plan) is accepted only
    "debug.smart", "debug.smartMode", "debug.metricsDisabled", "debug.payloadSizeLimitInKilobytes",
    "debug.logPlanAsJson",
    "python.enabled", "python.shutdownTimeoutSeconds", "python.queueSize", "python.pollIntervalSeconds",
    "python.emitterProcess",
    # the JVM integration's keys this plugin accepts without acting on them (a configuration shared with
    # JVM jobs must not make every run warn): see the README's list of what is not captured
    # (debugFacet: an old switch the JVM no longer reads; its debug facet is facets.debug.disabled=false)
    "debugFacet", "facets.disabled", "timeoutSecs", "testExtensionProvider", "overriddenAppName",
    "facets.custom_environment_variables",  # the environment-properties facet's variables
})
#: ``facets.<name>.disabled`` drops one facet by name (names may hold dots: ``spark.logicalPlan``).
FACET_DISABLED = re.compile(r"facets\.(.+)\.disabled")
#: ``job.owners.<type>=<name>``: one owner of the jobs (the ``ownership`` job facet).
JOB_OWNER = re.compile(r"job\.owners\.(.+)")
#: Key families handed to the emitter or read per facet name.
KNOWN_PATTERNS = (
    re.compile(r"transport\..+"),  # emitter: any transport type's keys, nested (auth, headers, composite)
    re.compile(r"spool\..+"),  # emitter: spool directory and size
    FACET_DISABLED,
    JOB_OWNER,
    # the JVM integration's key families, accepted (see KNOWN_KEYS)
    re.compile(r"(columnLineage|circuitBreaker|metrics|vendors|filter|dataset|jobName)\..+"),
)

DEFAULT_NAMESPACE = "default"
DEFAULT_CAPTURED_PROPERTIES = ("spark.master", "spark.app.name")
#: At the end, the longest wait for the worker to finish what is queued (plan reading and delivery); a backend
#: that stalls one delivery longer than ``lifecycle.STALL_S`` sends the rest to the spool at once.
DEFAULT_SHUTDOWN_TIMEOUT_S = 5.0
DEFAULT_QUEUE_SIZE = 1000
#: How often the worker looks for running SQL executions (their START and RUNNING events); 0 switches it off.
DEFAULT_POLL_INTERVAL_S = 1.0


#: The debug facet's payload limit by default (the JVM's DEFAULT_PAYLOAD_SIZE_LIMIT_IN_KILOBYTES).
DEFAULT_DEBUG_PAYLOAD_KB = 100


@attrs.frozen
class DebugSettings:
    """``debug.*``: the JVM's DebugConfig. Whether the facet is on at all is ``facets.debug.disabled`` (off by
    default, as the JVM's other debug facets)."""

    smart: bool = False  # debug.smart: the facet on actions' COMPLETE events that miss inputs or outputs
    smart_mode: str = "any-missing"  # debug.smartMode: any-missing or output-missing
    metrics_disabled: bool = False  # debug.metricsDisabled
    payload_limit_kb: int = DEFAULT_DEBUG_PAYLOAD_KB  # debug.payloadSizeLimitInKilobytes

    @classmethod
    def from_keys(cls, keys: Mapping[str, str], problems: list[str]) -> DebugSettings:
        """From the prefix-less keys; a limit that is not a number keeps the default, an unknown smart mode falls
        back to any-missing (both named in ``problems``)."""
        limit = _number(keys, "debug.payloadSizeLimitInKilobytes", DEFAULT_DEBUG_PAYLOAD_KB, 0, problems)
        mode = (keys.get("debug.smartMode") or "any-missing").strip()
        if mode.lower() not in ("any-missing", "output-missing"):  # the JVM falls back the same way
            problems.append(f"unsupported spark.openlineage.debug.smartMode {mode}: any-missing used")
            mode = "any-missing"
        return cls(smart=_truthy(keys.get("debug.smart", "")), smart_mode=mode,
                   metrics_disabled=_truthy(keys.get("debug.metricsDisabled", "")), payload_limit_kb=limit)


def jvm_list(value: object) -> list[str]:
    """A JVM integration list setting: ``[a;b]`` (brackets optional), items trimmed, empty ones dropped."""
    return [] if value is None else [item.strip() for item in str(value).strip().strip("[]").split(";")
                                     if item.strip()]


def _truthy(value: object) -> bool:
    return str(value).strip().lower() in {"true", "1", "yes"}


def _number(keys: Mapping[str, str], key: str, default: _N, minimum: _N, problems: list[str]) -> _N:
    """The number set under ``key`` (an int or a float, as ``default``), or ``default`` when it is unset; a value
    that is not such a number, or is below ``minimum``, is named in ``problems`` (warned about once the host's log
    is set up) and ``default`` is used: one typo does not switch lineage off."""
    raw = keys.get(key)
    if raw is None or not str(raw).strip():
        return default
    parse = type(default)
    try:
        value = parse(str(raw).strip())
    except ValueError:
        value = None
    if value is None or value != value or value < minimum:  # (value != value: NaN)
        kind = "a whole number" if parse is int else "a number"
        problems.append(f"{PREFIX}{key}={raw} is not {kind} >= {minimum}: the default {default} is used")
        return default
    return value


#: One tag of ``job.tags``/``run.tags``: (key, value, source).
Tag = tuple[str, str, str]
_ESCAPED = {":": "\x01", ";": "\x02"}  # placeholders of escaped separators while splitting


def _java_split(text: str, sep: str) -> list[str]:
    # Java's String.split drops trailing empty strings ("a:" -> ["a"], ":" -> [])
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _unescape(text: str) -> str:
    return text.replace(_ESCAPED[":"], ":").replace(_ESCAPED[";"], ";").strip()


def _escape_separators(text: str) -> str:
    # the Java client's preprocessEscapes: a backslash escapes the next character; ":" and ";" so escaped
    # become placeholders, any other escaped character keeps its backslash
    out, escaped = [], False
    for char in text:
        if escaped:
            out.append(_ESCAPED.get(char, "\\" + char))
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            out.append(char)
    return "".join(out) + ("\\" if escaped else "")


def parse_tags(text: str | None) -> tuple[Tag, ...]:
    """``key[:value[:source]]`` entries separated by ``;`` (the Java client's ``TagsDeserializer``): value
    ``true`` and source ``CONFIG`` by default, ``\\:``/``\\;`` escape the separators, elements past the
    third are ignored, an entry with a blank element is skipped."""
    if not text:
        return ()
    escaped = _escape_separators(text)
    tags = []
    for entry in escaped.split(";"):
        if not entry.strip():
            continue
        elements = _java_split(entry, ":")[:3]
        if not elements or any(not e.strip() for e in elements):
            continue
        key, value, source = [_unescape(e) for e in elements] + ["true", "CONFIG"][len(elements) - 1:]
        tags.append((key, value, source))
    return tuple(tags)


#: Sections of ``openlineage.yml`` (and ``OPENLINEAGE__*`` variables) read as the ``spark.openlineage.*`` keys of
#: the same path: the JVM integration merges that file under its SparkConf. Transport and spool are the emitter's.
FILE_SECTIONS = ("disabled", "namespace", "appName", "capturedProperties", "facets", "columnLineage", "filter",
                 "dataset", "job", "run", "jobName", "circuitBreaker", "debug", "python")


def file_settings() -> tuple[dict[str, str], list[str]]:
    """The plugin's settings from ``openlineage.yml`` / ``OPENLINEAGE__*`` variables as SparkConf entries, to lie
    under the SparkConf's (``spark.openlineage.`` + the dotted path, a list as ``[a;b]``, a boolean as
    ``true``/``false``), and the warnings to log once the host's log is set up. A file that cannot be read gives
    no entries and a warning (the emitter reports it too)."""
    from emitter.config import shared_settings

    try:
        nested = shared_settings()
    except Exception as error:  # noqa: BLE001 - a broken file must not stop the application
        return {}, [f"lineage capture: openlineage.yml not read for the Spark settings: {error}"]
    flat: dict[str, str] = {}
    skipped: list[str] = []
    for section in FILE_SECTIONS:
        if section in nested:
            _flatten(PREFIX + section, nested[section], flat, skipped)
    warnings = [f"lineage capture: openlineage.yml settings with no spark.openlineage.* form ignored: "
                f"{', '.join(sorted(skipped))}"] if skipped else []
    return flat, warnings


def _flatten(key: str, value: object, flat: dict[str, str], skipped: list[str]) -> None:
    if isinstance(value, Mapping):
        for name, item in value.items():
            _flatten(f"{key}.{name}", item, flat, skipped)
    elif isinstance(value, list):
        if all(isinstance(item, (str, int, float)) and not isinstance(item, bool) for item in value):
            flat[key] = "[" + ";".join(str(item) for item in value) + "]"
        else:  # a list of mappings (the Python client's tags, filters): no SparkConf form
            skipped.append(key[len(PREFIX):])
    elif isinstance(value, bool):
        flat[key] = "true" if value else "false"
    elif value is not None:
        flat[key] = str(value)


def strip_prefix(spark_conf: Mapping[str, str]) -> dict[str, str]:
    """The ``spark.openlineage.*`` entries of a SparkConf, prefix removed."""
    return {k[len(PREFIX):]: v for k, v in spark_conf.items() if k.startswith(PREFIX)}


def emitter_keys(keys: Mapping[str, str]) -> dict[str, str]:
    """The keys of the sections the emitter reads (transport, spool, facets...): unknown keys are warned about
    by this plugin once, and the JVM integration's own keys (``filter.*``, ``run.tags``, ``debugFacet``...) are
    this plugin's to accept; handed to the emitter, either would be warned about again."""
    from emitter.config import KNOWN_TOP_LEVEL_KEYS

    return {k: v for k, v in keys.items() if k.split(".", 1)[0] in KNOWN_TOP_LEVEL_KEYS}


def unknown_keys(keys: Mapping[str, str]) -> list[str]:
    """Keys (prefix removed) neither this plugin nor the emitter reads, sorted."""
    return sorted(k for k in keys if k not in KNOWN_KEYS and not any(p.fullmatch(k) for p in KNOWN_PATTERNS))


def _ref(namespace: str | None, name: str | None, run_id: str | None) -> RunRef | None:
    # A parent needs all three parts, as in the JVM integration: a partial one is ignored, not guessed.
    if namespace and name and run_id:
        return RunRef(run_id=run_id, job=JobRef(namespace, name))
    return None


def _context_ref(node: object) -> RunRef | None:
    if not isinstance(node, Mapping):
        return None
    run, job = node.get("run") or {}, node.get("job") or {}
    return _ref(job.get("namespace"), job.get("name"), run.get("runId"))


def external_parent(keys: Mapping[str, str], problems: list[str]) -> tuple[RunRef | None, RunRef | None]:
    """The application's (parent, root): ``context`` JSON wins over the six ``parent*``/``rootParent*`` keys
    (``context`` that is not JSON is named in ``problems`` and ignored).

    ``root`` stays None when unset: the emitter then uses the parent as the root.
    """
    if keys.get("context"):
        try:
            context = json.loads(keys["context"])
        except ValueError:
            problems.append("spark.openlineage.context is not JSON: ignored")
        else:
            if isinstance(context, Mapping):
                return _context_ref(context.get("parent")), _context_ref(context.get("root"))
    parent = _ref(keys.get("parentJobNamespace"), keys.get("parentJobName"), keys.get("parentRunId"))
    root = _ref(keys.get("rootParentJobNamespace"), keys.get("rootParentJobName"), keys.get("rootParentRunId"))
    return parent, root


@attrs.frozen
class PluginConfig:
    """What the plugin needs from the SparkConf, resolved once per application."""

    namespace: str
    app_name: str  # normalized job name of the application
    parent: RunRef | None
    root: RunRef | None
    captured_properties: tuple[str, ...]
    job_tags: tuple[Tag, ...]  # ``job.tags``: the ``tags`` job facet of every event
    run_tags: tuple[Tag, ...]  # ``run.tags``: the ``tags`` run facet of every event
    owners: tuple[tuple[str, str], ...]  # ``job.owners.<type>=<name>`` as (type, name), by type
    disabled_facets: frozenset[str]
    disabled: bool
    shutdown_timeout_s: float
    queue_size: int
    poll_interval_s: float
    emitter_overrides: Mapping[str, str]  # prefix-less keys for ``Emitter.from_config``
    unknown: tuple[str, ...]
    debug: DebugSettings = DebugSettings()
    rdd_events: bool = True  # False with the JVM's ``filter.rddEventsDisabled=true``: no RDD-only job runs
    circuit_breaker: CircuitBreakerSettings | None = None  # ``circuitBreaker.*`` (see spark_plugin.circuit_breaker)
    #: ``facets.custom_environment_variables``: the variables the ``environment-properties`` facet reports
    environment_variables: tuple[str, ...] = ()
    #: settings set but not understood (see :meth:`warn_problems`)
    problems: tuple[str, ...] = ()
    #: ``python.emitterProcess`` (default true): events are built and delivered by a child process
    #: (:mod:`emitter.emitter_process`); false: in the driver (which then imports openlineage-python)
    emitter_process: bool = True

    @classmethod
    def from_spark_conf(cls, spark_conf: Mapping[str, str], environ: Mapping[str, str] | None = None) -> PluginConfig:
        """Resolve from the full SparkConf (``spark.app.name`` included) and the environment."""
        from emitter.naming import normalize_name  # deferred: keeps the start-up hook's imports tiny

        environ = os.environ if environ is None else environ
        keys = strip_prefix(spark_conf)
        unknown = unknown_keys(keys)
        problems: list[str] = []  # settings not understood, filled while they are read
        parent, root = external_parent(keys, problems)
        captured = keys.get("capturedProperties")
        debug = DebugSettings.from_keys(keys, problems)
        disabled_facets = frozenset(
            m.group(1) for k, v in keys.items() if (m := FACET_DISABLED.fullmatch(k)) and _truthy(v))
        if debug.smart:  # smart debug sends the debug facet even where it is disabled (the JVM's EventEmitter)
            disabled_facets -= {"debug"}
        return cls(
            namespace=keys.get("namespace") or DEFAULT_NAMESPACE,
            app_name=normalize_name(keys.get("appName") or spark_conf.get("spark.app.name") or "spark_application"),
            parent=parent,
            root=root,
            captured_properties=tuple(p.strip() for p in captured.split(",") if p.strip())
            if captured is not None else DEFAULT_CAPTURED_PROPERTIES,
            job_tags=parse_tags(keys.get("job.tags")),
            run_tags=parse_tags(keys.get("run.tags")),
            owners=tuple(sorted((m.group(1), v) for k, v in keys.items() if (m := JOB_OWNER.fullmatch(k)) and v)),
            disabled_facets=disabled_facets,
            disabled=_truthy(keys.get("disabled", "")) or _truthy(environ.get("OPENLINEAGE_DISABLED", "")),
            shutdown_timeout_s=_number(keys, "python.shutdownTimeoutSeconds", DEFAULT_SHUTDOWN_TIMEOUT_S, 0.0,
                                       problems),
            queue_size=_number(keys, "python.queueSize", DEFAULT_QUEUE_SIZE, 1, problems),
            poll_interval_s=_number(keys, "python.pollIntervalSeconds", DEFAULT_POLL_INTERVAL_S, 0.0, problems),
            emitter_overrides=emitter_keys(keys),
            unknown=tuple(unknown),
            debug=debug,
            rdd_events=not _truthy(keys.get("filter.rddEventsDisabled", "")),
            circuit_breaker=circuit_breaker_settings(keys, problems.append),
            environment_variables=tuple(jvm_list(keys.get("facets.custom_environment_variables"))),
            problems=tuple(problems),
            emitter_process=_truthy(keys.get("python.emitterProcess", "true")),
        )

    def warn_problems(self) -> None:
        """One warning per setting not understood, and one naming every ``spark.openlineage.*`` key nothing reads
        (called once the host's log is set up: they go where Spark's warnings go)."""
        for problem in self.problems:
            log.warning("lineage capture: %s", problem)
        if self.unknown:
            log.warning("unknown or unsupported spark.openlineage.* keys ignored by the Python plugin: %s",
                        ", ".join(PREFIX + k for k in self.unknown))
