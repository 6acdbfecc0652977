"""T-SQL token rewrites applied before sqlglot parses a batch: a table of named rules (:data:`RULES`).

sqlglot 30's T-SQL grammar rejects some common forms. Subclassing the parser is not an option (the compiled
``sqlglot[c]`` build forbids Python subclasses of its classes), so each form is rewritten in the token list
instead, by one named rule: where it is tried (the token kinds it starts at), what the batch must contain for it
to be worth a look, and the rewrite. :func:`fix_tokens` walks a batch's tokens once and, at each token, tries the
rules that start at its kind, in table order; the first that rewrites wins.

Rules (see each function's docstring): ``exec_national_literal``, ``bulk_insert``, ``insert_table_hints``,
``control_flow``, ``label``, ``statement_word``, ``implicit_exec``, ``bulk_rowset``, ``query_hints``,
``with_options``, ``dml_top``, ``delete_double_from``, ``output_clause``, ``compound_assignment``,
``synapse_table_options``, ``graph_match``, ``graph_path_order``, ``graph_for_path``,
``legacy_system_function``.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from sqlglot.tokens import Token, TokenType

# Keywords that open the statements whose OUTPUT clause we cut (depth 0, latest one wins).
_DML = {TokenType.INSERT, TokenType.UPDATE, TokenType.DELETE, TokenType.MERGE}
# (SET is not one: it also continues UPDATE t SET ...)
_STATEMENT_START = _DML | {
    TokenType.SELECT, TokenType.WITH, TokenType.CREATE, TokenType.DROP, TokenType.ALTER,
    TokenType.TRUNCATE, TokenType.EXECUTE, TokenType.DECLARE, TokenType.USE, TokenType.BEGIN,
    TokenType.COMMIT, TokenType.ROLLBACK, TokenType.COMMAND,
}
# Tokens that end an OUTPUT clause's column list when met at depth 0.
_OUTPUT_END = _STATEMENT_START | {
    TokenType.FROM, TokenType.WHERE, TokenType.VALUES, TokenType.DEFAULT, TokenType.SEMICOLON,
    TokenType.OPTION, TokenType.INTO, TokenType.SET,
}
_NAME_PREFIX = {TokenType.HASH, TokenType.PARAMETER}
# What ends an IF / WHILE condition at depth 0: the statement it guards (tokens, and words tokenized as VAR).
_CONDITION_ENDS = _STATEMENT_START | {TokenType.SET, TokenType.MERGE, TokenType.FETCH}
_CONDITION_END_WORDS = frozenset({
    "IF", "WHILE", "RETURN", "BREAK", "CONTINUE", "GOTO", "THROW", "RAISERROR", "WAITFOR", "SAVE", "OPEN", "CLOSE",
    "DEALLOCATE",
})
# RAISERROR's options, the words of a cursor FETCH (see _statement_word), and tokens after which a word first on
# its line still belongs to the statement (`SELECT a,` newline `throw`).
_RAISERROR_OPTIONS = frozenset({"NOWAIT", "LOG", "SETERROR"})
_FETCH_WORDS = frozenset({"NEXT", "PRIOR", "FIRST", "LAST", "ABSOLUTE", "RELATIVE", "FROM"})
_CONTINUES = frozenset({
    TokenType.COMMA, TokenType.DOT, TokenType.L_PAREN, TokenType.EQ, TokenType.PLUS, TokenType.DASH, TokenType.STAR,
    TokenType.SLASH, TokenType.SELECT, TokenType.FROM, TokenType.JOIN, TokenType.AND, TokenType.OR, TokenType.WHERE,
    TokenType.ALIAS, TokenType.SET, TokenType.INTO, TokenType.TABLE, TokenType.ON, TokenType.CASE, TokenType.WHEN,
    TokenType.THEN, TokenType.ELSE, TokenType.NOT, TokenType.IN, TokenType.LIKE, TokenType.IS, TokenType.DISTINCT,
    TokenType.ORDER_BY, TokenType.GROUP_BY, TokenType.PARTITION_BY, TokenType.UPDATE, TokenType.INSERT,
    TokenType.DELETE, TokenType.USING, TokenType.VALUES, TokenType.LT, TokenType.GT, TokenType.LTE, TokenType.GTE,
    TokenType.NEQ,
})
# What may follow a procedure name run without EXEC: its first argument, or nothing (see _implicit_exec).
_ARGUMENT_STARTS = frozenset({
    TokenType.PARAMETER, TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.NUMBER, TokenType.SEMICOLON,
    TokenType.DASH,
})
# Statement words tokenized as names, which a batch may open with (never a procedure run without EXEC): those
# that end a condition, and the rest.
_NOT_PROCEDURES = _CONDITION_END_WORDS | {
    "SETUSER", "REVERT", "CHECKPOINT", "RECONFIGURE", "SHUTDOWN", "BACKUP", "RESTORE", "DBCC", "DENY", "ENABLE",
    "DISABLE", "READTEXT", "WRITETEXT", "UPDATETEXT", "ELSE", "PRINT", "SEND", "RECEIVE", "GET", "MOVE", "BULK",
}
# Words after BEGIN that make it a statement, not a block.
_NOT_A_BLOCK = frozenset({"TRAN", "TRANSACTION", "DISTRIBUTED", "DIALOG", "CONVERSATION", "ATOMIC"})
# Object kinds before an IF that is not a statement (`DROP TABLE IF EXISTS t`, `DROP COLUMN IF EXISTS c`); also
# read by the engine (where an opaque command ends).
KINDS_BEFORE_IF = frozenset({
    "TABLE", "VIEW", "INDEX", "PROC", "PROCEDURE", "FUNCTION", "TRIGGER", "SCHEMA", "SYNONYM", "TYPE", "SEQUENCE",
    "STATISTICS", "DATABASE", "COLUMN", "CONSTRAINT", "USER", "ROLE", "DEFAULT", "RULE", "ASSEMBLY", "AGGREGATE",
    "LOGIN", "POLICY", "SOURCE", "FORMAT",
})
# Operators of T-SQL compound assignment (`SET col += 1`), which sqlglot reads as a binary operator
# missing its right side; dropping the operator keeps `SET col = 1`, the same lineage.
_COMPOUND = frozenset({
    TokenType.PLUS, TokenType.DASH, TokenType.STAR, TokenType.SLASH, TokenType.MOD, TokenType.AMP,
    TokenType.PIPE, TokenType.CARET,
})
# Azure Synapse / SQL DW / Fabric table options of `CREATE TABLE t [(cols)] WITH (...) [AS SELECT ...]`: where
# and how rows are stored, never where they come from. sqlglot reads `DISTRIBUTION = HASH(k)` but not
# `CLUSTERED COLUMNSTORE INDEX`, `CLUSTERED INDEX (a)` or `PARTITION (d RANGE RIGHT FOR VALUES (...))`.
_SYNAPSE_OPTIONS = frozenset({
    "DISTRIBUTION", "CLUSTERED", "HEAP", "PARTITION", "LOCATION", "DATA_SOURCE", "FILE_FORMAT", "REJECT_TYPE",
    "REJECT_VALUE", "REJECT_SAMPLE_VALUE", "REJECTED_ROW_LOCATION", "CLUSTERED_COLUMNSTORE_INDEX",
})


class _Pass:
    """One walk over a batch's tokens: the rules read `tokens`/`kinds` and append to `out`."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.kinds = [token.token_type for token in tokens]
        self.n = len(tokens)
        self.out: list[Token] = []
        self.into_spans: list[tuple[int, int]] = []
        self.depth = 0  # parenthesis depth of the token being looked at
        self.statement: TokenType | None = None  # keyword of the depth-0 statement being read
        self.cases = 0  # CASE expressions open (their END is not a block's)
        self.condition_end = -1  # index of the token after the IF / WHILE condition being read (see _condition)

    def kind(self, i: int) -> TokenType | None:
        return self.kinds[i] if i < self.n else None


