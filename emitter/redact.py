"""Masks secrets (passwords, keys, tokens) in strings before they reach an event or a log line.

SQL text, JDBC/ODBC connection strings, URLs and Spark properties all pass through here. Each rule
keeps the key and replaces only the secret *value* with ``***`` (``password=***;``,
``IDENTIFIED BY '***'``, ``user:***@host``), so a reader still sees that something was there.

Rules are data (:data:`RULES`): a name, the trigger words that must occur for the rule to run, a
compiled regex whose group ``v`` (or groups, :attr:`Rule.groups`) is the secret, and a one-line comment.
Besides the forms of each syntax, two rules go by shape: credentials with a well-known prefix anywhere
(``ghp_``, ``github_pat_``, ``glpat-``, ``xoxb-``, ``sk-``, ``AIza``...) and random-looking values (20+
characters changing between letters and digits) right after a key-, token-, secret- or password-like name.
:func:`redact` runs over every string of every event, so it is built for speed: a string with no trigger
word costs one ``lower()``, one regex scan for the triggers' rarest characters (:data:`_PRECHECK_RE`) and
a few substring tests; the regexes are written lower-case and matched case-sensitively against the
lower-cased text (Python's ``re.IGNORECASE`` is several times slower), only the masking uses the original.
Table and column names are lineage data and are never touched: a rule needs a key *and* a value
(``password_history``, ``dbo.passwords``, ``secret_santa``, ``token_count``, ``customer_key`` stay intact;
the tests keep a table of such harmless strings).
"""
from __future__ import annotations

import base64
import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from emitter.log import RedactingFilter  # its home is emitter.log (cheap to import); named here too

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
    groups: tuple[str, ...] = ("v",)  # the groups holding secrets, in the order they occur in a match


def _word_start(text: str, m: re.Match[str]) -> bool:
    """The match starts a word: the regexes start with a literal, not ``\\b``, so ``re`` scans fast."""
    i = m.start()
    return i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")


def _basic_credentials(text: str, m: re.Match[str]) -> bool:
    """``Basic <v>`` starts a word and ``v`` (as written) is base64 of ``user:password``."""
    if not _word_start(text, m):
        return False
    value = text[m.start("v"):m.end("v")]
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except ValueError:  # binascii.Error is a ValueError
        return False
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        decoded = raw.decode("latin-1")  # what requests encodes user:password in
    return ":" in decoded and decoded.isprintable()


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


def _credential_word(text: str, m: re.Match[str]) -> bool:
    """The key starts a word and the word after it holds a digit or a symbol, as passwords must: plain words
    (`password expired`, `pwd reset`) are prose."""
    value = m.group("v")
    return _word_start(text, m) and any(c.isdigit() or c in "!@#$%^&*?~+" for c in value)


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
# Values: ODBC {braced; "}}" escapes "}"}, "double" or 'single' quoted (SQL doubles ''; T-SQL N'unicode'),
# or bare up to whitespace ; & or a quote, not starting with "(" (CREDENTIALS=(...) holds keys, not a value).
# A bare value deliberately runs over "," and ")": over-masking a host in an exotic URL form is better than
# leaking the tail of a password. An ODBC value may hold spaces (Password=a b;): a bare value followed by
# more words and then ";", with no "=" on the way and no word starting with "-", runs to the ";".
_QUOTED = r"""n?'(?:[^']|'')*'"""
_BARE = r"""[^\s;&"'<>(][^\s;&"'<>]*(?:(?:[ \t]+[^\s;&"'<>=\-][^\s;&"'<>=]*)+(?=[ \t]*;))?"""
_VALUE = rf"""(?P<v>\{{(?:[^}}]|\}}\}})*\}}|"(?:[^"\\]|\\.)*"|{_QUOTED}|{_BARE})"""
_SQL_LITERAL = rf"(?P<v>{_QUOTED})"

