"""Masks secrets (passwords, keys, tokens) in strings before they reach an event or a log line.

SQL text, JDBC/ODBC connection strings, URLs and Spark properties all pass through here. Each rule
keeps the key and replaces only the secret *value* with ``***`` (``password=***;``,
``IDENTIFIED BY '***'``, ``user:***@host``), so a reader still sees that something was there.

Rules are data (:data:`RULES`): a name, the trigger words that must occur for the rule to run, a
compiled regex whose group ``v`` is the secret, and a one-line comment. :func:`redact` runs over every
string of every event, so it is built for speed: a string with no trigger word costs one ``lower()``
and a dozen substring tests; the regexes are written lower-case and matched case-sensitively against
the lower-cased text (Python's ``re.IGNORECASE`` is several times slower), only the masking uses the
original. Table and column names are lineage data and are never touched: a rule needs a key *and* a
value (``password_history``, ``dbo.passwords``, ``secret_santa``, ``token_count`` stay intact).
"""
from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["MASK", "RULES", "Rule", "redact", "redact_obj", "is_secret_key", "RedactingFilter"]

MASK = "***"

#: accept(original_text, match) -> bool: a check the regex cannot make on lower-cased text
Accept = Callable[[str, "re.Match[str]"], bool]


@attrs.frozen
class Rule:
    """One secret form: where ``regex`` matches, its group ``v`` (the secret) becomes ``***``."""

    name: str
    triggers: tuple[str, ...]  # lower-case substrings; the rule runs only when one is present...
    needs: tuple[str, ...]  # ...and all of these are (cheap gates: "=", "'", "://")
    regex: re.Pattern[str]
    comment: str
    on_original: bool = False  # match the original text (the form is case-sensitive), not lower-cased
    accept: Accept | None = None


def _word_start(text: str, m: re.Match[str]) -> bool:
    """The match starts a word: the regexes start with a literal, not ``\\b``, so ``re`` scans fast."""
    i = m.start()
    return i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")


def _key_boundary(text: str, m: re.Match[str]) -> bool:
    """Short key names (pass, pwd, sig) must start a word, follow a separator or ``-D``, or a camelCase
    hump (trustStorePassword); longer ones (password, secret, token...) may be glued (dbpassword=)."""
    i = m.start()
    if len(m.group("k")) > 4 or i == 0:
        return True
    prev = text[i - 1]
    if not prev.isalnum():
        return True  # space, "_", ".", "-", "?", "&", ";", quote
    if text[i - 2 : i] == "-D":
        return True  # java -Dpass=x
    return (prev.islower() or prev.isdigit()) and text[i].isupper()


def _quoted_key_is_secret(text: str, m: re.Match[str]) -> bool:
    return is_secret_key(m.group("k"))


_SEP = r"[_.\-]?"
# Key names whose value is a secret in key=value forms, one flat alternation of literal-led branches
# (re scans those several times faster than nested groups). The name must end right at the "="
# (password_history= and token_count= are not keys); where it may start: _key_boundary.
_KEY_NAMES = "|".join(
    (
        r"pass(?:w(?:or)?d|phrase)?",
        r"pwd",
        rf"secret(?:{_SEP}(?:access{_SEP})?key|{_SEP}string)?",
        rf"client{_SEP}secret",
        rf"app{_SEP}secret",
        r"sharedaccess(?:signature|key)",
        rf"aws{_SEP}(?:(?:access|secret){_SEP}key(?:{_SEP}id)?|key{_SEP}id)",
        rf"access{_SEP}key(?:{_SEP}id)?",
        rf"account{_SEP}key",
        rf"master{_SEP}key",
        rf"private{_SEP}key",
        rf"api{_SEP}key",
        rf"encryption{_SEP}key",
        rf"storage{_SEP}account{_SEP}key",
        r"token",
        r"sig(?:nature)?",
        r"credentials?",
    )
)
# Values: ODBC {braced; "}}" escapes "}"}, "double" or 'single' quoted (SQL doubles ''), or bare up to
# whitespace ; & or a quote, not starting with "(" (CREDENTIALS=(...) holds keys, not a value). A bare
# value deliberately runs over "," and ")": over-masking a host in an exotic URL form is better than
# leaking the tail of a password.
_VALUE = r"""(?P<v>\{(?:[^}]|\}\})*\}|"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s;&"'<>(][^\s;&"'<>]*)"""
_SQL_LITERAL = r"(?P<v>'(?:[^']|'')*')"