#: A rule's rewrite at index ``i``: the index to continue from after appending its tokens to ``p.out``, or None
#: when the rule does not apply there (the token is then kept and the next rule tried).
Rewrite = Callable[[_Pass, int], "int | None"]


@attrs.frozen
class TokenRule:
    """One named T-SQL rewrite (see :data:`RULES`)."""

    name: str
    at: frozenset[TokenType]  # kinds of the token the rule is tried at
    needs: frozenset[TokenType]  # kinds the batch must hold for the rule to be worth trying (one of them)
    rewrite: Rewrite


def _exec_national_literal(p: _Pass, i: int) -> int | None:
    """``EXEC (N'...')``: sqlglot reads ``EXEC ('...')`` as dynamic SQL but rejects the N'' literal."""
    if p.kind(i + 1) != TokenType.L_PAREN or i + 2 >= p.n:
        return None
    p.out.append(p.tokens[i])
    p.out.append(p.tokens[i + 1])
    p.depth += 1
    if p.kinds[i + 2] == TokenType.NATIONAL_STRING:
        t = p.tokens[i + 2]
        p.out.append(_retyped(t, TokenType.STRING))
        return i + 3
    return i + 2


def _bulk_insert(p: _Pass, i: int) -> int | None:
    """``BULK INSERT t FROM 'file' [WITH (...)]``: keep ``INSERT t``, a write to t with no table read."""
    if p.depth or p.tokens[i].text.upper() != "BULK" or p.kind(i + 1) != TokenType.INSERT:
        return None
    end = skip_name(p.tokens, i + 2)
    p.out.extend(p.tokens[i + 1 : end])
    i = end
    if p.kind(i) == TokenType.FROM and p.kind(i + 1) == TokenType.STRING:
        i += 2
        if p.kind(i) == TokenType.WITH:
            i = skip_group(p.tokens, i + 1)
    return i


def _dml_top(p: _Pass, i: int) -> int | None:
    """``DELETE|UPDATE|INSERT TOP (n) [PERCENT]``: a row limit, irrelevant to lineage, is dropped (and a DELETE's
    double FROM fixed as by ``delete_double_from``)."""
    if p.depth or p.kind(i + 1) != TokenType.TOP:
        return None
    is_delete = p.kinds[i] == TokenType.DELETE
    p.out.append(p.tokens[i])
    i = _skip_top(p, i + 1)
    return _fix_double_from(p, i) if is_delete else i


def _insert_table_hints(p: _Pass, i: int) -> int | None:
    """``INSERT [TOP (n) [PERCENT]] [INTO] t WITH (TABLOCK, ...)``: the target's table hints, which sqlglot reads as
    a CTE and rejects, are dropped (the TOP limit too, as by ``dml_top``)."""
    if p.depth:
        return None
    j = kept = _skip_top(p, i + 1)
    if p.kind(j) == TokenType.INTO:
        j += 1
    name_end = skip_name(p.tokens, j)
    if name_end == j or p.kind(name_end) != TokenType.WITH or p.kind(name_end + 1) != TokenType.L_PAREN:
        return None
    p.out.append(p.tokens[i])
    p.out.extend(p.tokens[kept:name_end])
    return skip_group(p.tokens, name_end + 1)