_KV_TRIGGERS = ("pass", "pwd", "secret", "key", "token", "sig", "credential")
# A T-SQL procedure argument: a literal, NULL/DEFAULT, a variable or a bare name.
_ARG = r"(?:n?'(?:[^']|'')*'|null|default|@\w+|[\w.\-]+)"
_ARGS = r"\s*,\s*"
# A value after "key:" (YAML, headers, logs): quoted, or bare to the end of the line, ";", "," or a closing
# bracket (a YAML value may hold spaces); never starting with ":" (Snowflake's v:token::string is a path).
_COLON_VALUE = r"""(?P<v2>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s"'{(\[:,;}\]][^\r\n;,}\]]*)"""
# Names whose value, when it looks random (:func:`_random_looking`), is a credential in any syntax.
# Each found at its rarest letter (re then scans for a few characters instead of trying six words everywhere):
# key, token, pass, pwd, auth, sig, secret, credential.
_SHAPE_STEMS = (r"k(?:(?=ey)|(?<=tok)(?=en))|p(?=ass)|w(?<=pw)(?=d)|h(?<=aut)|g(?<=si)|t(?<=secret)"
                r"|l(?<=credential)")
# Prefixes of well-known credentials (GitHub, GitLab, Slack, OpenAI-style, Stripe, Google, npm, PyPI, Hugging Face).
_TOKEN_PREFIXES = (r"gh[pousr]_|github_pat_|glpat-|xox[abeprs]-|sk-(?:proj-|ant-)?|[sr]k_(?:live|test)_|AIza|npm_"
                   r"|pypi-|hf_")


