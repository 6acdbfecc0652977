"""Job names (the JVM Spark integration's ``NameNormalizer``) and namespaces Marquez accepts."""
from __future__ import annotations

import re
import unicodedata

# --------------------------------------------------------------------------------------------
# Job names and Marquez-safe namespaces
# --------------------------------------------------------------------------------------------

_EDGE_NON_WORD = re.compile(r"^\W+|\W+$", re.ASCII)  # Java's \w is ASCII-only
_LOWER_UPPER = re.compile(r"([a-z])([A-Z])")
_ACRONYM_END = re.compile(r"(?<!^)([A-Z])([a-z])")
_DIGIT_UPPER = re.compile(r"(\d)([A-Z])")
_NON_ALNUM = re.compile(r"[^a-zA-Z0-9]+")


def normalize_name(name: str | None) -> str:
    """The Spark integration's ``NameNormalizer.normalize``: ``MyXMLBasedApp`` -> ``my_xml_based_app``.

    Steps, as in Java: trim non-word characters (ASCII ``\\w``) at both ends; NFKD and drop combining
    marks (``é`` -> ``e``); split ``aB`` -> ``a B``, ``ABc`` -> ``A Bc`` (not at the start),
    ``1A`` -> ``1 A``; lower-case; every run of non ``[a-zA-Z0-9]`` -> ``_``. ``None`` -> ``""``.
    """
    if name is None:
        return ""
    trimmed = _EDGE_NON_WORD.sub("", name)
    decomposed = unicodedata.normalize("NFKD", trimmed)
    no_marks = "".join(c for c in decomposed if not unicodedata.category(c).startswith("M"))
    words = _DIGIT_UPPER.sub(r"\1 \2", _ACRONYM_END.sub(r" \1\2", _LOWER_UPPER.sub(r"\1 \2", no_marks)))
    return _NON_ALNUM.sub("_", words.lower())


_MARQUEZ_UNSAFE = re.compile(r"[^a-zA-Z:;=/0-9_\-.@+]")


def safe_namespace(namespace: str) -> str:
    """Replace every character Marquez refuses in a namespace with ``_``.

    Marquez's ``NamespaceName`` only accepts ``[a-zA-Z:;=/0-9_\\-.@+]`` (max 1024): an event with any
    other character (``,`` of a multi-host JDBC URL, ``[]`` of an IPv6 literal, a space, ``%``,
    ``\\``) is rejected whole, losing its lineage. Applied once by the emitter to every namespace.
    """
    return _MARQUEZ_UNSAFE.sub("_", namespace)
