"""openlineage-python transports from the resolved configuration, with unknown keys reported."""
from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping
from contextlib import suppress
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import urlsplit

import attr
import orjson

from emitter.config import composite_members

log = logging.getLogger(__name__)

#: Keys every transport config may carry (read by openlineage-python's factory itself).
_FACTORY_KEYS = frozenset({"type", "name", "priority"})
_announced_files: set[str] = set()
#: The file transport's buffered lines reach the OS at most this long after they were written.
FLUSH_EVERY_SECONDS = 0.5
#: The file transport's write buffer: at harvest rates the default 8 KiB made a system call every five events.
WRITE_BUFFER_BYTES = 64 * 1024


def _config_fields(config_class: type) -> set[str] | None:
    """Field names of a transport config class: attrs-based or dataclass-based (openlineage-python mixes both)."""
    fields: set[str] = set()
    if dataclasses.is_dataclass(config_class):
        fields |= {f.name for f in dataclasses.fields(config_class)}
    if attr.has(config_class):
        fields |= {f.name for f in attr.fields(config_class)} | {f.alias for f in attr.fields(config_class) if f.alias}
    return fields or None


def unknown_transport_keys(transport: Mapping[str, Any]) -> list[str]:
    """Keys of ``transport`` that its openlineage-python config class does not read (silently ignored there)."""
    from openlineage.client.transport import get_default_factory

    factory = get_default_factory()
    transport_class = factory.transports.get(str(transport.get("type")))
    if transport_class is None or isinstance(transport_class, str):
        return []
    fields = _config_fields(transport_class.config_class)
    if fields is None:
        return []
    # openlineage-python accepts camelCase spellings of a few snake_case fields
    fields |= {"sslContext", "sslcontext", "apiKey"}  # (customHeaders: read as custom_headers by emitter.config)
    unknown = sorted(k for k in transport if k not in fields and k not in _FACTORY_KEYS)
    for _name, member in composite_members(transport):
        unknown += [f"transports.{key}" for key in unknown_transport_keys(member)]
    return unknown


def warn_unknown_keys(transport: Mapping[str, Any], members: bool = True) -> None:
    """One warning per key of ``transport`` (and of its composite members, unless ``members`` is false) that
    openlineage-python would ignore without a word."""
    for key in unknown_transport_keys(transport):
        if members or not key.startswith("transports."):
            log.warning("unknown key %r in the %s transport configuration: ignored", key, transport.get("type"))


