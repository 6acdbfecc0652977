"""File and object-store datasets: ``(namespace, name)`` of a path or URI as the Java client forms them.

Partition trimming reuses openlineage-python's own trimmers.
"""
from __future__ import annotations

import contextlib
import functools
import os
import posixpath
import re
import sys
from typing import Any
from urllib.parse import unquote

# --------------------------------------------------------------------------------------------
# Files and object stores
# --------------------------------------------------------------------------------------------

#: scheme -> (canonical scheme, name keeps its leading "/", userinfo is part of the authority,
#: password may contain "/"). Mirrors the Java client's FilesystemDatasetUtils extractors:
#: object stores (s3/gs/abfss/wasbs) name objects by key (no leading "/"), s3a/s3n -> s3,
#: abfs -> abfss, wasb -> wasbs. For abfss/wasbs the "container@" before the account host is the
#: container, not credentials. Only s3 keys appear with a "/" inside an embedded secret (AWS secret
#: keys are base64), so only there is the userinfo allowed to contain one.
_FS_SCHEMES: dict[str, tuple[str, bool, bool, bool]] = {
    "s3": ("s3", False, False, True),
    "s3a": ("s3", False, False, True),
    "s3n": ("s3", False, False, True),
    "gs": ("gs", False, False, False),
    "abfs": ("abfss", False, True, False),
    "abfss": ("abfss", False, True, False),
    "wasb": ("wasbs", False, True, False),
    "wasbs": ("wasbs", False, True, False),
    "hdfs": ("hdfs", True, False, False),
}
_GENERIC_FS = (None, True, False, False)  # any other scheme: keep it, keep the path as is

_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):(?P<rest>.*)$", re.S)
# userinfo is "user[:password]@"; the password alternative with "/" is only used for s3 (see above)
_AUTHORITY_STRICT = re.compile(r"^//(?:(?P<userinfo>[^@/?#]*)@)?(?P<host>[^/?#]*)(?P<path>[^?#]*)")
_AUTHORITY_SLASHY = re.compile(
    r"^//(?:(?P<userinfo>[^@/:?#]*:[^@?#]*|[^@/?#]*)@)?(?P<host>[^/?#]*)(?P<path>[^?#]*)"
)


def _strip_trailing_slash(path: str) -> str:
    # JVM: FilesystemUriSanitizer.removeLastSlash + nonEmptyPath ("" -> "/")
    return path.rstrip("/") or "/"


def path_dataset(path_or_uri: str) -> tuple[str, str]:
    """Return ``(namespace, name)`` for a file, directory or object-store location.

    - local path or ``file:`` URI -> ``("file", absolute path)``; ``file:///x`` == ``file:/x`` == ``/x``;
      a relative path is made absolute against the current directory (Spark qualifies paths the
      same way before the JVM integration sees them). ``file://host/x`` -> ``("file://host", "/x")``
      (the spec's remote file system form).
    - ``hdfs://nn:8020/p`` -> ``("hdfs://nn:8020", "/p")`` (no default port is added, as in the JVM).
    - ``s3://b/k``, ``s3a://``, ``s3n://`` -> ``("s3://b", "k")``; ``gs://b/k`` -> ``("gs://b", "k")``.
    - Azure: ``abfs[s]://container@account.dfs.core.windows.net/p`` ->
      ``("abfss://container@account.dfs.core.windows.net", "p")`` and ``wasb[s]://container@host/p`` ->
      ``("wasbs://container@host", "p")``. The OpenLineage naming spec writes both namespaces as
      ``{scheme}://{container}@{service}.dfs.core.windows.net`` (and openlineage-python's ``WASBS``
      naming class hard-codes ``.dfs.``), but the JVM integration keeps the URI's authority as
      written (``wasbs://c@acct.blob.core.windows.net``); we follow the JVM so a Spark JVM read and
      ours name the same node, and never rewrite the host.
    - any other scheme -> ``("{scheme}://{authority}", path)``.

    Credentials (``user:pass@``, ``s3a://KEY:SECRET@bucket``), query strings and fragments are
    dropped, the path is percent-decoded (Java's ``URI.getPath()``), trailing ``/`` removed (the
    root stays ``/``). Partition folders are *not* trimmed here: see :func:`trim_partitions`.
    """
    m = _uri(path_or_uri)
    if m is None:  # everything without a scheme is a local path
        return "file", _strip_trailing_slash(os.path.abspath(path_or_uri))
    scheme, rest = m.group("scheme").lower(), m.group("rest")
    if scheme == "file":
        return _file_uri(rest)
    canonical, keep_slash, userinfo_is_container, slashy = _FS_SCHEMES.get(scheme, _GENERIC_FS)
    a = (_AUTHORITY_SLASHY if slashy else _AUTHORITY_STRICT).match(rest)
    if a is None:  # "scheme:opaque" (e.g. dbfs:/x): no authority
        path = unquote(rest.split("?", 1)[0].split("#", 1)[0])
        return scheme, _strip_trailing_slash(path)
    userinfo, host, path = a.group("userinfo"), a.group("host"), unquote(a.group("path"))
    if userinfo is not None and userinfo_is_container and ":" not in userinfo:
        host = f"{userinfo}@{host}"  # abfss/wasbs: container@account is the authority
    namespace = f"{canonical or scheme}://{host}" if host else (canonical or scheme)
    name = path if keep_slash else path.lstrip("/")
    return namespace, _strip_trailing_slash(name)


