"""Token rewrite for Snowflake and BigQuery: a procedure's scripting body written without quotes.

Snowflake ``CREATE PROCEDURE p() ... AS BEGIN <statements> END;`` (Snowsight, the Python connector and the query
history keep the body unquoted) and BigQuery ``CREATE PROCEDURE ds.p() [OPTIONS(...)] BEGIN <statements> END``
(BigQuery has no other form) run nothing when created: the body runs only when called, and each of its statements
then reaches the query history on its own, as a child of the CALL. sqlglot cannot read such a body (``RETURN``,
``LET``, ``FOR ... DO``, ``EXCEPTION`` are not SQL statements): the CREATE failed, or its body's statements after
the first ``;`` were taken for the text's own. The body is replaced by one string token, as if quoted with ``$$``,
so the definition reads as one, and the statements after it are read as usual.
"""
from __future__ import annotations

from collections.abc import Callable

from sqlglot.tokens import Token, TokenType

from harvesters.sql.retokenize import command_string, string_tokens_of

#: Objects whose ``AS`` (an ALERT: its ``THEN``) introduces a scripting body.
_BODY_OWNERS = frozenset({"PROCEDURE", "FUNCTION", "TASK", "ALERT"})
#: Words that open a body written without quotes.
_BODY_STARTS = frozenset({"BEGIN", "DECLARE"})
#: ``END <word>`` closes a construct not opened by BEGIN or CASE (``END IF``, ``END FOR`` ...).
_OTHER_ENDS = frozenset({"IF", "FOR", "LOOP", "WHILE", "REPEAT"})
#: The word BEGIN's token types (Snowflake's tokenizer gives BEGIN, BigQuery's COMMAND).
_BEGIN_TYPES = frozenset({TokenType.BEGIN, TokenType.COMMAND})
#: ``BEGIN <word>`` / ``BEGIN;`` starting a transaction, not a block.
_TRANSACTION = frozenset({"TRANSACTION", "WORK", "NAME", ";"})


def quote_bodies(tokens: list[Token], text: str) -> tuple[list[Token], list[tuple[int, int]]]:
    """The batch's tokens with every unquoted scripting body of a CREATE PROCEDURE / FUNCTION / TASK made one
    string token (a :data:`harvesters.sql.dialects.TokenFix`; it cuts out no write targets, and needs no ``text``:
    the string spans the body's own tokens)."""
    out: list[Token] = []
    done, n = 0, len(tokens)  # tokens[:done] are in `out` (a batch without a body is returned as it is)
    for i, token in enumerate(tokens):
        if i < done or token.token_type != TokenType.CREATE:
            continue
        start = _body_start(tokens, i)
        if start is None:
            continue
        end = _body_end(tokens, start)
        end = n - 1 if end is None else end  # never closed (a history text cut at its size limit): runs to the end
        out.extend(tokens[done:start])
        first, last = tokens[start], tokens[end]
        out.append(Token(TokenType.STRING, "", first.line, first.col, first.start, last.end))
        done = end + 1
    if not done:
        return tokens, []
    out.extend(tokens[done:])
    return out, []


def _body_start(tokens: list[Token], i: int) -> int | None:
    """Index of the BEGIN / DECLARE opening the body of the CREATE at ``i``, if it has an unquoted one."""
    owner, depth = False, 0
    for j in range(i + 1, len(tokens)):
        kind, word = tokens[j].token_type, tokens[j].text.upper()
        if kind == TokenType.SEMICOLON:
            return None
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and word in _BODY_OWNERS:
            owner = True
        elif depth == 0 and owner and _is_begin(tokens[j]):  # BigQuery: the body follows the header, no AS
            return j
        elif depth == 0 and kind == TokenType.ALIAS and tokens[j - 1].text.upper() != "EXECUTE":  # not EXECUTE AS
            nxt = j + 1
            if not owner or nxt >= len(tokens) or tokens[nxt].text.upper() not in _BODY_STARTS:
                return None
            return nxt
    return None


def _body_end(tokens: list[Token], start: int) -> int | None:
    """Index of the END closing the body that opens at ``start`` (None when it is never closed)."""
    open_blocks, j, n = 0, start, len(tokens)
    while j < n:
        after = tokens[j + 1].text.upper() if j + 1 < n else ""
        if _is_begin(tokens[j]) and after not in _TRANSACTION:
            open_blocks += 1
        elif tokens[j].token_type == TokenType.CASE:
            open_blocks += 1
        elif tokens[j].token_type == TokenType.END and after not in _OTHER_ENDS:
            open_blocks -= 1
            if after == "CASE":
                j += 1
            if open_blocks == 0:
                return j
        j += 1
    return None


