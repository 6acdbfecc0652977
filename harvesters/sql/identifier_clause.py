"""Token rewrite for Spark and Databricks: ``IDENTIFIER('db.t')`` naming a table.

Spark 3.4+ and Databricks let a statement name its table by a string (``SELECT ... FROM IDENTIFIER('db.t')``,
``INSERT INTO IDENTIFIER('t') ...``, ``MERGE INTO IDENTIFIER(...)``). sqlglot's Spark parser reads the call as a table
function (no dataset) or, after INSERT INTO, ``IDENTIFIER`` as the table and the string as its column list (a
dataset named IDENTIFIER). The call is replaced by the tokens of the name inside the string, so every statement
shape reads the table as if it were written plainly. A call with anything but one string literal (a parameter
marker, a variable, a concatenation) names a table known only at run time: left as it is (no dataset).
"""
from __future__ import annotations

from collections.abc import Callable

from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

from harvesters.sql.retokenize import tokenizer

#: The tokens a table's name is made of.
_NAME_TOKENS = frozenset({TokenType.VAR, TokenType.IDENTIFIER, TokenType.DOT})


def name_tokens(dialect: str) -> Callable[[list[Token], str], tuple[list[Token], list]]:
    """A :data:`harvesters.sql.dialects.TokenFix` replacing ``IDENTIFIER('<name>')`` by ``<name>``'s tokens, read
    with the tokenizer of sqlglot's ``dialect`` (the batch's text is not needed: the name's tokens take the whole
    call's place)."""

    def fix(tokens: list[Token], text: str) -> tuple[list[Token], list]:
        tokenize = tokenizer(dialect)
        out: list[Token] = []
        i, n = 0, len(tokens)
        while i < n:
            name = _named(tokens, i, tokenize) if i + 3 < n else None
            if name is None:
                out.append(tokens[i])
                i += 1
                continue
            out.extend(name)
            i += 4
        return out, []

    return fix


def _named(tokens: list[Token], i: int, tokenize: Callable[[str], list[Token]]) -> list[Token] | None:
    """The name's tokens when ``tokens[i:i+4]`` is ``IDENTIFIER ( '<name>' )``, placed where the call stood."""
    call, open_, literal, close = tokens[i : i + 4]
    if not (call.text.upper() == "IDENTIFIER" and open_.token_type == TokenType.L_PAREN
            and literal.token_type == TokenType.STRING and close.token_type == TokenType.R_PAREN):
        return None
    try:
        inner = tokenize(literal.text)
    except SqlglotError:
        return None
    if not inner or any(t.token_type not in _NAME_TOKENS for t in inner):
        return None
    # positions of the call, so that text cut by token positions still covers the statement
    return [Token(t.token_type, t.text, call.line, call.col, call.start, close.end) for t in inner]