def _json_lines_file_transport() -> type:
    """openlineage-python's FileTransport, for the events this emitter hands it.

    Our events arrive as JSON-ready dicts already (:func:`emitter.events.event_dict`). The stock ``emit``
    walks each one again through ``Serde`` and opens and closes the file per event: at harvest rates that
    was three quarters of the emitter's time. In append mode on a local path this subclass buffers lines and
    writes them to a descriptor kept open at most FLUSH_EVERY_SECONDS after they were buffered (on the next
    write, else from a timer), when the buffer is full, and on the emitter's flush()/close() (a harvester's
    checkpoint moves only after that); anything else goes to the stock ``emit``. A write that fails (a full
    disk) leaves no torn line and says how many buffered events it lost (:meth:`take_lost`).
    Lines are UTF-8 JSON from orjson: a quarter of the standard library encoder's time, which was a sixth of
    a harvested statement's.
    """
    from openlineage.client.transport.file import FileTransport

    class JsonLinesFileTransport(FileTransport):
        _fd: int | None = None
        _flushed_at = 0.0
        _timer: threading.Timer | None = None

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self._lock = threading.Lock()  # the buffer and the file, against the timer's flush
            self._buffer = bytearray()
            self._buffered = 0  # events in the buffer (counted delivered by the caller already)
            self._lost = 0

        def emit(self, event: Any) -> None:
            if not (isinstance(event, dict) and self.config.append and not self.config._needs_fsspec()
                    and not getattr(self.config, "debug_mode", False)):  # (debug mode: a file per event, stock)
                return super().emit(cast(Any, _Named(event)) if isinstance(event, dict) else event)
            with self._lock:
                if self._fd is None:
                    path = _local_path(self.config.log_file_path)
                    # its directory made, as the JVM client's file transport does (else every event was spooled)
                    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
                    self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                self._buffer += orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE)
                self._buffered += 1
                if len(self._buffer) >= WRITE_BUFFER_BYTES or \
                        time.monotonic() - self._flushed_at > FLUSH_EVERY_SECONDS:
                    self._flush_locked(this_event=True)
                elif self._timer is None:
                    # a line written just after a flush must not wait for the next event, which may come an
                    # hour later (the START of a long Spark action): one timer flushes it, at most one pending
                    self._timer = threading.Timer(FLUSH_EVERY_SECONDS, self._timed_flush)
                    self._timer.daemon = True
                    self._timer.start()
            return None

        def _flush_locked(self, this_event: bool = False) -> None:
            """Write the buffer. On a failure (a full disk) a torn line it left is cut off (nothing for the next
            append to glue onto) and the buffered events not written whole are lost: counted in :meth:`take_lost`,
            except the one being emitted (``this_event``, the last: its emit raises, the caller spools it)."""
            self._flushed_at = time.monotonic()
            if not self._buffer or self._fd is None:
                return
            data, count = bytes(self._buffer), self._buffered
            self._buffer.clear()
            self._buffered = 0
            written = 0
            try:
                while written < len(data):
                    written += os.write(self._fd, data[written:])
            except OSError:
                whole = data.rfind(b"\n", 0, written) + 1  # our bytes that reached the file as whole lines
                if written > whole:  # our torn last line ends the file: cut only it (another process may append
                    with suppress(OSError):  # to the same file: nothing before our own bytes is touched)
                        os.ftruncate(self._fd, os.fstat(self._fd).st_size - (written - whole))
                self._lost += count - data.count(b"\n", 0, whole) - (1 if this_event else 0)
                raise

        def _timed_flush(self) -> None:
            with self._lock:
                self._timer = None
                try:
                    self._flush_locked()
                except OSError as error:  # counted in take_lost(): the emitter reports it
                    log.warning("lineage events could not be written to %s (%s)", self.config.log_file_path,
                                error.strerror or error)

        def flush(self) -> None:
            """Hand buffered lines to the OS; the emitter calls it on flush() and close()."""
            with self._lock:
                self._flush_locked()

        def take_lost(self) -> int:
            """Events counted delivered whose lines could not be written since the last call (then 0 again)."""
            with self._lock:
                lost, self._lost = self._lost, 0
            return lost

        def close(self, timeout: float = -1) -> bool:
            with self._lock:
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
                with suppress(OSError):
                    self._flush_locked()
                if self._fd is not None:
                    os.close(self._fd)
                    self._fd = None
            return super().close(timeout)

    return JsonLinesFileTransport


class _Named(dict[str, Any]):
    """An event dict that also answers ``.job.name`` / ``.dataset.name`` and ``.eventType`` as openlineage-python's
    event classes do: the stock file transport names a debug-mode file after them (a plain dict gave
    ``unknown_job_name-unknown_event_type``). Serialized as the dict it is."""

    def __init__(self, event: dict[str, Any]) -> None:
        super().__init__(event)
        for key in ("job", "dataset"):
            if isinstance(event.get(key), dict) and isinstance(event[key].get("name"), str):
                setattr(self, key, SimpleNamespace(name=event[key]["name"]))
        if isinstance(event.get("eventType"), str):
            self.eventType = event["eventType"]


def _local_path(location: str) -> str:
    """A local file transport location as a path (``file:///x`` -> ``/x``), read as openlineage-python does."""
    from openlineage.client.transport.file import LocalFileHandler

    return LocalFileHandler._to_local_path(location)  # the same reading as the stock transport


def _factory() -> Any:
    """A private copy of openlineage-python's transport factory with our file transport, so the host
    process's own openlineage-python use (Airflow, a notebook) is left as it was."""
    from openlineage.client.transport import get_default_factory
    from openlineage.client.transport.factory import DefaultTransportFactory

    from emitter.kafka_transport import CheckedKafkaTransport
    from emitter.keepalive_http import keepalive_http_transport

    factory = DefaultTransportFactory()

    factory.transports = {**get_default_factory().transports, "file": _json_lines_file_transport(),
                           "http": keepalive_http_transport(), "kafka": CheckedKafkaTransport}
    return factory