def _control_flow(p: _Pass, i: int) -> int | None:
    """``IF | WHILE <condition>``, ``ELSE``, ``BEGIN [TRY|CATCH]``, ``END [TRY|CATCH]``: the blocks are flattened
    into `;`-separated statements, and a condition is kept as ``IF (<condition>)`` with nothing in it.

    Lineage needs each statement, not the control flow, and sqlglot's T-SQL blocks lose statements: the word after
    an unparenthesised condition becomes its alias (``IF EXISTS (...) EXEC p @x = 1`` lost the EXEC), a block's
    first statement is not checked for leftover tokens (``... FROM a <newline> SET @i = 1`` read SET as a's alias
    and dropped the rest), ``END`` after a statement is taken for a column alias, and a bare BEGIN reads as an
    opaque command that swallows its block. Flattened, every statement is parsed, or fails, on its own. The
    condition ends at the first statement keyword outside parentheses (``IF UPDATE(col)`` is a trigger function)."""
    kind = p.kinds[i]
    if kind == TokenType.VAR:  # (most tokens: names)
        return None if p.depth else _condition(p, i)
    if kind == TokenType.END and p.cases:  # a CASE's END (and ELSE, below) are expressions
        p.cases -= 1
        return None
    if p.depth or (kind == TokenType.ELSE and p.cases):
        return None
    token, after = p.tokens[i], p.tokens[i + 1].text.upper() if i + 1 < p.n else ""
    if kind == TokenType.BEGIN and after in _NOT_A_BLOCK:  # BEGIN TRAN, BEGIN DIALOG ...: statements
        return None
    if kind == TokenType.END and after == "CONVERSATION":
        return None
    p.out.append(Token(TokenType.SEMICOLON, ";", token.line, token.col, token.start, token.end))
    return i + 2 if after in ("TRY", "CATCH") and kind != TokenType.ELSE else i + 1


def _condition(p: _Pass, i: int) -> int | None:
    """``IF | WHILE <condition>`` (see :func:`_control_flow`): ``; IF (<condition>) ;``."""
    if p.tokens[i].text.upper() not in ("IF", "WHILE") or (i and (
            p.tokens[i - 1].text.upper() in KINDS_BEFORE_IF or p.kinds[i - 1] == TokenType.PARAMETER)):
        return None
    depth, j = 0, i + 1
    while j < p.n:
        kind = p.kinds[j]
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and _opens_statement(p, j):
            break
        j += 1
    if j == i + 1 or depth:
        return None
    word, first = p.tokens[i], p.tokens[i + 1]
    # A header alone (Extended Events report an IF's or a WHILE's condition as a statement of its own) keeps its
    # word: the engine types it by its block. Before a statement, WHILE is written as IF (the two read the same).
    keyword = word.text.upper() if j >= p.n else "IF"
    p.out.append(Token(TokenType.SEMICOLON, ";", word.line, word.col, word.start, word.end))
    p.out.append(Token(TokenType.VAR, keyword, word.line, word.col, word.start, word.end))
    p.out.append(Token(TokenType.L_PAREN, "(", first.line, first.col, first.start, first.start))
    # The walk goes on through the condition, so the rules that read expressions (table hints, `UPDATE(col)`...)
    # apply there too; fix_tokens closes it with `) ;` on reaching `j`.
    p.depth += 1
    p.condition_end = j
    return i + 1


def _close_condition(p: _Pass, i: int) -> None:
    """The end of an IF / WHILE condition opened by :func:`_condition`: ``) ;``."""
    last = p.tokens[i - 1]
    p.out.append(Token(TokenType.R_PAREN, ")", last.line, last.col, last.end, last.end))
    p.out.append(Token(TokenType.SEMICOLON, ";", last.line, last.col, last.end, last.end))
    p.depth = max(p.depth - 1, 0)
    p.condition_end = -1


def _update_function(p: _Pass, i: int) -> int | None:
    """``UPDATE(col)`` in a condition (``IF UPDATE(col)`` in a trigger): the function, which sqlglot would take for
    an UPDATE statement, is kept as a call."""
    if i >= p.condition_end or p.kind(i + 1) != TokenType.L_PAREN:
        return None
    p.out.append(_retyped(p.tokens[i], TokenType.VAR))
    return i + 1


def _label(p: _Pass, i: int) -> int | None:
    """``name:`` alone on its line (a GOTO target): dropped, it is no statement."""
    token = p.tokens[i]
    if p.depth or p.kind(i + 1) != TokenType.COLON or (i and p.tokens[i - 1].line == token.line):
        return None
    if i + 2 < p.n and p.tokens[i + 2].line == token.line:
        return None
    return i + 2


def _statement_word(p: _Pass, i: int) -> int | None:
    """``PRINT``, ``RAISERROR (...)``, ``THROW``, ``RETURN <status>``, cursor ``OPEN`` / ``FETCH`` / ``CLOSE`` /
    ``DEALLOCATE`` first on their line after a statement without `;`: that statement ends there (else sqlglot reads
    ``INSERT ... SELECT 1`` + newline + ``RAISERROR('x', 16, 1)`` as one failed statement and loses the INSERT, and
    a cursor's DECLARE swallows its OPEN and FETCH); RAISERROR's ``WITH NOWAIT | LOG | SETERROR`` options and
    RETURN's status code, which sqlglot rejects, are dropped. Each word must be followed as its statement is
    (``SELECT a,`` + newline + ``throw`` is a column)."""
    token = p.tokens[i]
    word = token.text.upper()
    follows = _STATEMENT_WORDS.get(word)
    if p.depth or follows is None or (i and p.kinds[i - 1] == TokenType.PARAMETER) or not follows(p, i):
        return None
    previous = p.tokens[i - 1] if i else None
    if previous is not None and previous.token_type != TokenType.SEMICOLON:
        if previous.line == token.line or previous.token_type in _CONTINUES or (
                word == "FETCH" and previous.text.upper() in ("ROW", "ROWS")):  # OFFSET n ROWS FETCH NEXT ...
            if word != "RAISERROR":  # (`IF @x = 1 RAISERROR(...) WITH NOWAIT`: its options still go)
                return None  # mid-line, or inside a statement: a name, or a clause
        else:
            p.out.append(Token(TokenType.SEMICOLON, ";", token.line, token.col, token.start, token.start))
    end = skip_group(p.tokens, i + 1) if word == "RAISERROR" else i + 1
    p.out.extend(p.tokens[i:end])
    if word == "RETURN":  # `RETURN 0`, `RETURN @rc`: the status code is dropped (sqlglot rejects it after a `;`)
        return (_return_value(p, i) or i) + 1
    if word == "RAISERROR" and p.kind(end) == TokenType.WITH:
        end += 1
        while end < p.n and (p.kinds[end] == TokenType.COMMA or p.tokens[end].text.upper() in _RAISERROR_OPTIONS):
            end += 1
        if end < p.n and p.kinds[end] != TokenType.SEMICOLON and p.tokens[end].line != p.tokens[end - 1].line:
            last = p.tokens[end - 1]  # the statement ends with its options' line (then `RETURN` alone, say)
            p.out.append(Token(TokenType.SEMICOLON, ";", last.line, last.col, last.end, last.end))
    return end


