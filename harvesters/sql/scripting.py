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

from sqlglot.tokens import Token, TokenType

#: Objects whose ``AS`` introduces a scripting body.
_BODY_OWNERS = frozenset({"PROCEDURE", "FUNCTION", "TASK"})
#: Words that open a body written without quotes.
_BODY_STARTS = frozenset({"BEGIN", "DECLARE"})
#: ``END <word>`` closes a construct not opened by BEGIN or CASE (``END IF``, ``END FOR`` ...).
_OTHER_ENDS = frozenset({"IF", "FOR", "LOOP", "WHILE", "REPEAT"})
#: The word BEGIN's token types (Snowflake's tokenizer gives BEGIN, BigQuery's COMMAND).
_BEGIN_TYPES = frozenset({TokenType.BEGIN, TokenType.COMMAND})
#: ``BEGIN <word>`` / ``BEGIN;`` starting a transaction, not a block.
_TRANSACTION = frozenset({"TRANSACTION", "WORK", "NAME", ";"})


def quote_bodies(tokens: list[Token]) -> tuple[list[Token], list[tuple[int, int]]]:
    """The batch's tokens with every unquoted scripting body of a CREATE PROCEDURE / FUNCTION / TASK made one
    string token (a :data:`harvesters.sql.dialects.TokenFix`; it cuts out no write targets)."""
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