def _random_looking(text: str, m: re.Match[str]) -> bool:
    """The value looks generated, not named: 20+ characters, letters and digits, changing between lower case,
    upper case and digits at least every 5 characters (``order_id_2024_customer_ref`` does not; keys, hashes
    and tokens do)."""
    value = text[m.start("v"):m.end("v")]
    digits = sum(c.isdigit() for c in value)
    if digits < 2 or sum(c.isalpha() for c in value) < 4:
        return False
    kinds = [0 if c.isdigit() else 1 if c.islower() else 2 for c in value if c.isalnum()]
    changes = sum(a != b for a, b in zip(kinds, kinds[1:]))
    return changes >= max(4, len(value) // 5)

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
        "basic_credentials",
        ("basic",),
        (),
        re.compile(r"basic\s+(?P<v>[a-z0-9+/]{4,}=*)"),
        "RFC 7617 Basic credentials (base64 of user:password) outside a header, as a backend's answer may quote "
        "the request's Authorization value; only base64 of a user:password pair (\"basic statistics\" stays)",
        accept=_basic_credentials,
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
        "url_query_key",
        ("?code=", "&code=", "?key=", "&key="),
        (),
        re.compile(r"[?&](?:code|key)=(?P<v>[^&#\s\"'<>]+)"),
        "a key in a URL's query under a name too generic to mask elsewhere: Azure Functions' code=, Google APIs' "
        "key= (an endpoint such as api/v1/lineage?code=...)",
    ),
    Rule(
        "key_value",
        _KV_TRIGGERS,
        (),
        # one scan for both separators: the key names are what costs
        re.compile(rf"""(?P<k>{_KEY_NAMES})(?:\s*=\s*{_VALUE}|["']?[ \t]*:[ \t]*{_COLON_VALUE})"""),
        "key=value in connection strings, URL queries, --conf/-D options, SQL options (PASSWORD = 'x', T-SQL "
        "PASSWORD = N'x'); key: value in YAML, headers, log lines (api_key: X, a YAML value runs to the line's end)",
        accept=_key_boundary,
        groups=("v", "v2"),
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
        "cli_option",
        _KV_TRIGGERS,
        ("--",),
        re.compile(rf"--(?P<k>{_KEY_NAMES})[ \t]+{_VALUE}"),
        "long command-line options with the value after a space: --password pw, --api-key k",
    ),
    Rule(
        "password_word",
        ("pass", "pwd"),
        (),
        re.compile(r"""(?:password|passwd|passphrase|pwd)[ \t]+(?P<v>[^\s;,'"()<>=:]{6,})(?=[\s;,'"<>)]|\Z)"""),
        "a password written after the word with only a space between, as error messages and notes say it "
        "(`Login failed: ... password S3cretW23`); a word holding a digit or a symbol only (`password did not "
        "match`, `password varchar(100)` stay)",
        accept=_credential_word,
    ),
    Rule(
        "tsql_proc_password",
        ("addlinkedsrvlogin", "addlogin", "setapprole", "sp_password"),
        ("'",),
        re.compile(
            rf"(?:sp_addlinkedsrvlogin\s+{_ARG}{_ARGS}{_ARG}{_ARGS}{_ARG}{_ARGS}{_ARG}{_ARGS}(?P<v1>{_ARG})"
            rf"|sp_addlogin\s+{_ARG}{_ARGS}(?P<v2>{_ARG})"
            rf"|sp_setapprole\s+{_ARG}{_ARGS}(?P<v3>{_ARG})"
            rf"|sp_password\s+(?P<v4>{_ARG}){_ARGS}(?P<v5>{_ARG}))"
        ),
        "positional passwords of T-SQL procedures: sp_addlinkedsrvlogin's 5th (rmtpassword), sp_addlogin's and "
        "sp_setapprole's 2nd, sp_password's old and new (named ones are key_value's @rmtpassword = N'x')",
        groups=("v1", "v2", "v3", "v4", "v5"),
    ),
    Rule(
        "openrowset_password",
        ("openrowset",),
        (";",),
        re.compile(rf"openrowset\s*\(\s*{_QUOTED}{_ARGS}{_QUOTED}\s*;\s*{_QUOTED}\s*;\s*(?P<v>{_QUOTED})"),
        "OPENROWSET('provider', 'server'; 'user'; 'password', ...): the third of the ';' list",
    ),
    Rule(
        "command_password_flag",
        ("sqlcmd", "cmdshell"),
        ("-p",),
        re.compile(r"""(?i:sqlcmd|bcp|osql|isql)(?:\.exe)?\s[^\r\n'|&;]*?(?<=\s)-P[ \t]*(?P<v>"[^"]*"|[^\s'"]+)"""),
        "sqlcmd/bcp/osql -P password (also glued: bcp -Ppass), e.g. inside xp_cmdshell; -P only: -p is not it",
        on_original=True,
    ),
    Rule(
        "well_known_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "sk-", "k_live_", "k_test_", "aiza",
         "npm_", "pypi-", "hf_"),
        (),
        re.compile(rf"(?:{_TOKEN_PREFIXES})(?P<v>[A-Za-z0-9_\-]{{16,}})"),
        "credentials with a well-known prefix anywhere: ghp_..., github_pat_..., glpat-..., xoxb-..., sk-..., "
        "AIza..., npm_..., pypi-..., hf_... (the prefix is kept: it says what leaked)",
        on_original=True,
        accept=_word_start,
    ),
    Rule(
        "secret_shaped_value",
        # not a bare "key": star schemas are full of date_key, customer_key (the regex still sees "...key" names)
        ("pass", "pwd", "secret", "token", "credential", "auth", "apikey", "api_key"),
        (),
        re.compile(
            rf"""(?:{_SHAPE_STEMS})[\w.\-]*["']?[ \t]*(?:[:=]>?|\(|[ \t])[ \t]*"""
            r"""(?:(?:n?var)?char[ \t]*\([ \t]*(?:\d+|max)[ \t]*\)[ \t]*=[ \t]*)?(?:n?["'])?"""
            r"""(?P<v>[a-z0-9+/_\-.~]{20,}={0,2})"""
        ),
        "a random-looking value (20+ characters mixing letters and digits) right after a key-, token-, secret- or "
        "password-like name, in any syntax: apikey 8f3kd93..., @api_key NVARCHAR(64) = N'8f3k...', token(8f3k...)",
        accept=_random_looking,
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
_PRECHECK = tuple(sorted(t for t in _ALL_TRIGGERS if not any(o != t and o in t for o in _ALL_TRIGGERS)))

#: Characters of the lower-cased text, rarest first in SQL and logs ("h" is left out: WHERE, WITH and THEN made an
#: upper-case statement 20% slower; order chosen with benchmarks/redact_speed.py); a trigger is looked for at its
#: rarest character (:func:`_anchor`).
_RARITY = "@qjzxkvybgfp-w"


def _anchor(trigger: str) -> int | None:
    """The index of the trigger's rarest character, or None when all its characters are common (those
    triggers are tested with ``in``)."""
    ranked = [(_RARITY.index(c), i) for i, c in enumerate(trigger) if c in _RARITY]
    return min(ranked)[1] if ranked else None


def _around(trigger: str, i: int) -> str:
    """What must surround the trigger's character ``i`` for the trigger to be there: ``(?<=...c)(?=...)``."""
    around = f"(?<={re.escape(trigger[:i + 1])})" if i else ""
    if i + 1 < len(trigger):
        around += f"(?={re.escape(trigger[i + 1:])})"
    return around or "(?:)"


def _precheck_regex(anchors: Mapping[str, int | None]) -> re.Pattern[str]:
    """``k(?:(?<=ak)(?=ia)|(?=ey)|...)|h(?:...)|...``: one branch per anchor character, its triggers inside."""
    by_char: dict[str, list[str]] = {}
    for trigger, i in sorted(anchors.items()):
        if i is not None:
            by_char.setdefault(trigger[i], []).append(_around(trigger, i))
    return re.compile("|".join(f"{re.escape(c)}(?:{'|'.join(arounds)})" for c, arounds in sorted(by_char.items())))


# Why one regex: a substring test costs a pass over the text per trigger (~35 triggers: ~35 passes). Every
# branch of this alternation starts with a literal rare character, so re scans the text once for a character of
# that small set (a C loop) and tries the branches only where one occurs: a few places in ordinary SQL. The
# triggers without a rare character (secret, credential, asia) stay substring tests.
_ANCHORS = {t: _anchor(t) for t in _PRECHECK}
# (no capturing groups: with them re no longer scans for the first characters and is a hundred times slower)
_PRECHECK_RE = _precheck_regex(_ANCHORS)
_PRECHECK_IN = tuple(t for t, i in _ANCHORS.items() if i is None)
_UNANCHORED_AND_NEEDS = tuple(set(_PRECHECK_IN) | {n for rule in RULES for n in rule.needs})
#: (rare character, the pre-check triggers anchored at it)
_BY_CHAR = tuple((c, tuple(t for t, i in _ANCHORS.items() if i is not None and t[i] == c))
                 for c in sorted({t[i] for t, i in _ANCHORS.items() if i is not None}))
#: Per rule: its triggers that are pre-check triggers, and the longer ones with the pre-check triggers they hold
#: (present only when one of those is, and they are in the text: "accountkey" needs "key").
_RULE_GATES = tuple(
    (rule, frozenset(t for t in rule.triggers if t in _ANCHORS),
     frozenset(p for p in _PRECHECK for t in rule.triggers if t not in _ANCHORS and p in t),
     tuple(t for t in rule.triggers if t not in _ANCHORS))
    for rule in RULES)
_CLOSERS = {"{": "}", "'": "'", '"': '"'}


def _lower(text: str) -> str:
    """``text.lower()``, keeping every index: the rare characters whose lower case is longer stay."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _masked(value: str) -> str:
    prefix = ""
    if value[:2] in ("N'", "n'"):  # T-SQL Unicode literal: N'***'
        prefix, value = value[0], value[1:]
    closer = _CLOSERS.get(value[:1])
    if closer and len(value) >= 2 and value.endswith(closer):
        return f"{prefix}{value[0]}{MASK}{closer}"  # keep the quoting: PWD={***}, PASSWORD = '***'
    return MASK


def redact(text: str) -> str:
    """Return ``text`` with every secret value replaced by ``***`` (keys kept)."""
    if not text:
        return text
    low = _lower(text)
    if _PRECHECK_RE.search(low) is None and not any(map(low.__contains__, _PRECHECK_IN)):
        return text
    # which triggers and needs are there: substring tests only for the triggers whose rare character the text
    # holds (a one-character test is a memchr), then set operations per rule
    present = set(filter(low.__contains__, _UNANCHORED_AND_NEEDS))
    for char, triggers in _BY_CHAR:
        if char in low:
            present.update(filter(low.__contains__, triggers))
    for rule, direct, longer_reps, longer in _RULE_GATES:
        if present.isdisjoint(direct) and (present.isdisjoint(longer_reps) or not any(map(low.__contains__, longer))):
            continue
        if not present.issuperset(rule.needs):
            continue
        pieces: list[str] = []
        last = 0
        for m in rule.regex.finditer(text if rule.on_original else low):
            if rule.accept is not None and not rule.accept(text, m):
                continue
            for group in rule.groups:
                start, end = m.span(group)
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


def url_without_credentials(url: str) -> str:
    """A transport URL as it may be shown or recorded: a user part without a password masked whole
    (``http://<token>@host`` -> ``http://***@host``: a token given as the user name, which :func:`redact` leaves, a
    user name alone being no secret in a dataset's URL), then :func:`redact` (``user:***@``, keys in the query)."""
    scheme, sep, rest = url.partition("://")
    if sep:
        authority, slash, path = rest.partition("/")
        if "@" in authority and ":" not in authority[: authority.rindex("@")]:
            rest = MASK + authority[authority.rindex("@"):] + slash + path
    return redact(scheme + sep + rest if sep else url)