def _ends_line(p: _Pass, j: int) -> bool:
    """Whether token ``j`` is the last of its line or of its statement."""
    return j + 1 >= p.n or p.kinds[j + 1] == TokenType.SEMICOLON or p.tokens[j + 1].line != p.tokens[j].line


def _cursor_name_follows(p: _Pass, i: int) -> bool:
    j = i + 2 if p.kind(i + 1) == TokenType.PARAMETER or (
        i + 1 < p.n and p.tokens[i + 1].text.upper() == "GLOBAL") else i + 1
    return p.kind(j) in (TokenType.VAR, TokenType.IDENTIFIER) and _ends_line(p, j)


def _fetch_follows(p: _Pass, i: int) -> bool:
    return i + 1 < p.n and (p.tokens[i + 1].text.upper() in _FETCH_WORDS or _cursor_name_follows(p, i))


def _throw_follows(p: _Pass, i: int) -> bool:
    return _ends_line(p, i) or p.kind(i + 1) in (TokenType.NUMBER, TokenType.PARAMETER)


def _return_value(p: _Pass, i: int) -> int | None:
    """Index of the last token of RETURN's status code alone on its line (`RETURN 0`, `RETURN -1`, `RETURN @rc`,
    `RETURN @@ERROR`), else None."""
    j = i + 1 + (p.kind(i + 1) == TokenType.DASH)
    if p.kind(j) == TokenType.NUMBER:
        return j if _ends_line(p, j) else None
    while p.kind(j) == TokenType.PARAMETER:
        j += 1
    return j if j > i + 1 and p.kind(j) == TokenType.VAR and _ends_line(p, j) else None


_STATEMENT_WORDS: dict[str, Callable[[_Pass, int], bool]] = {
    "RETURN": lambda p, i: _return_value(p, i) is not None,
    "PRINT": lambda p, i: i + 1 < p.n,
    "RAISERROR": lambda p, i: p.kind(i + 1) == TokenType.L_PAREN,
    "THROW": _throw_follows,
    "OPEN": _cursor_name_follows,
    "CLOSE": _cursor_name_follows,
    "DEALLOCATE": _cursor_name_follows,
    "FETCH": _fetch_follows,
}


def _implicit_exec(p: _Pass, i: int) -> int | None:
    """A procedure name first in a batch, without EXEC (``sp_configure 'clr enabled', 1``, ``dbo.load @d = 1``,
    ``sp_who``): SQL Server runs it as ``EXEC``; so is it read."""
    if i or p.tokens[0].text.upper() in _NOT_PROCEDURES:
        return None
    end = skip_name(p.tokens, 0)
    if end < p.n and p.kinds[end] not in _ARGUMENT_STARTS and p.tokens[end].line == p.tokens[end - 1].line:
        return None
    first = p.tokens[0]
    p.out.append(Token(TokenType.EXECUTE, "EXEC", first.line, first.col, first.start, first.start))
    p.out.extend(p.tokens[:end])
    return end


def _opens_statement(p: _Pass, j: int) -> bool:
    kind = p.kinds[j]
    if kind == TokenType.UPDATE:
        return p.kind(j + 1) != TokenType.L_PAREN
    return kind in _CONDITION_ENDS or (kind == TokenType.VAR and p.tokens[j].text.upper() in _CONDITION_END_WORDS
                                       and p.kinds[j - 1] != TokenType.PARAMETER)  # (`IF @return <> 0`)


def _query_hints(p: _Pass, i: int) -> int | None:
    """``OPTION (...)`` of a query (``USE HINT ('...')``, ``OPTIMIZE FOR (@a UNKNOWN)``, which sqlglot rejects,
    ``MAXDOP 1``, ``RECOMPILE``, ``LABEL = '...'``): how the query runs, never what it reads; dropped."""
    if p.depth or p.kind(i + 1) != TokenType.L_PAREN:
        return None
    return skip_group(p.tokens, i + 1)


def _with_options(p: _Pass, i: int) -> int | None:
    """``WITH (INDEX = ix, ...)`` table hints after a table name (sqlglot reads ``INDEX(ix)`` only) and
    ``EXEC ... WITH RESULT SETS ((...)) | NONE | UNDEFINED``: dropped, neither changes what is read or written."""
    words = [t.text.upper() for t in p.tokens[i + 1 : i + 3]]
    if words == ["RESULT", "SETS"]:
        end = i + 3
        while p.kind(end) == TokenType.L_PAREN or (end < p.n and p.tokens[end].text.upper() in ("NONE", "UNDEFINED")):
            end = skip_group(p.tokens, end) if p.kind(end) == TokenType.L_PAREN else end + 1
        return end
    if p.kind(i + 1) != TokenType.L_PAREN or not i or p.kinds[i - 1] not in (TokenType.VAR, TokenType.IDENTIFIER):
        return None
    end = skip_group(p.tokens, i + 1)
    hints = p.kinds[i + 2 : end]
    if any(kind == TokenType.INDEX and after == TokenType.EQ for kind, after in zip(hints, hints[1:])):
        return end
    return None


