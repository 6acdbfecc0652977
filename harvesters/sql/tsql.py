"""T-SQL token fixes applied before sqlglot parses a batch.

sqlglot 30's T-SQL grammar rejects some common forms: `OUTPUT ... INTO dbo.t (cols)` (it accepts only a
bare name after INTO), `DELETE FROM t [OUTPUT ...] [FROM t JOIN x ...] WHERE ...`, `DELETE|UPDATE|INSERT
TOP (n)`, compound assignment `SET col += x`, `EXEC (N'...')` and `BULK INSERT t FROM 'file'`.
Subclassing the parser is not an option (the compiled `sqlglot[c]` build forbids Python subclasses of its
classes), so these fixes rewrite the token list instead: the OUTPUT clause is cut out (it only returns
rows, except for its INTO table, which is reported separately), TOP (n) [PERCENT] is dropped, `col += x`
becomes `col = x`, the first FROM of a double-FROM DELETE is dropped (giving `DELETE t FROM t JOIN x`,
which sqlglot reads as a multi-table delete whose target is `t`), EXEC's N'' literal becomes a plain
string, and BULK INSERT keeps only `INSERT t`.
"""

from __future__ import annotations

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
# Tokens without which a batch needs no fix.
_TRIGGERS = _DML | {TokenType.SET, TokenType.EXECUTE}
# Operators of T-SQL compound assignment (`SET col += 1`), which sqlglot reads as a binary operator
# missing its right side; dropping the operator keeps `SET col = 1`, the same lineage.
_COMPOUND = {
    TokenType.PLUS, TokenType.DASH, TokenType.STAR, TokenType.SLASH, TokenType.MOD, TokenType.AMP,
    TokenType.PIPE, TokenType.CARET,
}


def _skip_name(tokens: list[Token], i: int) -> int:
    """Index just after a (possibly dotted, `#`/`@`-prefixed) object name starting at `i`."""
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


def _skip_group(tokens: list[Token], i: int) -> int:
    """Index just after the balanced parenthesised group opening at `i` (or `i` if none opens there)."""
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


def fix_tokens(tokens: list[Token]) -> tuple[list[Token], list[tuple[int, int]]]:
    """Rewrite a T-SQL batch's tokens into a form sqlglot parses.

    Returns the new token list and the source spans `(start, end)` (inclusive character offsets) of the
    `OUTPUT ... INTO <table>` targets that were cut out, for the caller to report as outputs.
    """
    kinds = [token.token_type for token in tokens]
    if not (_TRIGGERS & set(kinds)):
        return tokens, []
    out: list[Token] = []
    into_spans: list[tuple[int, int]] = []
    depth = 0
    statement: TokenType | None = None
    i, n = 0, len(tokens)
    while i < n:
        kind = kinds[i]
        if depth == 0 and kind in _STATEMENT_START:
            statement = kind
        if kind == TokenType.EXECUTE and i + 2 < n and kinds[i + 1] == TokenType.L_PAREN:
            # EXEC (N'...'): sqlglot reads EXEC ('...') as dynamic SQL but rejects the N'' literal.
            out.append(tokens[i])
            out.append(tokens[i + 1])
            if kinds[i + 2] == TokenType.NATIONAL_STRING:
                t = tokens[i + 2]
                out.append(Token(TokenType.STRING, t.text, t.line, t.col, t.start, t.end, t.comments))
                i += 3
            else:
                i += 2
            depth += 1
            continue
        if depth == 0 and kind == TokenType.VAR and tokens[i].text.upper() == "BULK" and i + 1 < n \
                and kinds[i + 1] == TokenType.INSERT:
            # BULK INSERT t FROM 'file' [WITH (...)]: keep `INSERT t`, a write to t with no table read.
            end = _skip_name(tokens, i + 2)
            out.extend(tokens[i + 1 : end])
            i = end
            if i + 1 < n and kinds[i] == TokenType.FROM and kinds[i + 1] == TokenType.STRING:
                i += 2
                if i < n and kinds[i] == TokenType.WITH:
                    i = _skip_group(tokens, i + 1)
            continue
        if depth == 0 and kind in _DML and i + 1 < n and kinds[i + 1] == TokenType.TOP:
            # DELETE|UPDATE|INSERT TOP (n) [PERCENT]: a row limit, irrelevant to lineage.
            out.append(tokens[i])
            i = _skip_group(tokens, i + 2)
            if i < n and kinds[i] == TokenType.PERCENT:
                i += 1
            if kind == TokenType.DELETE:
                i = _fix_double_from(tokens, kinds, i, out)
            continue
        if depth == 0 and kind == TokenType.DELETE:
            out.append(tokens[i])
            i = _fix_double_from(tokens, kinds, i + 1, out)
            continue
        if depth == 0 and kind == TokenType.RETURNING and statement in _DML:
            i, span = _skip_output(tokens, kinds, i)
            if span:
                into_spans.append(span)
            continue
        if (
            kind in _COMPOUND
            and i + 1 < n
            and kinds[i + 1] == TokenType.EQ
            and tokens[i].end + 1 == tokens[i + 1].start
        ):
            i += 1
            continue
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth = max(depth - 1, 0)
        out.append(tokens[i])
        i += 1
    return out, into_spans


def _fix_double_from(tokens: list[Token], kinds: list[TokenType], i: int, out: list[Token]) -> int:
    """At `DELETE ^FROM t [WITH (hints)] [OUTPUT ...] FROM ...`: drop the first FROM; return next index."""
    if i >= len(tokens) or kinds[i] != TokenType.FROM:
        return i
    j = _skip_name(tokens, i + 1)
    if j < len(tokens) and kinds[j] == TokenType.WITH:
        j = _skip_group(tokens, j + 1)
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
        name_end = _skip_name(tokens, i + 1)
        if name_end > i + 1:
            span = (tokens[i + 1].start, tokens[name_end - 1].end)
        i = _skip_group(tokens, name_end)  # the optional (column, ...) list
    return i, span