def _is_begin(token: Token) -> bool:
    """Whether the token is the word BEGIN (Snowflake's tokenizer types it BEGIN, BigQuery's COMMAND)."""
    return token.token_type in _BEGIN_TYPES and token.text.upper() == "BEGIN"


# -- Blocks that run now: their statements are read ------------------------------------------------------------------
#
# A Snowflake anonymous block (``[DECLARE ...] BEGIN <statements> END;``, also inside ``EXECUTE IMMEDIATE $$...$$``)
# and a BigQuery script's ``BEGIN ... [EXCEPTION WHEN ERROR THEN ...] END``, ``IF ... THEN``, ``LOOP``, ``WHILE ...
# DO``, ``REPEAT ... UNTIL``, ``FOR x IN (<query>) DO`` run their statements when the text runs. sqlglot reads none
# of these words as SQL: a block's first statement was swallowed with its opening word (BigQuery's tokenizer takes
# BEGIN, LOOP, WHILE for commands and their statement for a string) and the rest failed or was lost. The control
# words are dropped and the statements they hold are read as the text's own; a condition or a FOR's range that holds
# a query is read as a SELECT (the run reads its tables), the other scripting statements (RETURN, LET without a
# query, BREAK, OPEN ...) are dropped.

#: Words opening a condition that ends at THEN (IF, ELSEIF, WHEN) or DO (WHILE, FOR).
_CONDITIONS = {"IF": "THEN", "ELSEIF": "THEN", "ELSIF": "THEN", "WHEN": "THEN", "WHILE": "DO", "FOR": "DO",
               "UNTIL": "END"}
#: Words at a statement's start that open or separate parts of a block: dropped.
_BLOCK_WORDS = frozenset({"ELSE", "LOOP", "REPEAT", "EXCEPTION"})
#: Scripting statements that read nothing (unless a query stands in them: see _query_within).
_SCRIPT_STATEMENTS = frozenset({"RETURN", "LET", "BREAK", "CONTINUE", "LEAVE", "ITERATE", "OPEN", "CLOSE", "FETCH",
                                "RAISE", "NULL", "AWAIT", "CANCEL"})
#: Token types that open a query.
_QUERY_STARTS = frozenset({TokenType.SELECT, TokenType.WITH})


def flatten_blocks(dialect: str, declare_sections: bool) -> Callable[[list[Token], str], tuple[list[Token], list]]:
    """A :data:`harvesters.sql.dialects.TokenFix`: :func:`quote_bodies`, then the statements of the blocks that run
    now read as the text's own (see above). ``declare_sections``: a DECLARE opens a section of declarations that
    ends at BEGIN (Snowflake; in BigQuery DECLARE is one statement)."""

    reopen = string_tokens_of(dialect)

    def fix(tokens: list[Token], text: str) -> tuple[list[Token], list]:
        tokens, _ = quote_bodies(tokens, text)
        return _flatten(tokens, text, reopen, declare_sections), []

    return fix


def _flatten(tokens: list[Token], text: str, reopen: Callable[[Token], list[Token]],
             declare_sections: bool) -> list[Token]:
    out: list[Token] = []
    pending = tokens[::-1]  # a stack: a swallowed statement tokenized again goes back on it
    at_start, declaring = True, False
    # a DECLARE opens a section only in a text that has a BEGIN to end it (T-SQL read as Snowflake has none)
    sections = declare_sections and any(map(_is_begin, tokens))
    while pending:
        token = pending.pop()
        word = token.text.upper()
        if not at_start or token.token_type == TokenType.STRING:
            out.append(token)
            at_start = token.token_type == TokenType.SEMICOLON
            continue
        if token.token_type == TokenType.COMMAND and pending and pending[-1].token_type == TokenType.STRING \
                and word in _REOPENED:
            # BigQuery's BEGIN/LOOP/WHILE took their statement. Its string ends after the whitespace the tokenizer
            # stripped (`CREATE ... ;`, a CRLF, the text's end): placed by its last character, or the statement's
            # tokens land that many characters late and its type reads 'ATE RO' for CREATE ROW ACCESS POLICY
            pending.extend(reversed(reopen(command_string(pending.pop(), token, text))))
        following = pending[-1].text.upper() if pending else ""
        declaring = declaring and _declares(token)  # (a section ends at BEGIN, or where no name is declared)
        if word == "BEGIN" and following not in _TRANSACTION:
            pass
        elif declaring or (word == "DECLARE" and sections and pending and _declares(pending[-1])):
            declaring = True
            out.extend(_query_within(_through_semicolon(pending, token if word != "DECLARE" else None)))
        elif word == "END":
            if following in _OTHER_ENDS or following == "CASE":
                pending.pop()
        elif word in _CONDITIONS:
            condition = _condition(pending, _CONDITIONS[word])
            if any(t.token_type in _QUERY_STARTS for t in condition):
                out.extend(_as_select(token, _query_range(condition) if word == "FOR" else condition))
        elif word == "CASE":  # a CASE statement: its WHENs open conditions
            _condition(pending, "WHEN", keep_end=True)
        elif word in _BLOCK_WORDS:
            pass
        elif word in _SCRIPT_STATEMENTS or (pending and pending[-1].token_type == TokenType.COLON_EQ):
            out.extend(_query_within(_through_semicolon(pending, token)))  # LET x := (SELECT ...) reads its query
        else:
            out.append(token)
            at_start = token.token_type == TokenType.SEMICOLON
    return out