def _xml_namespaces(p: _Pass, i: int) -> int | None:
    """``WITH XMLNAMESPACES ('uri' AS p, DEFAULT 'uri')[, cte AS (...)]``: prefixes for the query's XML methods,
    never a table; sqlglot rejects it. Dropped, with its ``WITH`` when no common table expression follows."""
    if i + 2 >= p.n or p.kinds[i + 2] != TokenType.L_PAREN or p.tokens[i + 1].text.upper() != "XMLNAMESPACES":
        return None
    end = skip_group(p.tokens, i + 2)
    if p.kind(end) == TokenType.COMMA:
        p.out.append(p.tokens[i])
        return end + 1
    return end


def _table_storage(p: _Pass, i: int) -> int | None:
    """``CREATE TABLE ... TEXTIMAGE_ON [PRIMARY]`` / ``FILESTREAM_ON fg`` (where large values are stored, as SSMS
    scripts a table) and a graph table's ``AS NODE`` / ``AS EDGE``: dropped (sqlglot rejects the first and reads
    NODE as a table the CREATE reads)."""
    if p.depth or p.statement != TokenType.CREATE or i + 1 >= p.n:
        return None
    if p.tokens[i].text.upper() in ("TEXTIMAGE_ON", "FILESTREAM_ON"):
        return skip_name(p.tokens, i + 1)
    last = i + 1
    if p.kinds[i] == TokenType.ALIAS and p.tokens[last].text.upper() in ("NODE", "EDGE") and (
            last + 1 == p.n or p.kinds[last + 1] == TokenType.SEMICOLON
            or p.tokens[last + 1].line != p.tokens[last].line):
        return last + 1
    return None


def _clone_of(p: _Pass, i: int) -> int | None:
    """Fabric's ``CREATE TABLE t AS CLONE OF s [AT 'point in time']`` (dbt-fabric's ``dbt clone``): read as the
    ``CREATE TABLE t CLONE s`` sqlglot parses (t written, s read); the point in time changes neither."""
    if p.depth or p.statement != TokenType.CREATE or p.kinds[i] != TokenType.ALIAS or i + 3 >= p.n \
            or p.tokens[i + 1].text.upper() != "CLONE" or p.tokens[i + 2].text.upper() != "OF":
        return None
    end = skip_name(p.tokens, i + 3)
    p.out.append(p.tokens[i + 1])
    p.out.extend(p.tokens[i + 3 : end])
    if end + 1 < p.n and p.tokens[end].text.upper() == "AT" and p.kinds[end + 1] in (TokenType.STRING,
                                                                                        TokenType.NATIONAL_STRING):
        return end + 2
    return end


def _key_index_kind(p: _Pass, i: int) -> int | None:
    """A column's ``PRIMARY KEY CLUSTERED`` / ``UNIQUE NONCLUSTERED`` without a column list (as SSMS and the temporal
    table docs write them): the index kind, which sqlglot then expects a column list after, is dropped."""
    if p.statement != TokenType.CREATE or p.tokens[i].text.upper() not in ("CLUSTERED", "NONCLUSTERED"):
        return None
    if not p.out or p.out[-1].token_type not in (TokenType.PRIMARY_KEY, TokenType.UNIQUE):
        return None
    return None if p.kind(i + 1) == TokenType.L_PAREN else i + 1


def _fulltext_language(p: _Pass, i: int) -> int | None:
    """``, LANGUAGE <term>`` inside ``CONTAINS`` / ``FREETEXT`` / ``CONTAINSTABLE`` / ``FREETEXTTABLE``: the word
    breaker's language, which sqlglot rejects, is dropped (the full-text table is read all the same)."""
    text = p.tokens[i].text
    # (length first: the rule is tried at every word inside parentheses)
    if not p.depth or len(text) != 8 or text.upper() != "LANGUAGE" or not p.out \
            or p.out[-1].token_type != TokenType.COMMA or not _in_fulltext_call(p.out):
        return None
    j = i + 1
    while j < p.n and p.kinds[j] == TokenType.PARAMETER:  # @language
        j += 1
    if j >= p.n or p.kinds[j] in (TokenType.COMMA, TokenType.R_PAREN):
        return None
    p.out.pop()
    return j + 1


def _in_fulltext_call(out: list[Token]) -> bool:
    """Whether the innermost open parenthesis of ``out`` opens a full-text predicate's or function's arguments."""
    depth = 0
    for j in range(len(out) - 1, 0, -1):
        kind = out[j].token_type
        if kind == TokenType.R_PAREN:
            depth += 1
        elif kind == TokenType.L_PAREN:
            if depth == 0:
                return out[j - 1].text.upper() in _FULLTEXT_CALLS
            depth -= 1
    return False


_FULLTEXT_CALLS = frozenset({"CONTAINS", "FREETEXT", "CONTAINSTABLE", "FREETEXTTABLE"})


def _into_filegroup(p: _Pass, i: int) -> int | None:
    """``SELECT ... INTO t ON <filegroup> FROM ...`` (SQL Server 2017+): where the new table is stored, which sqlglot
    rejects, is dropped."""
    if p.depth or p.statement != TokenType.SELECT:
        return None
    end = skip_name(p.tokens, i + 1)
    if end + 1 >= p.n or p.kinds[end] != TokenType.ON:
        return None
    after = skip_name(p.tokens, end + 1)
    if after < p.n and p.kinds[after] not in (TokenType.FROM, TokenType.SEMICOLON):
        return None
    p.out.extend(p.tokens[i:end])
    return after


def _where_current_of(p: _Pass, i: int) -> int | None:
    """``UPDATE / DELETE ... WHERE CURRENT OF [GLOBAL] c``: the row a cursor stands on; the condition, which sqlglot
    rejects, is dropped (the table written is the same)."""
    if [t.text.upper() for t in p.tokens[i + 1 : i + 3]] != ["CURRENT", "OF"]:
        return None
    j = i + 3
    if j < p.n and p.tokens[j].text.upper() == "GLOBAL":
        j += 1
    return skip_name(p.tokens, j)


