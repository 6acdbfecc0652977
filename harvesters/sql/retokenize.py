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
    # sqlglot gives a string token the start, end and line of its last character
    base = token.end - len(token.text) + 1 - len(prefix)
    first_line = token.line - token.text.count("\n")
    return [Token(t.token_type, t.text, t.line + first_line - 1, t.col, t.start + base, t.end + base, t.comments)
            for t in inner]


def string_tokens_of(dialect: str) -> Callable[[Token], list[Token]]:
    """:func:`string_tokens` with ``dialect``'s tokenizer and no prefix; a string that cannot be read stays one."""

    def reopen(token: Token) -> list[Token]:
        return string_tokens(token, tokenizer(dialect), prefix="") or [token]

    return reopen