#: Words BigQuery's tokenizer may take for commands, swallowing what follows them up to the next ``;`` into a string
#: (BEGIN, LOOP, WHILE: their first statement; EXCEPTION: its WHEN ... THEN; ELSEIF: its condition).
_REOPENED = frozenset({*_CONDITIONS, *_BLOCK_WORDS, "BEGIN", "CASE"})


def _declares(name: Token) -> bool:
    """Whether a declaration of a Snowflake DECLARE section can start with ``name``: a variable's, cursor's or
    exception's name (not ``@v``: T-SQL; not a statement or control word: the section ended without BEGIN)."""
    return name.token_type in (TokenType.VAR, TokenType.IDENTIFIER) and not name.text.startswith("@") \
        and name.text.upper() not in _CONTROL_WORDS


#: Words that open a statement or a control construct, never a declaration.
_CONTROL_WORDS = frozenset({*_CONDITIONS, *_BLOCK_WORDS, *_SCRIPT_STATEMENTS, "BEGIN", "END", "CASE", "DECLARE"})


def _through_semicolon(pending: list[Token], first: Token | None) -> list[Token]:
    """Take the statement's tokens up to and with its ``;`` off ``pending`` (``first`` already taken)."""
    taken = [first] if first is not None else []
    while pending:
        taken.append(pending.pop())
        if taken[-1].token_type == TokenType.SEMICOLON:
            break
    return taken


def _condition(pending: list[Token], end_word: str, keep_end: bool = False) -> list[Token]:
    """Take a condition's tokens off ``pending`` up to its closing word (THEN, DO, WHEN; a CASE ... END inside it is
    skipped), dropping that word unless ``keep_end``."""
    taken: list[Token] = []
    cases = depth = 0
    while pending:
        token = pending[-1]
        word = token.text.upper()
        if token.token_type in (TokenType.L_PAREN, TokenType.R_PAREN):
            depth += 1 if token.token_type == TokenType.L_PAREN else -1
        elif depth == 0 and token.token_type == TokenType.CASE:
            cases += 1
        elif depth == 0 and cases and word == "END":
            cases -= 1
        elif depth == 0 and not cases and (word == end_word or token.token_type == TokenType.SEMICOLON):
            if not keep_end and word == end_word:
                pending.pop()
            return taken
        taken.append(pending.pop())
    return taken


def _query_range(tokens: list[Token]) -> list[Token]:
    """``r IN (<query>)`` of a FOR: the query's parenthesis."""
    for i, token in enumerate(tokens):
        if token.token_type == TokenType.IN:
            return tokens[i + 1 :]
    return []


def _query_within(statement: list[Token]) -> list[Token]:
    """The query a scripting statement or declaration holds (``c CURSOR FOR SELECT ...``, ``r RESULTSET :=
    (SELECT ...)``, ``LET x := (SELECT ...)``), with its ``;``; nothing when it holds none."""
    for i, token in enumerate(statement):
        if token.token_type in _QUERY_STARTS:
            query = statement[i:]
            if query[-1].token_type == TokenType.SEMICOLON:
                query = query[:-1]
            opened = sum(t.token_type == TokenType.L_PAREN for t in query)
            closed = sum(t.token_type == TokenType.R_PAREN for t in query)
            while closed > opened and query and query[-1].token_type == TokenType.R_PAREN:
                query, closed = query[:-1], closed - 1  # `:= (SELECT ...)`: the paren opened before the query
            return [*query, _semicolon(statement[-1])]
    return []


def _as_select(word: Token, condition: list[Token]) -> list[Token]:
    """``SELECT <condition>;`` in the place of ``IF <condition> THEN`` (the condition's query is read)."""
    select = Token(TokenType.SELECT, "SELECT", word.line, word.col, word.start, word.end)
    return [select, *condition, _semicolon(condition[-1] if condition else word)]


def _semicolon(at: Token) -> Token:
    return Token(TokenType.SEMICOLON, ";", at.line, at.col, at.end, at.end)
