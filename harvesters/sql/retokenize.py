"""Tokens read again: a string token's text tokenized in its place, and each dialect's tokenizer, looked up late.

sqlglot's tokenizer reads the rest of a statement after a command word as one string token up to the next ``;``
(T-SQL ``PRINT ...``, BigQuery ``BEGIN ...``); token rewrites that need what such a string holds tokenize its text
again and put the tokens where the string stood, so that text cut by token positions stays right.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token

#: Put before a string's text when it is tokenized again: its first word is then not a statement's first word,
#: which the tokenizer would let swallow the rest once more (a chain of n ENDs re-read n times: quadratic).
PREFIX = "x "


@functools.cache
def tokenizer(dialect: str) -> Callable[[str], list[Token]]:
    """The sqlglot dialect's tokenizer, looked up when a text first needs it: loading sqlglot's Spark and
    Databricks dialects when the rules are built cost every harvest's start-up 16 ms."""
    return Dialect.get_or_raise(dialect).tokenize


def string_tokens(token: Token, tokenize: Callable[[str], list[Token]], prefix: str = PREFIX) -> list[Token] | None:
    """The tokens of a string token's text, placed where the string stands in the batch (None when they cannot be
    read). Without ``prefix`` the text's first word may again open a command."""
    try:
        inner = tokenize(prefix + token.text)[1 if prefix else 0 :]
    except SqlglotError:
        return None
    # (the string token ends at its last character and has its line: a command's string placed by command_string)
    base = token.end - len(token.text) + 1 - len(prefix)
    first_line = token.line - token.text.count("\n")
    return [Token(t.token_type, t.text, t.line + first_line - 1, t.col, t.start + base, t.end + base, t.comments)
            for t in inner]


def command_string(token: Token, command: Token, text: str) -> Token:
    """The string the tokenizer read after the ``command`` word (``PRINT ...`` up to the next ``;``), ending at its
    last character in ``text`` and with that character's line, as :func:`string_tokens` reads a string token: the
    tokenizer strips the string's text but ends the token, and counts its line, where its scan stopped, after the
    whitespace it stripped (a batch's last newline, a ``\\r\\n``). Tokens read again from it were placed that many
    characters late, and the parser slices the text by their places: ``DECLARE`` came out as 'ECLARE ', an ``OUTPUT
    ... INTO dbo.log`` target as 'bo.log'."""
    end = token.end
    if end >= len(text):
        return token
    while end > command.end and text[end].isspace():
        end -= 1
    line = command.line + text.count("\n", command.end + 1, end + 1)
    return Token(token.token_type, token.text, line, token.col, token.start, end, token.comments)


def string_tokens_of(dialect: str) -> Callable[[Token], list[Token]]:
    """:func:`string_tokens` with ``dialect``'s tokenizer and no prefix; a string that cannot be read stays one."""

    def reopen(token: Token) -> list[Token]:
        return string_tokens(token, tokenizer(dialect), prefix="") or [token]

    return reopen