#: Requests in flight at once for the http transport (each on its own thread and kept-alive connection; threads
#: are started as the work needs them). benchmarks/delivery_faults.py: against a backend answering in 10 ms a
#: harvest hands over about 4,000 events a second, which takes 40 or more requests in flight.
DEFAULT_IN_FLIGHT = 100


def parallel_plan(transport: Mapping[str, Any] | None, in_flight: int | None = None
                  ) -> tuple[Mapping[str, Any] | None, int]:
    """The transport configuration the emitter builds, and how many requests it keeps in flight.

    ``http``: ``in_flight`` (default :data:`DEFAULT_IN_FLIGHT`). ``async_http`` is delivered the same way: its
    ``max_concurrent_requests`` is the width, and openlineage-python's ``AsyncHttpTransport`` itself is not used,
    because its ``emit`` returns before delivery and a failed event is only logged (it could be neither spooled
    nor set aside), it orders a run's START before its COMPLETE but not a parent before its children, and it
    retries timeouts like any error. Every other transport: one at a time, in the caller's thread.
    """
    if not transport:
        return transport, 1
    kind = str(transport.get("type", "")).lower()
    if kind == "async_http":
        config = {k: v for k, v in transport.items() if k not in ("max_queue_size", "max_concurrent_requests")}
        width = int(transport.get("max_concurrent_requests") or in_flight or DEFAULT_IN_FLIGHT)
        return {**config, "type": "http"}, max(1, width)
    if kind == "http":
        return transport, max(1, in_flight or DEFAULT_IN_FLIGHT)
    return transport, 1


def _environment_read_once(transport: Mapping[str, Any]) -> dict[str, Any]:
    """An http transport with a requests Session that reads the environment's proxy settings once instead of on
    every request (requests walks ``os.environ`` per request for them: a third of a POST's CPU time, which bounds
    how fast a harvest delivers). Only when nothing else requests takes from the environment is in play: a CA
    bundle variable (``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``) or a ``~/.netrc`` keep the stock session."""
    import os

    import requests
    from requests.utils import get_environ_proxies

    if transport.get("session") is not None or os.environ.get("REQUESTS_CA_BUNDLE") \
            or os.environ.get("CURL_CA_BUNDLE") or os.environ.get("NETRC") \
            or Path(os.path.expanduser("~/.netrc")).exists():
        return dict(transport)
    session = requests.Session()
    session.proxies = get_environ_proxies(str(transport.get("url", "")))  # honours no_proxy for this URL
    session.trust_env = False
    return {**transport, "session": session}


def _no_read_retries(transport: Mapping[str, Any]) -> dict[str, Any]:
    """An http transport does not retry a read timeout unless ``retry.read`` is configured: a backend that
    took the request and never answered will not answer the retry (openlineage-python's default retried it
    five times, each paying the whole timeout)."""
    retry = transport.get("retry")
    retry = dict(retry) if isinstance(retry, Mapping) else {}
    retry.setdefault("read", 0)
    return {**transport, "retry": retry}


def create_transport(transport: Mapping[str, Any] | None, announce: bool = True,
                     announce_file: bool | Callable[[str], None] = True) -> Any:
    """Build the transport; raises ValueError with a readable message when the configuration is unusable.

    ``announce`` reports unknown keys and prints a file transport's path once per process; ``announce_file=False``
    keeps the path quiet (a host that must print nothing, e.g. a Spark driver with a configured file); a callable
    is given the notice instead of stderr (a Spark driver's stderr is copied into spark-submit's stdout)."""
    if not transport or not transport.get("type"):
        raise ValueError("no OpenLineage transport type configured")
    factory = _factory()
    check_types(transport, factory.transports)
    if announce:
        warn_unknown_keys(transport)
        _warn_two_credentials(transport)
    if str(transport.get("type")).lower() == "http":
        from emitter.keepalive_http import direct_target

        transport = _no_read_retries(transport)
        if direct_target(dict(transport)) is None:  # the stock requests path: make its session cheaper
            transport = _environment_read_once(transport)
    try:
        built = factory.create(dict(transport))
    except Exception as error:  # noqa: BLE001 - openlineage-python raises assorted types for bad config
        from emitter.redact import redact

        raise ValueError(f"cannot build the {transport.get('type')!r} OpenLineage transport: "
                         f"{redact(str(error))}") from None
    if announce and announce_file:
        announce_file_transport(transport, announce_file if callable(announce_file) else _stderr)
    if str(transport.get("type")).lower() == "console":
        _show_console_events()
    return built


