"""Where the emitter's configuration comes from, and how openlineage-spark style keys map onto
openlineage-python's transport configuration.

Precedence, highest first (the only place it is written):

1. Explicit overrides from the producer: the ``spark.openlineage.*`` SparkConf keys (prefix removed) or a
   harvester's command-line flags, as flat dotted keys (``transport.type``, ``transport.url``...).
2. ``openlineage.yml``: the file named by ``OPENLINEAGE_CONFIG``, else ``./openlineage.yml``, else
   ``~/.openlineage/openlineage.yml``.
3. Environment: ``OPENLINEAGE__TRANSPORT__...`` variables (openlineage-python's dynamic form; a section without
   a ``type`` is merged into the transport a higher level names). Then, as openlineage-python, the simple
   ``OPENLINEAGE_URL`` / ``OPENLINEAGE_ENDPOINT`` / ``OPENLINEAGE_API_KEY``: the transport only when no level
   names one (or the ``default_http`` member of a composite, the missing url/endpoint/key of an ``async_http``).
4. Embedded default: append JSON lines to ``{state dir}/openlineage-events.jsonl`` (path printed once).

``OPENLINEAGE_DISABLED=true`` or ``disabled=true`` at any level switches emission off.
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

log = logging.getLogger(__name__)

#: Environment variable naming the directory for the default event file and the spool.
STATE_DIR_ENV = "LINEAGE_CAPTURE_STATE_DIR"
DEFAULT_EVENTS_FILE = "openlineage-events.jsonl"

#: openlineage-spark (Java) transport keys -> openlineage-python keys, per transport type.
#: A value is (python key, converter); the converter turns the Java form into the Python form.
JAVA_TO_PYTHON_KEYS: dict[str, dict[str, tuple[str, Any]]] = {
    "http": {
        "timeoutInMillis": ("timeout", lambda ms: _positive_seconds(ms, 1000.0)),  # Java: ms, Python: seconds
        "timeout": ("timeout", lambda seconds: _positive_seconds(seconds, 1.0)),
        "headers": ("custom_headers", dict),
        "urlParams": ("url_params", dict),  # not supported by openlineage-python: reported as unknown
    },
    "file": {
        "location": ("log_file_path", str),  # Java appends one event per line: keep append on
    },
    "kafka": {
        "topicName": ("topic", str),
        "properties": ("config", dict),
    },
    "composite": {
        "continueOnFailure": ("continue_on_failure", str),
        "continueOnSuccess": ("continue_on_success", str),
        "sortTransports": ("sort_transports", str),
    },
}
#: A composite transport's switches (booleans; configuration files and SparkConf give strings).
COMPOSITE_FLAGS = ("continue_on_failure", "continue_on_success", "sort_transports")

#: Top-level keys this project understands; anything else is warned about once.
KNOWN_TOP_LEVEL_KEYS = frozenset(
    {"transport", "facets", "filters", "tags", "dataset", "disabled", "spool"}
)
#: Keys the Spark plugin reads itself; the emitter accepts them silently.
SPARK_PLUGIN_KEYS = frozenset(
    {"namespace", "appName", "parentJobNamespace", "parentJobName", "parentRunId", "rootParentJobNamespace",
     "rootParentJobName", "rootParentRunId", "context", "jobName", "capturedProperties", "python", "debug",
     "columnLineage", "job", "vendors", "timeout", "circuitBreaker", "metrics", "testExtensionProvider"}
)


@attrs.frozen
class EmitterConfig:
    """The resolved configuration: a transport config dict for openlineage-python, or none (disabled)."""

    transport: Mapping[str, Any] | None
    source: str  # which precedence step decided the transport, for the start-up log line
    spool_dir: Path
    spool_max_bytes: int
    disabled: bool = False
    #: openlineage-python's ``filters``: events of the jobs they name are not sent (``{type: exact, match: name}``,
    #: ``{type: regex, regex: pattern}``)
    filters: tuple[Mapping[str, Any], ...] = ()


def _positive_seconds(value: Any, per_second: float) -> float:
    """A timeout in seconds from ``value`` units (``per_second`` of them a second). 0 would make every socket
    non-blocking (each request failing at once) and a negative one is refused by the socket module: both are
    configuration errors, said here rather than as every event spooled."""
    seconds = float(value) / per_second
    if not 0 < seconds < float("inf"):  # NaN fails this too
        raise ValueError(f"must be a positive number, not {value!r}")
    return seconds


def state_dir() -> Path:
    """Directory for the default event file, the spool and harvester state defaults."""
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "lineage-capture"


#: Transport keys whose value is a map with keys of their own, which may hold dots (Kafka's ``bootstrap.servers``,
#: a header): ``transport.properties.bootstrap.servers`` is the key ``bootstrap.servers`` of ``properties``.
MAP_KEYS = frozenset({"properties", "config", "headers", "custom_headers", "customHeaders", "urlParams",
                      "url_params"})


def _key_path(key: str) -> list[str]:
    parts = key.split(".")
    if parts[0] == "transport":
        for at, part in enumerate(parts[1:-1], start=1):
            if part in MAP_KEYS and parts[at - 1] != "transports":  # (not a composite member named "config")
                return [*parts[:at + 1], ".".join(parts[at + 1:])]
    return parts


def _put(config: dict[str, Any], path: list[str], value: Any) -> None:
    """Set ``value`` at ``path`` in ``config``, making (or replacing with) a mapping at every step before the last."""
    *parents, leaf = path
    node = config
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[leaf] = value


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"transport.auth.type": "api_key"}`` -> ``{"transport": {"auth": {"type": "api_key"}}}``; below a map-valued
    transport key (:data:`MAP_KEYS`) the rest of the key is one key."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        _put(nested, _key_path(key), value)
    return nested


def composite_members(transport: Mapping[str, Any] | None) -> list[tuple[str, Mapping[str, Any]]]:
    """(name, configuration) of each member of a composite transport, in their configured order (a list's members
    named by position); [] for any other transport. Entries that are not mappings are left out."""
    if not transport or str(transport.get("type", "")).lower() != "composite":
        return []
    members = transport.get("transports")
    items = members.items() if isinstance(members, Mapping) else enumerate(
        members if isinstance(members, list) else ())
    return [(str(name), member) for name, member in items if isinstance(member, Mapping)]


def pythonize_transport(transport: Mapping[str, Any]) -> dict[str, Any]:
    """Map Java-style transport keys onto openlineage-python's, recursively for composite transports."""
    out = dict(transport)
    kind = str(out.get("type", "")).strip()
    kind = kind if "." in kind else kind.lower()  # (a class path is imported: its case is the module's and class's)
    out["type"] = kind
    for java_key, (python_key, convert) in JAVA_TO_PYTHON_KEYS.get(kind, {}).items():
        if java_key in out:
            value = out.pop(java_key)
            try:
                out[python_key] = convert(value)
            except (TypeError, ValueError) as error:  # named: "could not convert string to float" says too little
                raise ValueError(f"transport.{java_key} cannot be used: {error}") from error
    if kind == "file":  # one JSON-lines file by default; debug_mode (a file per event, named by job) as there
        out.setdefault("append", not _truthy(out.get("debug_mode", False)))
    if kind == "http" and isinstance(out.get("retry"), Mapping):
        out["retry"] = {k: _number(v) for k, v in out["retry"].items()}  # SparkConf values arrive as strings
    if kind in ("http", "async_http") and "customHeaders" in out and "custom_headers" not in out:
        out["custom_headers"] = out.pop("customHeaders")  # (openlineage-python 1.54 reads only the snake_case key)
    if kind == "http" and isinstance(out.get("verify"), str):
        out["verify"] = _truthy(out["verify"])
    if kind == "http" and isinstance(out.get("auth"), Mapping):
        auth_type = str(out["auth"].get("type", "")).strip()
        # (a dotted type is an auth provider's class path: its case is the module's and the class's)
        out["auth"] = {**out["auth"], "type": auth_type if "." in auth_type else auth_type.lower() or "api_key"}
    if kind == "composite":
        for flag in COMPOSITE_FLAGS:  # (SparkConf and openlineage.yml strings: "false" was true)
            if flag in out:
                out[flag] = _truthy(out[flag])
    # (an empty member is left out, as openlineage-python does: OPENLINEAGE__TRANSPORT__TRANSPORTS__DEFAULT_HTTP='{}'
    # keeps OPENLINEAGE_URL out of a composite)
    if kind == "composite" and isinstance(out.get("transports"), Mapping):
        out["transports"] = {name: pythonize_transport(sub) for name, sub in out["transports"].items()
                             if isinstance(sub, Mapping) and sub}
    if kind == "composite" and isinstance(out.get("transports"), list):
        out["transports"] = [pythonize_transport(sub) for sub in out["transports"] if isinstance(sub, Mapping) and sub]
    return out


