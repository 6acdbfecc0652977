"""Token rewrites for statement forms sqlglot 30's parser lacks, shared by dialects (`DialectRules.form_fixes`).

Each :class:`FormFix` names one form, cheap tests on the text (most texts hold none of these forms: their tokens
are not walked) and a rewrite of a batch's tokens into a form sqlglot reads with the same lineage: MySQL's `REPLACE
INTO` as an INSERT, Spark's `REPLACE TABLE` as `CREATE OR REPLACE TABLE`, the clauses after a `CLONE` source
dropped, ... Without them sqlglot kept the statement as an opaque command or rejected it: its tables were lost.
Tokens keep their places in the text (a word put in takes the place of the word it stands for), so text cut by
token positions stays right.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import attrs
from sqlglot.tokens import Token, TokenType

from harvesters.sql.retokenize import command_string, string_tokens, tokenizer
from harvesters.sql.tsql import skip_group

#: Rewrites a batch's tokens, given with the batch's text.
Rewrite = Callable[[list[Token], str], list[Token]]


@attrs.frozen
class FormFix:
    """One statement form rewritten before parsing (see the module's docstring)."""

    name: str
    # The rewrite runs only on a text whose upper-cased form holds one of `words` (a substring test: a regular
    # expression scanning every text, case-insensitively, cost up to 0.1 ms per 4 KB) and in which `when` finds
    # something (a false hit costs one walk over the tokens).
    words: tuple[str, ...]
    when: re.Pattern[str]
    rewrite: Rewrite

    def applies(self, text: str, upper: str) -> bool:
        """Whether the rewrite may change the tokens of ``text`` (``upper``: the text upper-cased)."""
        return any(word in upper for word in self.words) and self.when.search(text) is not None


# ---- REPLACE [INTO] (MySQL, MariaDB, SQLite, SingleStore) ------------------------------------------------------------

#: MySQL's INSERT / REPLACE modifiers, which sqlglot's INSERT rejects (they change when rows are written, not which).
_PRIORITIES = frozenset({"LOW_PRIORITY", "HIGH_PRIORITY", "DELAYED"})


def replace_into(dialect: str) -> Rewrite:
    """`REPLACE [LOW_PRIORITY | DELAYED] [INTO] t [(cols)] {SELECT ... | VALUES ... | SET ...}` read as the INSERT it
    is (it first deletes the rows whose keys the new ones repeat: the same target and sources). The tokenizer of
    sqlglot's ``dialect`` takes a statement's first REPLACE for a command and the rest for a string: that string is
    tokenized again in its place. A REPLACE after a statement's CTEs (SQLite `WITH c AS (...) REPLACE INTO t ...`) is
    one too. MySQL's priority words are dropped after an INSERT as well."""

    def rewrite(tokens: list[Token], text: str) -> list[Token]:
        out: list[Token] = []
        pending = tokens[::-1]  # a stack: a swallowed statement tokenized again goes back on it
        opener, depth, at_start = TokenType.SEMICOLON, 0, True
        while pending:
            token = pending.pop()
            if at_start:
                opener, depth = token.token_type, 0
            # (after the statement's first token, `out` holds it)
            opens = at_start or (opener == TokenType.WITH and depth == 0 and out[-1].token_type == TokenType.R_PAREN)
            if opens and token.token_type == TokenType.REPLACE and _reopened(pending, token, text, dialect):
                token = _retyped(token, TokenType.INSERT)
            at_start = token.token_type == TokenType.SEMICOLON
            depth += (token.token_type == TokenType.L_PAREN) - (token.token_type == TokenType.R_PAREN)
            out.append(token)
            if token.token_type == TokenType.INSERT:
                while pending and pending[-1].text.upper() in _PRIORITIES:
                    pending.pop()
        return out

    return rewrite


def _reopened(pending: list[Token], replace: Token, text: str, dialect: str) -> bool:
    """Whether the REPLACE opens a statement (not a `REPLACE(...)` call), with the string its command swallowed, if
    any, put back on ``pending`` as its tokens."""
    if not pending or pending[-1].token_type == TokenType.L_PAREN:
        return False
    if pending[-1].token_type != TokenType.STRING:
        return True
    inner = string_tokens(command_string(pending[-1], replace, text), tokenizer(dialect))
    if not inner or inner[0].token_type == TokenType.L_PAREN:
        return False
    pending.pop()
    pending.extend(reversed(inner))
    return True


def replace_into_fix(dialect: str) -> FormFix:
    """The :class:`FormFix` of :func:`replace_into` for ``dialect`` (a REPLACE not before a parenthesis: the
    REPLACE() function is left alone; or a priority word)."""
    return FormFix("replace_into", ("REPLACE", "PRIORITY", "DELAYED"), _REPLACE_WORDS, replace_into(dialect))


_REPLACE_WORDS = re.compile(r"REPLACE\s+[^\s(]|_PRIORITY\b|DELAYED\b", re.IGNORECASE)


# ---- INSERT OVERWRITE DIRECTORY ... USING <format> (Spark, Databricks) -----------------------------------------------


def _directory_format(tokens: list[Token], text: str) -> list[Token]:
    """`INSERT OVERWRITE [LOCAL] DIRECTORY ['path'] USING <format> [OPTIONS (...)] <query>`: the `USING ... OPTIONS
    (...)` clause dropped, which sqlglot reads only in Hive's form (`ROW FORMAT ...`, `STORED AS ...`). A path given
    only in the options (`OPTIONS ('path' '/x')`) is put in as an empty string. Files are written, no table: the
    query's tables are read."""
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        out.append(token)
        i += 1
        if token.text.upper() != "DIRECTORY" or i < 2 or _word(tokens, i - 2) not in ("OVERWRITE", "LOCAL"):
            continue
        path = i < len(tokens) and tokens[i].token_type == TokenType.STRING
        using = i + 1 if path else i
        if using >= len(tokens) or tokens[using].token_type != TokenType.USING:
            continue
        end = _name_end(tokens, using + 1)  # (a format may be a class name: org.apache.spark.sql.json)
        if _word(tokens, end) == "OPTIONS":
            end = skip_group(tokens, end + 1)
        out.append(tokens[i] if path else _put(TokenType.STRING, "", tokens[using]))
        i = end
    return out


DIRECTORY_FORMAT = FormFix("directory_format", ("DIRECTORY",), re.compile(r"DIRECTORY\b", re.IGNORECASE),
                           _directory_format)


# ---- INSERT ... PARTITION (...) IF NOT EXISTS (Hive, Spark) ----------------------------------------------------------


def _partition_if_not_exists(tokens: list[Token], text: str) -> list[Token]:
    """`INSERT OVERWRITE TABLE t PARTITION (d='1') IF NOT EXISTS <query>` (the partition is written only if it is
    missing): sqlglot's INSERT reads `IF EXISTS` there, not `IF NOT EXISTS`, so NOT is dropped; the engine reads the
    INSERT's `exists` as this condition (the table's rows may stay: a later read of it is still an input)."""
    drop: set[int] = set()
    inserting = False
    for i, token in enumerate(tokens):
        if token.token_type == TokenType.SEMICOLON:
            inserting = False
        elif token.token_type == TokenType.INSERT:
            inserting = True
        elif inserting and token.token_type == TokenType.PARTITION and _word(tokens, i + 1) == "(":
            after = skip_group(tokens, i + 1)
            if [_word(tokens, j) for j in range(after, after + 3)] == ["IF", "NOT", "EXISTS"]:
                drop.add(after + 1)
    return [t for i, t in enumerate(tokens) if i not in drop] if drop else tokens


PARTITION_IF_NOT_EXISTS = FormFix("partition_if_not_exists", ("EXISTS",),
                                  re.compile(r"\)\s*IF\s+NOT\s+EXISTS\b", re.IGNORECASE), _partition_if_not_exists)


# ---- REPLACE TABLE (Spark, Databricks / Delta Lake) ------------------------------------------------------------------


def _replace_table(tokens: list[Token], text: str) -> list[Token]:
    """`REPLACE TABLE t ... [AS SELECT ...]` read as `CREATE OR REPLACE TABLE t ...` (it fails where t does not exist,
    which changes nothing for lineage): t is written anew, the query read."""
    out = list(tokens)
    for i in sorted(_starts(tokens), reverse=True):  # (from the end: indices before stay valid)
        if tokens[i].token_type == TokenType.REPLACE and _word(tokens, i + 1) == "TABLE":
            at = tokens[i]
            out[i:i] = [_put(TokenType.CREATE, "CREATE", at), _put(TokenType.OR, "OR", at)]
    return out


REPLACE_TABLE = FormFix("replace_table", ("REPLACE",), re.compile(r"REPLACE\s+TABLE\b", re.IGNORECASE), _replace_table)


# ---- CREATE TABLE t [DEEP | SHALLOW] CLONE s <clauses> (BigQuery, Spark, Databricks) ---------------------------------


def _clone_source_only(tokens: list[Token], text: str) -> list[Token]:
    """`CREATE [OR REPLACE] [SNAPSHOT] TABLE t [DEEP | SHALLOW] CLONE s <clauses>`: DEEP (the default) is dropped and
    so is everything after the source's name up to the statement's end, which sqlglot's parser does not read: a time
    travel (BigQuery `FOR SYSTEM_TIME AS OF <constant>`, Delta `VERSION AS OF n` / `TIMESTAMP AS OF '...'`), `OPTIONS
    (...)`, `LOCATION '...'`, `TBLPROPERTIES (...)`. None of them reads a table (BigQuery's time is a constant
    expression, no subquery); t is written, s read."""
    drop: set[int] = set()
    starts = set(_starts(tokens))
    creating = False
    for i, token in enumerate(tokens):
        kind = token.token_type
        if kind == TokenType.SEMICOLON:
            creating = False
        elif i in starts and kind in (TokenType.CREATE, TokenType.REPLACE):
            creating = True  # (REPLACE: Spark's REPLACE TABLE, whichever of the rewrites runs first)
        elif creating and token.text.upper() == "CLONE" and i + 1 < len(tokens):
            if _word(tokens, i - 1) == "DEEP":
                drop.add(i - 1)
            end = _name_end(tokens, i + 1)
            while end < len(tokens) and tokens[end].token_type != TokenType.SEMICOLON:
                drop.add(end)
                end += 1
            creating = False
    return [t for i, t in enumerate(tokens) if i not in drop] if drop else tokens


CLONE_CLAUSES = FormFix("clone_clauses", ("CLONE",), re.compile(r"CLONE\b", re.IGNORECASE), _clone_source_only)


# ---- CREATE MATERIALIZED VIEW ... POPULATE AS <query> (ClickHouse) ---------------------------------------------------


def _populate(tokens: list[Token], text: str) -> list[Token]:
    """`CREATE MATERIALIZED VIEW v [TO t] [ENGINE = ...] POPULATE AS <query>`: POPULATE (fill the view with the rows
    the query gives now, not only with later inserts) is dropped; sqlglot's parser rejects it and kept the statement
    as an opaque command."""
    drop = {i for i, token in enumerate(tokens) if token.token_type != TokenType.STRING
            and token.text.upper() == "POPULATE" and _word(tokens, i + 1) == "AS"}
    return [t for i, t in enumerate(tokens) if i not in drop] if drop else tokens


POPULATE = FormFix("populate", ("POPULATE",), re.compile(r"POPULATE\s+AS\b", re.IGNORECASE), _populate)


# ---- Snowflake: CREATE DYNAMIC / EXTERNAL TABLE clauses, ASYNC, anonymous procedures ---------------------------------


def _snowflake_table_clauses(tokens: list[Token], text: str) -> list[Token]:
    """Clauses of a Snowflake CREATE [DYNAMIC | EXTERNAL] TABLE head sqlglot 30 rejects (it kept the statement as an
    opaque command or failed: the table was lost), read with the same lineage:

    - ``IMMUTABLE WHERE (<condition>)`` (rows the dynamic table keeps as they are): dropped;
    - ``BACKFILL FROM t`` (the dynamic table starts from a copy of t's rows): dropped, and t read by a ``SELECT *
      FROM t`` put after the statement;
    - ``WITH LOCATION = @stage/path/`` of an external table: the optional WITH dropped;
    - an external table's column ``c T AS <expression>`` without parentheses: the expression parenthesised.
    """
    out: list[Token] = []
    backfills: list[list[Token]] = []
    starts = set(_starts(tokens))
    creating, external, in_query, depth, i = False, False, False, 0, 0
    while i < len(tokens):
        token = tokens[i]
        kind, word = token.token_type, token.text.upper()
        if kind == TokenType.SEMICOLON:
            out.extend(_backfill_reads(backfills, token))
            creating, external, in_query, depth = False, False, False, 0
        elif i in starts:
            creating = kind == TokenType.CREATE
            # (the word EXTERNAL itself is gone by now: see DialectRules.ignored_create_words)
            external = creating and _EXTERNAL_HEAD.match(text, token.start) is not None
        elif creating and not in_query:
            if kind == TokenType.L_PAREN:
                depth += 1
            elif kind == TokenType.R_PAREN:
                depth -= 1
            elif depth == 0 and kind == TokenType.ALIAS:
                in_query = True  # the dynamic table's query: left as it is
            elif depth == 0 and word == "IMMUTABLE" and _word(tokens, i + 1) == "WHERE":
                i = skip_group(tokens, i + 2)
                continue
            elif depth == 0 and word == "BACKFILL" and _word(tokens, i + 1) == "FROM":
                end = _name_end(tokens, i + 2)
                backfills.append(tokens[i + 2 : end])
                i = end
                continue
            elif depth == 0 and kind == TokenType.WITH and _word(tokens, i + 1) == "LOCATION":
                i += 1
                continue
            elif external and depth == 1 and kind == TokenType.ALIAS and _word(tokens, i + 1) != "(":
                end = _expression_end(tokens, i + 1)
                out.extend([token, _put(TokenType.L_PAREN, "(", token), *tokens[i + 1 : end],
                            _put(TokenType.R_PAREN, ")", tokens[end - 1])])
                i = end
                continue
        out.append(token)
        i += 1
    out.extend(_backfill_reads(backfills, tokens[-1]))
    return out


def _backfill_reads(backfills: list[list[Token]], at: Token) -> list[Token]:
    """``; SELECT * FROM t`` for each BACKFILL FROM source noted (then forgotten)."""
    reads: list[Token] = []
    for name in backfills:
        reads += [_put(TokenType.SEMICOLON, ";", at), _put(TokenType.SELECT, "SELECT", name[0]),
                  _put(TokenType.STAR, "*", name[0]), _put(TokenType.FROM, "FROM", name[0]), *name]
    backfills.clear()
    return reads


def _expression_end(tokens: list[Token], i: int) -> int:
    """Index of the `,` or `)` ending, at its own depth, the expression starting at ``i``."""
    depth = 0
    while i < len(tokens):
        kind = tokens[i].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            if depth == 0:
                return i
            depth -= 1
        elif kind in (TokenType.COMMA, TokenType.SEMICOLON) and depth == 0:
            return i
        i += 1
    return i


_EXTERNAL_HEAD = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?EXTERNAL\b", re.IGNORECASE)
SNOWFLAKE_TABLE_CLAUSES = FormFix(
    "snowflake_table_clauses", ("IMMUTABLE", "BACKFILL", "EXTERNAL"),
    re.compile(r"\b(?:IMMUTABLE\s+WHERE|BACKFILL\s+FROM|WITH\s+LOCATION|AS\s+(?!\())", re.IGNORECASE),
    _snowflake_table_clauses)


def _async_statements(tokens: list[Token], text: str) -> list[Token]:
    """Snowflake Scripting's ``ASYNC (<statement>)`` (run as a child job, awaited later): the statement itself, as it
    runs; ``LET r RESULTSET := ASYNC (<query>)``: the query. sqlglot rejected the word, and the block's statements
    after it were lost."""
    out: list[Token] = []
    closing: set[int] = set()
    starts = set(_starts(tokens))
    for i, token in enumerate(tokens):
        if i in closing:
            continue
        if token.text.upper() == "ASYNC" and token.token_type != TokenType.STRING and _word(tokens, i + 1) == "(":
            if i in starts or tokens[i - 1].token_type in (TokenType.BEGIN, TokenType.SEMICOLON):
                closing.update({i + 1, skip_group(tokens, i + 1) - 1})  # a statement: its parentheses go too
                continue
            if tokens[i - 1].token_type == TokenType.COLON_EQ:  # `r := ASYNC (<query>)`: the query stays
                continue
        out.append(token)  # (elsewhere ASYNC is a name: a table `async (id)` stays one)
    return out


ASYNC_STATEMENTS = FormFix("async_statements", ("ASYNC",), re.compile(r"\bASYNC\s*\(", re.IGNORECASE),
                           _async_statements)


def _anonymous_procedures(tokens: list[Token], text: str) -> list[Token]:
    """``WITH p AS PROCEDURE (...) RETURNS ... AS $$<body>$$ [, q AS PROCEDURE ...] CALL p(...)`` (Snowflake's CALL
    with an anonymous procedure, as dbt runs every Python model): the definitions are dropped, the CALL stays (a
    procedure's body has no lineage of its own; the statements it runs are logged as they run)."""
    if not tokens or tokens[0].token_type != TokenType.WITH or _word(tokens, 3) != "PROCEDURE":
        return tokens
    for i, token in enumerate(tokens):
        if token.text.upper() == "CALL" and token.token_type in (TokenType.COMMAND, TokenType.VAR):
            return tokens[i:]
        if token.token_type == TokenType.SEMICOLON:
            break
    return tokens


ANONYMOUS_PROCEDURES = FormFix("anonymous_procedures", ("PROCEDURE",),
                               re.compile(r"^\s*WITH\s+\S+\s+AS\s+PROCEDURE\b", re.IGNORECASE),
                               _anonymous_procedures)


# ---- helpers ---------------------------------------------------------------------------------------------------------


def _retyped(token: Token, kind: TokenType) -> Token:
    """``token`` read as another kind (its text and place kept)."""
    return Token(kind, token.text, token.line, token.col, token.start, token.end, token.comments)


def _word(tokens: list[Token], index: int) -> str:
    return tokens[index].text.upper() if index < len(tokens) else ""


def _put(kind: TokenType, text: str, at: Token) -> Token:
    """A word put in the place of ``at``."""
    return Token(kind, text, at.line, at.col, at.start, at.end)


def _starts(tokens: list[Token]) -> Iterator[int]:
    """Indices of the tokens that open a statement: the first one and each after a `;`."""
    opens = True
    for index, token in enumerate(tokens):
        if opens and token.token_type != TokenType.SEMICOLON:
            yield index
        opens = token.token_type == TokenType.SEMICOLON


def _name_end(tokens: list[Token], i: int) -> int:
    """Index just after the name starting at ``i``: parts joined by dots, or by dashes (a BigQuery project,
    ``my-project.ds.t``)."""
    i += 1
    while i + 1 < len(tokens) and tokens[i].token_type in (TokenType.DOT, TokenType.DASH) \
            and tokens[i + 1].token_type not in (TokenType.SEMICOLON, TokenType.L_PAREN):
        i += 2
    return i