_KV_TRIGGERS = ("pass", "pwd", "secret", "key", "token", "sig", "credential")

#: Applied in order. Earlier rules mask whole regions later ones would only partly cover.
RULES: tuple[Rule, ...] = (
    Rule(
        "pem_private_key",
        ("private key",),
        (),
        re.compile(r"-----begin ([a-z ]*)private key-----(?P<v>.*?)(?:-----end \1private key-----|\Z)", re.S),
        "PEM private key block (Snowflake key-pair auth); an unterminated block is masked to the end",
    ),
    Rule(
        "authorization_header",
        ("auth", "api-key"),
        (),
        re.compile(
            r"""(?:authorization|proxy-authorization|x-api-key|x-auth-token|api-key)["']?\s*[:=]\s*["']?"""
            r"""(?P<v>[^"'\r\n]+)"""
        ),
        "HTTP auth headers, any scheme (Bearer, Basic, ...): the whole credential after the colon",
        accept=_word_start,
    ),
    Rule(
        "bearer_token",
        ("bearer",),
        (),
        re.compile(r"bearer\s+(?P<v>[a-z0-9\-._~+/]+=*)"),
        "RFC 6750 bearer token outside a header",
        accept=_word_start,
    ),
    Rule(
        "url_userinfo",
        ("@",),
        ("://",),
        re.compile(r"""://[^\s/:@?#'"]+:(?P<v>[^\s@?#'"]*)@"""),
        "user:password@ in a URL of any scheme; the password may hold '/' (unencoded AWS secrets)",
    ),
    Rule(
        "oracle_userpass",
        ("@",),
        ("jdbc:oracle:",),
        re.compile(r"""jdbc:oracle:\w+:[^/@\s:;'"]+/(?P<v>[^@\s'"]+)@"""),
        "Oracle thin URL jdbc:oracle:thin:user/password@host",
    ),
    Rule(
        "azure_connection_string",
        ("accountkey", "sharedaccesskey", "sharedaccesssignature"),
        ("=",),
        re.compile(r"""(?:accountkey|sharedaccesskey|sharedaccesssignature)\s*=\s*(?P<v>[^;'"\s]+)"""),
        "Azure storage / Service Bus connection strings: the value runs to ';' (SAS values hold '&', '=')",
        accept=_word_start,
    ),
    Rule(
        "azure_hadoop_key",
        ("fs.azure.",),
        ("=",),
        re.compile(r"""fs\.azure\.(?:account\.key|sas)(?:\.[\w\-]+)+\s*=\s*(?P<v>[^\s;&'"]+)"""),
        "Hadoop ABFS/WASB properties fs.azure.account.key.<account>...=<key>, fs.azure.sas.<c>.<a>=<sas>",
    ),
    Rule(
        "key_value",
        _KV_TRIGGERS,
        ("=",),
        re.compile(rf"(?P<k>{_KEY_NAMES})\s*=\s*{_VALUE}"),
        "key=value in connection strings, URL queries, --conf/-D options, SQL options (PASSWORD = 'x')",
        accept=_key_boundary,
    ),
    Rule(
        "quoted_key_value",
        _KV_TRIGGERS,
        (":",),
        re.compile(r"""["'](?P<k>[\w\-. ]+)["']\s*:\s*(?P<v>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""),
        "JSON / Python-repr pairs in a string whose key is_secret_key: \"password\": \"x\", 'token': 'x'",
        accept=_quoted_key_is_secret,
    ),
    Rule(
        "sql_keyword_literal",
        ("pass", "secret", "key", "token"),
        ("'",),
        re.compile(
            r"(?:encrypted\s+password|password|secret|key_id|session_token|token|account_key|private_key"
            rf"|client_secret|connection_string)\s+{_SQL_LITERAL}"
        ),
        "SQL options without '=': PostgreSQL PASSWORD 'x', DuckDB CREATE SECRET (KEY_ID 'k', SECRET 's')",
        accept=_word_start,
    ),
    Rule(
        "sql_identified_by",
        ("identified",),
        (),
        re.compile(
            r"""identified\s+(?:with\s+[\w'"]+\s+)?(?:by|as)\s+(?:values\s+|password\s+)?"""
            r"""(?P<v>'(?:[^']|'')*'|"[^"]*"|[^\s;'"]+)"""
        ),
        "Oracle/MySQL IDENTIFIED BY 'x' | \"x\" | x, MySQL IDENTIFIED WITH plugin BY/AS 'x'",
        accept=_word_start,
    ),
    Rule(
        "aws_access_key_id",
        ("akia", "asia"),
        (),
        re.compile(r"(?:AKIA|ASIA)(?P<v>[0-9A-Z]{16})"),
        "AWS access key ids (long-term AKIA, temporary ASIA) anywhere, even glued to other text",
        on_original=True,
    ),
)

_ALL_TRIGGERS = {t for rule in RULES for t in rule.triggers}
# The pre-check: a trigger containing another one ("accountkey" holds "key") adds nothing to it.
# Substring tests on the lower-cased text are ~10x faster than one case-insensitive regex of them.
_PRECHECK = tuple(sorted(t for t in _ALL_TRIGGERS if not any(o != t and o in t for o in _ALL_TRIGGERS)))
_GATES = tuple(_ALL_TRIGGERS | {n for rule in RULES for n in rule.needs})
_CLOSERS = {"{": "}", "'": "'", '"': '"'}


def _lower(text: str) -> str:
    """``text.lower()``, keeping every index: the rare characters whose lower case is longer stay."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _masked(value: str) -> str:
    closer = _CLOSERS.get(value[:1])
    if closer and len(value) >= 2 and value.endswith(closer):
        return f"{value[0]}{MASK}{closer}"  # keep the quoting: PWD={***}, PASSWORD = '***'
    return MASK


def redact(text: str) -> str:
    """Return ``text`` with every secret value replaced by ``***`` (keys kept)."""
    if not text:
        return text
    low = _lower(text)
    if not any(map(low.__contains__, _PRECHECK)):
        return text
    present = set(filter(low.__contains__, _GATES))
    for rule in RULES:
        if present.isdisjoint(rule.triggers) or not present.issuperset(rule.needs):
            continue
        pieces: list[str] = []
        last = 0
        for m in rule.regex.finditer(text if rule.on_original else low):
            if rule.accept is not None and not rule.accept(text, m):
                continue
            start, end = m.span("v")
            if end > start:
                pieces += (text[last:start], _masked(text[start:end]))
                last = end
        if pieces:
            text = "".join(pieces) + text[last:]
            low = _lower(text)
    return text


# Spark's own spark.redaction.regex default is "(?i)secret|password|token|access[.]key"; the same
# idea, widened, decides which dict keys hold a secret value as a whole (spark_properties facet,
# environment facets): {"spark.hadoop.fs.s3a.secret.key": "abc"} has no secret *form* in "abc".
_SECRET_KEY = re.compile(
    r"(?i)secret|passw(?:or)?d|pwd|passphrase|token|credential|authorization|sig(?:nature)?$"
    r"|(?:access|account|api|private|master|sas)[._\-]?key"
)


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """Whether a mapping key (a property or field name) marks its whole string value as secret."""
    return _SECRET_KEY.search(key) is not None


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON-like structure with every string value redacted (dict keys are left as is).

    A non-empty string under a secret-looking key (:func:`is_secret_key`) becomes ``***`` whole.
    Tuples come back as lists (JSON has no tuples); other scalars are returned unchanged.
    """
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {
            k: MASK if isinstance(v, str) and v and isinstance(k, str) and is_secret_key(k) else redact_obj(v)
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    return obj


class RedactingFilter(logging.Filter):
    """Logging filter that redacts the formatted message, exception text and stack of each record.

    Attach it to *handlers* (``handler.addFilter(RedactingFilter())``): logger-level filters do not
    see records propagated from child loggers. The message is formatted here once (``msg % args``)
    and ``args`` cleared, so secrets passed as arguments are masked too.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # bad format args: still never let the raw text through unredacted
            message = f"{record.msg} {record.args!r}"
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            # formatters reuse exc_text when set: format it now so the traceback is redacted too
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