def _bulk_rowset(p: _Pass, i: int) -> int | None:
    """``OPENROWSET(BULK 'file', FORMATFILE = ..., SINGLE_BLOB)``: rows read from a file, no table; its arguments,
    which sqlglot rejects, are dropped (``OPENROWSET()``), so the statement around it keeps its lineage."""
    if p.tokens[i].text.upper() != "OPENROWSET" or p.kind(i + 1) != TokenType.L_PAREN or i + 2 >= p.n \
            or p.tokens[i + 2].text.upper() != "BULK":
        return None
    p.out.extend(p.tokens[i : i + 2])
    end = skip_group(p.tokens, i + 1)
    p.out.append(p.tokens[end - 1])
    return end


def _change_table(p: _Pass, i: int) -> int | None:
    """``CHANGETABLE(CHANGES t, @last_version)`` / ``CHANGETABLE(VERSION t, (key), (value))``: the change-tracking
    rows of table t (the documented incremental-extract query joins them to t); sqlglot rejects it. Read as t."""
    if p.tokens[i].text.upper() != "CHANGETABLE" or p.kind(i + 1) != TokenType.L_PAREN or i + 3 >= p.n \
            or p.tokens[i + 2].text.upper() not in ("CHANGES", "VERSION"):
        return None
    name_end = skip_name(p.tokens, i + 3)
    if name_end == i + 3 or p.kind(name_end) != TokenType.COMMA:
        return None
    p.out.extend(p.tokens[i + 3 : name_end])
    return skip_group(p.tokens, i + 1)


def _open_xml(p: _Pass, i: int) -> int | None:
    """``OPENXML(@handle, 'xpath', flags) [WITH (columns) | WITH table]``: rows of an XML document prepared in a
    variable, no table (as OPENJSON); sqlglot rejects it. Dropped as ``OPENXML()``, a rowset function, so the
    statement around it keeps its lineage."""
    if p.tokens[i].text.upper() != "OPENXML" or p.kind(i + 1) != TokenType.L_PAREN:
        return None
    end = skip_group(p.tokens, i + 1)
    p.out.extend([p.tokens[i], p.tokens[i + 1], p.tokens[end - 1]])
    if p.kind(end) == TokenType.WITH:
        end = skip_group(p.tokens, end + 1) if p.kind(end + 1) == TokenType.L_PAREN else skip_name(p.tokens, end + 1)
    return end


def _legacy_system_function(p: _Pass, i: int) -> int | None:
    """``FROM ::fn_listextendedproperty(...)``: SQL Server 2000's spelling of a system table function (today's is
    ``sys.fn_...``), rows of the server's metadata, no table; sqlglot rejects the ``::``, which is dropped."""
    if not p.out or p.out[-1].token_type not in (TokenType.FROM, TokenType.JOIN, TokenType.COMMA) \
            or p.kind(i + 1) != TokenType.VAR or not p.tokens[i + 1].text.lower().startswith("fn_"):
        return None
    return i + 1


def _graph_match(p: _Pass, i: int) -> int | None:
    """``WHERE MATCH(p-(e)->f)``, ``MATCH(SHORTEST_PATH(...))``: a SQL Graph pattern over the node and edge tables
    the FROM clause names; sqlglot reads MATCH as MySQL's full-text ``MATCH ... AGAINST`` and rejects the statement.
    T-SQL has no other MATCH: the pattern, which names no table, is read as ``1 = 1``."""
    if p.tokens[i].text.upper() != "MATCH" or p.kind(i + 1) != TokenType.L_PAREN \
            or (i and p.kinds[i - 1] == TokenType.DOT):
        return None
    end = skip_group(p.tokens, i + 1)
    if TokenType.DASH not in p.kinds[i + 2 : end]:  # every edge of a pattern is drawn with dashes
        return None
    first, last = p.tokens[i], p.tokens[end - 1]
    p.out.extend([Token(TokenType.NUMBER, "1", first.line, first.col, first.start, first.end),
                  Token(TokenType.EQ, "=", first.line, first.col, first.start, first.end),
                  Token(TokenType.NUMBER, "1", last.line, last.col, last.start, last.end)])
    return end


def _graph_path_order(p: _Pass, i: int) -> int | None:
    """``STRING_AGG(p2.name, '->') WITHIN GROUP (GRAPH PATH)``: an aggregate over the nodes of an arbitrary-length
    MATCH pattern, in path order; sqlglot rejects the ``GRAPH PATH`` ordering, which is dropped (the aggregate and
    its columns stay)."""
    words = [t.text.upper() for t in p.tokens[i : i + 6]]
    if words != ["WITHIN", "GROUP", "(", "GRAPH", "PATH", ")"]:
        return None
    return i + 6


def _graph_for_path(p: _Pass, i: int) -> int | None:
    """``FROM Person AS p1, friendOf FOR PATH AS fo``: a node or edge table an arbitrary-length MATCH pattern walks;
    the table is read as it is, the ``FOR PATH`` sqlglot rejects is dropped."""
    if p.kind(i + 1) != TokenType.VAR or p.tokens[i + 1].text.upper() != "PATH" or not p.out \
            or p.out[-1].token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
        return None
    return i + 2


def _skip_top(p: _Pass, i: int) -> int:
    """Index just after ``TOP (n) [PERCENT]`` starting at ``i`` (``i`` when no TOP stands there)."""
    if p.kind(i) != TokenType.TOP:
        return i
    i = skip_group(p.tokens, i + 1)
    return i + 1 if p.kind(i) == TokenType.PERCENT else i


def _delete_double_from(p: _Pass, i: int) -> int | None:
    """``DELETE FROM t [WITH (hints)] [OUTPUT ...] FROM t JOIN x ...``: the first FROM is dropped, giving
    ``DELETE t FROM t JOIN x``, which sqlglot reads as a multi-table delete whose target is t."""
    if p.depth:
        return None
    p.out.append(p.tokens[i])
    return _fix_double_from(p, i + 1)