#: The transport types :func:`create_transport` knows (openlineage-python's default factory's, and ours), for a
#: process that checks a configuration without importing openlineage-python (a Spark driver, whose emitter runs in
#: a child process: its error would come too late, after an application's ``setLogLevel("ERROR")``). A test keeps
#: it equal to the factory's.
KNOWN_TYPES = frozenset({"amazon_datazone_api", "async_http", "composite", "console", "datadog", "file", "gcplineage",
                         "http", "kafka", "msk-iam", "noop", "transform"})


#: Keys a transport type cannot work without (openlineage-python refuses it when it builds the transport, which for
#: a Spark driver happens in the emitter's child, after the application's first lines: checked with the type instead).
REQUIRED_KEYS = {"http": ("url",), "async_http": ("url",)}


def check_types(transport: Mapping[str, Any], known: Collection[str] | None = None, where: str = "transport") -> None:
    """Raise ValueError naming a transport (or a composite's member) whose type is missing or unknown, or that lacks
    a key of :data:`REQUIRED_KEYS`. (A dotted type is a class path openlineage-python imports; for a bare unknown
    word it said "not enough values to unpack (expected 2, got 1)", for a member without one "Failed to import".)"""
    known = _factory().transports if known is None else known
    kind = str(transport.get("type") or "").strip()
    if not kind:
        raise ValueError(f"{where}.type is not set: one of {', '.join(sorted(known))}")
    if "." not in kind and kind.lower() not in known:
        named = f" ({where}.type)" if where != "transport" else ""
        raise ValueError(f"unknown OpenLineage transport type {kind!r}{named}: one of "
                         f"{', '.join(sorted(known))}, or a transport class's module.Class path")
    for key in REQUIRED_KEYS.get(kind.lower(), ()):
        if not transport.get(key):
            raise ValueError(f"{where}.{key} is not set: the {kind.lower()} transport needs it")
    for name, member in composite_members(transport):
        check_types(member, known, f"{where}.transports.{name}")


def _show_console_events() -> None:
    """openlineage-python's console transport logs each event at INFO on its own logger, which nothing shows in a
    process that configured no logging (ours): a user who chose ``console`` saw nothing, with every event counted
    delivered. The events go to stderr, one JSON line each, unless the host already handles that logger."""
    logger = logging.getLogger("openlineage.client.transport.console")
    if logger.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # (a root handler of the host's would print each event twice)


def _warn_two_credentials(transport: Mapping[str, Any]) -> None:
    """An http URL holding ``user:password@`` beside an ``auth`` setting: openlineage-python's requests then sends
    the URL's Basic credentials and drops the token without a word (the backend answers 401 to every event)."""
    auth = transport.get("auth")
    auth_type = str(auth.get("type", "")).lower() if isinstance(auth, Mapping) else ""
    url = transport.get("url")
    if str(transport.get("type")).lower() != "http" or not auth_type or not isinstance(url, str):
        return
    if "@" in urlsplit(url).netloc:
        log.warning("the http transport's url holds credentials and transport.auth (%s) is set too: the url's "
                    "user and password are sent (HTTP Basic) and the %s is not; remove one of them",
                    auth_type, "api key" if auth_type == "api_key" else "token")


def announce_file_transport(transport: Mapping[str, Any], say: Callable[[str], None]) -> None:
    """A file transport's path, said once per process (see :func:`create_transport`); nothing for another type."""
    if transport.get("type") == "file":
        _announce_file(str(transport.get("log_file_path")), say,
                       appended=bool(transport.get("append")) and not transport.get("debug_mode"))


def _announce_file(path: str, say: Callable[[str], None], appended: bool = True) -> None:
    """The file transport's path is said once per process, so a user finds the events."""
    local = _local_path(path)  # `file:///x` is /x (it made a directory ./file: in the working directory)
    if "://" not in local:  # (a remote fsspec location has no local directory)
        Path(local).parent.mkdir(parents=True, exist_ok=True)
    if path not in _announced_files:
        _announced_files.add(path)
        say(f"lineage events are appended to {path}" if appended else
            f"lineage events are written to {path}-<time>....json, a file each (append: false or debug_mode)")


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)