def escape_literal_path(path: str) -> str:
    """A path string that is not percent-encoded (Hadoop's ``Path.toString()``, a path as an application gave
    it to Hadoop) in the form :func:`path_dataset` reads: in a URI (which it percent-decodes, as Java's
    ``URI.getPath()``) ``%`` is escaped, so a folder named ``p%41`` keeps its name; a plain path is read as is."""
    return path.replace("%", "%25") if _uri(path) is not None else path


def _uri(path: str) -> re.Match[str] | None:
    m = _URI.match(path)
    return m if m is not None and len(m.group("scheme")) > 1 else None  # "C:/x" drive letters are not URIs


def _file_uri(rest: str) -> tuple[str, str]:
    # file:/x, file:///x, file://localhost/x -> local; file://host/x -> remote file system
    path = rest.split("?", 1)[0].split("#", 1)[0]
    namespace = "file"
    if path.startswith("//"):
        host, _, tail = path[2:].partition("/")
        host = host.rpartition("@")[2]  # drop user:pass@
        path = "/" + tail
        if host and host.lower() != "localhost":
            namespace = f"file://{host}"
    path = unquote(path)
    if not path.startswith("/"):
        path = os.path.abspath(path)
    return namespace, _strip_trailing_slash(posixpath.normpath(path) if path != "/" else path)


#: openlineage-python's ``BUILTIN_TRIMMERS`` (``openlineage.client.dataset.dataset``), by name, in its order (a
#: test compares them).
BUILTIN_TRIMMER_NAMES = ("KeyValueTrimmer", "DateTrimmer", "MultiDirDateTrimmer", "YearMonthTrimmer")


@functools.lru_cache(maxsize=1)
def _trimmers() -> tuple[Any, ...]:
    # Why not `from openlineage.client.dataset.dataset import BUILTIN_TRIMMERS`: that runs openlineage.client's
    # package __init__ (every transport and facet class: ~0.25 s of CPU), which a Spark driver never pays (its
    # events are built by the emitter's child process, see emitter.emitter_process). The trimmers module itself
    # imports only the standard library: it is loaded from its file, on its own, unless the package is imported
    # already; anything unexpected falls back to the import.
    if "openlineage.client" not in sys.modules:
        with contextlib.suppress(Exception):
            module = _trimmers_module()
            return tuple(getattr(module, name)() for name in BUILTIN_TRIMMER_NAMES)
    from openlineage.client.dataset.dataset import BUILTIN_TRIMMERS

    return tuple(cls() for cls in BUILTIN_TRIMMERS)


def _trimmers_module() -> Any:
    """``openlineage/client/dataset/trimmers.py`` executed as a module of its own (``openlineage`` is a namespace
    package: finding it runs no code)."""
    import importlib.util

    package = importlib.util.find_spec("openlineage")
    for location in (package.submodule_search_locations or []) if package is not None else []:
        path = os.path.join(location, "client", "dataset", "trimmers.py")
        spec = importlib.util.spec_from_file_location("emitter.naming._openlineage_trimmers", path)
        if spec is not None and spec.loader is not None and os.path.isfile(path):
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise ImportError("openlineage/client/dataset/trimmers.py not found")


def trim_partitions(path: str) -> str:
    """Cut trailing partition folders from a dataset name: ``/x/dt=2025-09-01/h=3`` -> ``/x``.

    Uses openlineage-python's built-in trimmers (the same set and rules as the Java client's
    ``DatasetNameTrimmer``s): ``key=value`` folders, dates (``20250901``, ``2025-09-01``,
    ``01.09.2025``, with time noise ``20250901T0930Z``), ``yyyy/MM[/dd]`` folder chains and
    ``yyyyMM``/``yyyy-MM``. Applied until nothing changes, as openlineage-python's DatasetReducer
    does; a single-segment name (``/20250901``) is never emptied and non-partition folders are kept.
    """
    trimmers = _trimmers()
    for _ in range(32):  # every pass shortens the name; bound it like the reducer does
        trimmed = path
        for trimmer in trimmers:
            trimmed = trimmer.trim(trimmed)
        if trimmed == path:
            return path
        path = trimmed
    return path