def _output_clause(p: _Pass, i: int) -> int | None:
    """``OUTPUT ... [INTO t [(cols)]]`` of a DML statement (sqlglot tokenizes OUTPUT as RETURNING): cut out, as
    it only returns rows, except for its INTO table, whose span is reported as an extra write target."""
    if p.depth or p.statement not in _DML:
        return None
    i, span = _skip_output(p.tokens, p.kinds, i)
    if span:
        p.into_spans.append(span)
    return i


def _compound_assignment(p: _Pass, i: int) -> int | None:
    """``SET col += x``: the operator is dropped (``col = x``, same lineage)."""
    if p.kind(i + 1) == TokenType.EQ and p.tokens[i].end + 1 == p.tokens[i + 1].start:
        return i + 1
    return None


def _synapse_table_options(p: _Pass, i: int) -> int | None:
    """``CREATE TABLE t [(cols)] WITH (DISTRIBUTION = HASH(k), CLUSTERED COLUMNSTORE INDEX | HEAP | CLUSTERED
    INDEX (a) , PARTITION (...)) [AS SELECT ...]`` (Azure Synapse, SQL DW, Fabric; also CETAS' ``LOCATION``,
    ``DATA_SOURCE``, ``FILE_FORMAT``): the storage options are dropped, the CTAS' SELECT stays."""
    if p.depth:
        return None
    j = i + 1
    if j < p.n and p.tokens[j].text.upper() == "EXTERNAL":
        j += 1
    if p.kind(j) != TokenType.TABLE:
        return None
    name_end = skip_name(p.tokens, j + 1)
    after_columns = skip_group(p.tokens, name_end)
    if p.kind(after_columns) != TokenType.WITH or p.kind(after_columns + 1) != TokenType.L_PAREN:
        return None
    group_end = skip_group(p.tokens, after_columns + 1)
    words = {t.text.upper() for t in p.tokens[after_columns + 2 : group_end]}
    if not words & _SYNAPSE_OPTIONS:
        return None
    p.out.extend(p.tokens[i:after_columns])
    return group_end


#: The T-SQL rewrites, in the order they are tried at a token.
RULES: tuple[TokenRule, ...] = (
    TokenRule("exec_national_literal", frozenset({TokenType.EXECUTE}), frozenset({TokenType.EXECUTE}),
              _exec_national_literal),
    TokenRule("bulk_insert", frozenset({TokenType.VAR}), frozenset({TokenType.INSERT}), _bulk_insert),
    TokenRule("insert_table_hints", frozenset({TokenType.INSERT}), frozenset({TokenType.WITH}), _insert_table_hints),
    TokenRule("control_flow", frozenset({TokenType.VAR, TokenType.ELSE, TokenType.BEGIN, TokenType.END}),
              frozenset({TokenType.VAR, TokenType.ELSE, TokenType.BEGIN, TokenType.END}), _control_flow),
    TokenRule("update_function", frozenset({TokenType.UPDATE}), frozenset({TokenType.VAR}), _update_function),
    TokenRule("label", frozenset({TokenType.VAR}), frozenset({TokenType.COLON}), _label),
    TokenRule("statement_word", frozenset({TokenType.VAR, TokenType.COMMAND, TokenType.FETCH}),
              frozenset({TokenType.VAR, TokenType.COMMAND, TokenType.FETCH}), _statement_word),
    TokenRule("implicit_exec", frozenset({TokenType.VAR, TokenType.IDENTIFIER}),
              frozenset({TokenType.VAR, TokenType.IDENTIFIER}), _implicit_exec),
    TokenRule("bulk_rowset", frozenset({TokenType.VAR}), frozenset({TokenType.VAR}), _bulk_rowset),
    TokenRule("change_table", frozenset({TokenType.VAR}), frozenset({TokenType.VAR}), _change_table),
    TokenRule("open_xml", frozenset({TokenType.VAR}), frozenset({TokenType.VAR}), _open_xml),
    TokenRule("query_hints", frozenset({TokenType.OPTION}), frozenset({TokenType.OPTION}), _query_hints),
    TokenRule("xml_namespaces", frozenset({TokenType.WITH}), frozenset({TokenType.WITH}), _xml_namespaces),
    TokenRule("with_options", frozenset({TokenType.WITH}), frozenset({TokenType.WITH}), _with_options),
    TokenRule("dml_top", frozenset(_DML), frozenset(_DML), _dml_top),
    TokenRule("delete_double_from", frozenset({TokenType.DELETE}), frozenset({TokenType.DELETE}),
              _delete_double_from),
    TokenRule("output_clause", frozenset({TokenType.RETURNING}), frozenset({TokenType.RETURNING}),
              _output_clause),
    TokenRule("compound_assignment", _COMPOUND, frozenset({TokenType.SET, TokenType.SELECT, TokenType.UPDATE}),
              _compound_assignment),
    TokenRule("synapse_table_options", frozenset({TokenType.CREATE}), frozenset({TokenType.WITH}),
              _synapse_table_options),
    TokenRule("clone_of", frozenset({TokenType.ALIAS}), frozenset({TokenType.CREATE}), _clone_of),
    TokenRule("table_storage", frozenset({TokenType.VAR, TokenType.ALIAS}), frozenset({TokenType.CREATE}),
              _table_storage),
    TokenRule("where_current_of", frozenset({TokenType.WHERE}), frozenset({TokenType.WHERE}), _where_current_of),
    TokenRule("key_index_kind", frozenset({TokenType.VAR}), frozenset({TokenType.PRIMARY_KEY, TokenType.UNIQUE}),
              _key_index_kind),
    TokenRule("fulltext_language", frozenset({TokenType.VAR}), frozenset({TokenType.VAR}), _fulltext_language),
    TokenRule("into_filegroup", frozenset({TokenType.INTO}), frozenset({TokenType.INTO}), _into_filegroup),
    TokenRule("legacy_system_function", frozenset({TokenType.DCOLON}), frozenset({TokenType.DCOLON}),
              _legacy_system_function),
    TokenRule("graph_match", frozenset({TokenType.VAR}), frozenset({TokenType.VAR}), _graph_match),
    TokenRule("graph_path_order", frozenset({TokenType.VAR}), frozenset({TokenType.VAR}), _graph_path_order),
    TokenRule("graph_for_path", frozenset({TokenType.FOR}), frozenset({TokenType.FOR}), _graph_for_path),
)