def _number(value: Any) -> Any:
    """``"3"`` -> 3, ``"0.5"`` -> 0.5; anything else unchanged."""
    if isinstance(value, str):
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                pass
    return value


def _deep_merge(low: Mapping[str, Any], high: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(low)
    for key, value in high.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _positive_int(value: Any, key: str) -> int:
    """``value`` as a whole number above 0; else a configuration error naming ``key`` (0 or less made every
    undeliverable event a dropped one)."""
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{key} must be a whole number of bytes, not {value!r}") from None
    if number <= 0:
        raise ValueError(f"{key} must be above 0, not {number}")
    return number


def _yaml_config() -> tuple[dict[str, Any], str | None]:
    candidates = [os.environ.get("OPENLINEAGE_CONFIG"), "openlineage.yml",
                  os.path.join(os.path.expanduser("~"), ".openlineage", "openlineage.yml")]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate):
            import yaml  # deferred: only processes that emit pay for it

            with open(candidate, encoding="utf-8") as f:
                try:
                    content = yaml.safe_load(f) or {}
                except yaml.YAMLError as error:  # a configuration error (exit 2), said in one line, no traceback
                    where = getattr(error, "problem_mark", None)
                    at = f" (line {where.line + 1}, column {where.column + 1})" if where is not None else ""
                    problem = getattr(error, "problem", None) or type(error).__name__
                    raise ValueError(f"{candidate}: not valid YAML{at}: {problem}") from None
            if not isinstance(content, dict):
                raise ValueError(f"{candidate}: expected a mapping at the top level")
            return content, candidate
    return {}, None


def _env_config() -> dict[str, Any]:
    """``OPENLINEAGE__A__B=v`` -> ``{"a": {"b": v}}``; values parsed as JSON when they are JSON."""
    prefix = "OPENLINEAGE__"
    config: dict[str, Any] = {}
    # as openlineage-python: deepest keys first, so that a whole section (OPENLINEAGE__TRANSPORT='{...}') replaces
    # what its sub-keys said
    for key, raw in sorted(((k, v) for k, v in os.environ.items() if k.startswith(prefix)), reverse=True):
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        _put(config, [part.lower() for part in key[len(prefix):].split("__")], value)
    return config


def _simple_url_transport() -> dict[str, Any] | None:
    """The http transport of ``OPENLINEAGE_URL`` / ``OPENLINEAGE_ENDPOINT`` / ``OPENLINEAGE_API_KEY``, if set."""
    if not os.environ.get("OPENLINEAGE_URL"):
        return None
    transport: dict[str, Any] = {"type": "http", "url": os.environ["OPENLINEAGE_URL"]}
    if os.environ.get("OPENLINEAGE_ENDPOINT"):
        transport["endpoint"] = os.environ["OPENLINEAGE_ENDPOINT"]
    if os.environ.get("OPENLINEAGE_API_KEY"):
        transport["auth"] = {"type": "api_key", "apiKey": os.environ["OPENLINEAGE_API_KEY"]}
    return transport