def _rules_by_kind(rules: tuple[TokenRule, ...]) -> dict[TokenType, tuple[TokenRule, ...]]:
    by_kind: dict[TokenType, list[TokenRule]] = {}
    for rule in rules:
        for kind in rule.at:
            by_kind.setdefault(kind, []).append(rule)
    return {kind: tuple(found) for kind, found in by_kind.items()}


_BY_KIND = _rules_by_kind(RULES)
# A batch holding none of these needs no rewrite (most batches: the walk is skipped).
_TRIGGERS = frozenset().union(*(rule.needs for rule in RULES))


def fix_tokens(tokens: list[Token], text: str) -> tuple[list[Token], list[tuple[int, int]]]:
    """Rewrite a T-SQL batch's tokens into a form sqlglot parses, by the rules of :data:`RULES` (a
    :data:`harvesters.sql.dialects.TokenFix`; the batch's ``text`` is not needed: the engine placed the strings
    commands swallowed before, see engine._reopen_swallowed).

    Returns the new token list and the source spans `(start, end)` (inclusive character offsets) of the
    `OUTPUT ... INTO <table>` targets that were cut out, for the caller to report as outputs.
    """
    p = _Pass(tokens)
    present = set(p.kinds)
    if not (_TRIGGERS & present):
        return tokens, []
    active = {kind: tuple(r for r in rules if r.needs & present) for kind, rules in _BY_KIND.items()}
    i = 0
    while i < p.n:
        if 0 <= p.condition_end <= i:  # (a rule never reads past it: the condition's parentheses are balanced)
            _close_condition(p, i)
        kind = p.kinds[i]
        hints = kind == TokenType.WITH and p.kind(i + 1) == TokenType.L_PAREN  # `t WITH (ROWLOCK)`: no CTE
        if p.depth == 0 and kind in _STATEMENT_START and not hints:
            p.statement = kind
        for rule in active.get(kind, ()):
            after = rule.rewrite(p, i)
            if after is not None:
                i = after
                break
        else:
            if kind == TokenType.CASE:
                p.cases += 1
            elif kind == TokenType.L_PAREN:
                p.depth += 1
            elif kind == TokenType.R_PAREN:
                p.depth = max(p.depth - 1, 0)
            p.out.append(tokens[i])
            i += 1
    if p.condition_end >= 0:  # a header alone: its condition runs to the batch's end
        _close_condition(p, p.n)
    return p.out, p.into_spans


# ---- helpers ---------------------------------------------------------------------------------------------


def _retyped(token: Token, kind: TokenType) -> Token:
    """``token`` read as another kind (its text, place and comments kept)."""
    return Token(kind, token.text, token.line, token.col, token.start, token.end, token.comments)


def skip_name(tokens: list[Token], i: int) -> int:
    """Index just after a (possibly dotted, `#`/`@`-prefixed) object name starting at `i`. Also read by the engine
    (`CREATE TABLE #t (...)`)."""
    n = len(tokens)
    while i < n:
        while i < n and tokens[i].token_type in _NAME_PREFIX:
            i += 1
        if i < n and tokens[i].token_type not in (TokenType.DOT, TokenType.L_PAREN, TokenType.SEMICOLON):
            i += 1
        if i < n and tokens[i].token_type == TokenType.DOT:
            while i < n and tokens[i].token_type == TokenType.DOT:  # `db..t` has two dots
                i += 1
            continue
        break
    return i


def skip_group(tokens: list[Token], i: int) -> int:
    """Index just after the balanced parenthesised group opening at `i` (or `i` if none opens there). Also read by
    the engine (`WITH name (columns) AS`)."""
    if i >= len(tokens) or tokens[i].token_type != TokenType.L_PAREN:
        return i
    depth = 0
    for j in range(i, len(tokens)):
        kind = tokens[j].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(tokens)


def _fix_double_from(p: _Pass, i: int) -> int:
    """At `DELETE ^FROM t [WITH (hints)] [OUTPUT ...] FROM ...`: drop the first FROM; return next index."""
    tokens, kinds = p.tokens, p.kinds
    if i >= len(tokens) or kinds[i] != TokenType.FROM:
        return i
    j = skip_name(tokens, i + 1)
    if j < len(tokens) and kinds[j] == TokenType.WITH:
        j = skip_group(tokens, j + 1)
    if j < len(tokens) and kinds[j] == TokenType.RETURNING:
        j, _ = _skip_output(tokens, kinds, j)
    if j < len(tokens) and kinds[j] == TokenType.FROM:
        return i + 1
    return i


def _skip_output(
    tokens: list[Token], kinds: list[TokenType], i: int
) -> tuple[int, tuple[int, int] | None]:
    """Skip the OUTPUT clause at `i`: return the next index and the source span of its INTO target."""
    depth = 0
    i += 1
    while i < len(kinds):
        kind = kinds[i]
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and kind in _OUTPUT_END:
            break
        i += 1
    span = None
    if i < len(kinds) and kinds[i] == TokenType.INTO:
        name_end = skip_name(tokens, i + 1)
        if name_end > i + 1:
            span = (tokens[i + 1].start, tokens[name_end - 1].end)
        i = skip_group(tokens, name_end)  # the optional (column, ...) list
    return i, span