def _with_simple_url(transport: dict[str, Any] | None, source: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """Where ``OPENLINEAGE_URL`` (with its endpoint and key) goes, as openlineage-python places it: the transport
    when nothing else names one; the ``default_http`` member of a composite; the missing url, endpoint and key of
    an ``async_http``. A transport named elsewhere (openlineage.yml, ``OPENLINEAGE__TRANSPORT__*``) is left alone:
    merging the trio into it sent the key meant for ``OPENLINEAGE_URL``'s backend to the file's."""
    simple = _simple_url_transport()
    kind = str((transport or {}).get("type", "")).lower()
    if simple is None:
        return transport, source
    if not kind:
        return _deep_merge(simple, transport or {}), "environment"  # (+ `OPENLINEAGE__TRANSPORT__COMPRESSION`...)
    assert transport is not None
    if kind == "composite":
        members = transport.get("transports") or {}  # (none listed yet: OPENLINEAGE_URL is its one member)
        if isinstance(members, Mapping) and not any(str(k).lower() == "default_http" for k in members):
            return {**transport, "transports": {**members, "default_http": simple}}, source
    elif kind == "async_http":
        return {**{k: v for k, v in simple.items() if k != "type"}, **transport}, source
    return transport, source


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in {"true", "1", "yes"}


def warn_unknown_keys(config: Mapping[str, Any], where: str) -> list[str]:
    """Warn once per unknown top-level key (openlineage-python silently ignores them)."""
    unknown = sorted(k for k in config if k not in KNOWN_TOP_LEVEL_KEYS and k not in SPARK_PLUGIN_KEYS)
    for key in unknown:
        log.warning("unknown OpenLineage configuration key %r in %s: ignored", key, where)
    return unknown


def _layer_transports(layers: list[tuple[str, Any]]) -> tuple[dict[str, Any] | None, str | None]:
    """Merge transport sections from lowest to highest precedence. A layer naming another ``type`` replaces
    the lower one instead of merging into it, so an http URL from the environment never leaks into a file
    transport chosen on the command line."""
    transport: dict[str, Any] | None = None
    source = None
    for name, layer in layers:
        if not isinstance(layer, Mapping) or not layer:
            continue
        layer_type, lower_type = str(layer.get("type", "")).lower(), str((transport or {}).get("type", "")).lower()
        # (a lower layer without a type, `OPENLINEAGE__TRANSPORT__AUTH__*` under a file's http, is merged into it)
        if transport is None or (layer_type and lower_type and layer_type != lower_type):
            transport = dict(layer)
        else:
            transport = _deep_merge(transport, layer)
        source = name
    return transport, source


def shared_settings() -> dict[str, Any]:
    """``openlineage.yml`` over the ``OPENLINEAGE__*`` variables (steps 2 and 3 above), nested: what a producer
    reads from them besides the transport and spool sections, which :func:`load_config` reads. Raises what
    reading the file raises (unreadable, not YAML, not a mapping)."""
    return _deep_merge(_env_config(), _yaml_config()[0])


def load_config(overrides: Mapping[str, Any] | None = None) -> EmitterConfig:
    """Resolve the configuration following the numbered precedence in this module's docstring."""
    explicit = nest(overrides or {})
    yaml_config, yaml_path = _yaml_config()
    env_config = _env_config()
    warn_unknown_keys(explicit, "explicit configuration")
    if yaml_path:
        warn_unknown_keys(yaml_config, yaml_path)
    merged = _deep_merge(_deep_merge(env_config, yaml_config), explicit)

    disabled = _truthy(os.environ.get("OPENLINEAGE_DISABLED", "")) or _truthy(merged.get("disabled", ""))
    spool_section = merged.get("spool")
    spool: Mapping[str, Any] = spool_section if isinstance(spool_section, Mapping) else {}
    spool_dir = Path(spool.get("dir") or state_dir() / "spool")
    spool_max = _positive_int(spool.get("maxBytes", 256 * 1024 * 1024), "spool.maxBytes")

    transport, source = _layer_transports([
        ("environment", env_config.get("transport")),
        (yaml_path or "openlineage.yml", yaml_config.get("transport")),
        ("explicit configuration", explicit.get("transport")),
    ])
    transport, source = _with_simple_url(transport, source)
    if transport and transport.get("type"):
        transport = pythonize_transport(transport)
        assert source is not None  # _layer_transports names the layer of every transport it returns
    else:
        events_file = state_dir() / DEFAULT_EVENTS_FILE
        transport = {"type": "file", "log_file_path": str(events_file), "append": True}
        source = "embedded default"
    return EmitterConfig(transport=transport, source=source, spool_dir=spool_dir,
                         spool_max_bytes=spool_max, disabled=disabled, filters=_filters(merged.get("filters")))


def _filters(value: Any) -> tuple[Mapping[str, Any], ...]:
    """The ``filters`` list (a JSON-valued ``OPENLINEAGE__FILTERS`` too); anything else is a configuration error
    (openlineage-python fails on it as well, less clearly)."""
    if value is None or value == []:
        return ()
    if not isinstance(value, list) or not all(isinstance(f, Mapping) for f in value):
        raise ValueError("filters must be a list of {type: exact, match: <job name>} or {type: regex, regex: "
                         "<pattern>}")
    return tuple(value)


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    """``["transport.type=http"]`` -> ``{"transport.type": "http"}``; raises ValueError on a bad pair."""
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf expects KEY=VALUE, got {pair!r}")
        overrides[key.strip().removeprefix("spark.openlineage.")] = value
    return overrides
