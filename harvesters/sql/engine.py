"""Table-level lineage of SQL text: which tables a statement, or a batch of statements, reads and writes.

`table_lineage()` tokenizes and parses the text with sqlglot's parser for the dialect and walks the syntax
tree: INSERT/UPDATE/DELETE/MERGE/COPY targets (every INTO of a multi-table INSERT ALL/FIRST), SELECT ... INTO,
CREATE/ALTER/DROP/UNDROP/TRUNCATE targets and T-SQL `OUTPUT ... INTO` tables are outputs; every other table
reference (FROM, JOIN, subqueries, CTE bodies, USING, EXISTS/IN, APPLY, LATERAL, LIKE/CLONE sources) is an input,
except CTE names, temp tables (reported apart), table variables, table functions and stages. `ALTER TABLE a SWAP
WITH b` reads and writes both tables. It follows the contract in `shared/sql-lineage-cases/README.md`.
Per-dialect differences live in `harvesters/sql_dialects.py` as data.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.tokens import Token, TokenType

from harvesters.sql.dialects import DIALECTS, DialectRules, rules_for, split_batches
from harvesters.sql.prepared import PreparedCall, prepared_call
from harvesters.sql.remote import REMOTE_CALL, four_parts, inline_remote_queries, remote_table, server_identifier
from harvesters.sql.retokenize import command_string, string_tokens
from harvesters.sql.tsql import KINDS_BEFORE_IF, skip_group, skip_name

__all__ = ["MAX_NESTING", "MAX_SQL_BYTES", "TableLineage", "table_lineage"]

# Texts larger than this are refused with a reason instead of parsed: sqlglot's pure-Python tokenizer and
# parser take 3-10 s per MB of dense SQL (linear), and a harvester must not stall on one generated INSERT.
MAX_SQL_BYTES = 512 * 1024
# Deeper parenthesis nesting is refused before parsing: pure-Python sqlglot hits RecursionError far below
# this anyway, and the compiled sqlglot[c] parser overflows the C stack (segfault) on ~8000 nested
# FROM-subqueries instead of raising.
MAX_NESTING = 256
# sp_executesql inside sp_executesql inside ...: stop unwrapping after this many levels.
_MAX_DYNAMIC_DEPTH = 4


@attrs.frozen
class TableLineage:
    """The tables one SQL text reads and writes.

    `inputs`/`outputs` are fully qualified as far as the defaults allow, sorted, and de-duplicated
    case-insensitively (first spelling kept). `temp_inputs`/`temp_outputs` are the temp tables (`#t`,
    `##t`, TEMPORARY tables) read before this text created them / written by it, named as written without
    brackets or quotes, for a caller that follows temp tables across statements. `statement_types` are the
    kinds of statements in order of first appearance (e.g. ["DELETE", "INSERT"]). `error` is None or a
    short reason ("unparseable: ...", "unsupported statement: ...", "too large: ...", "empty: ...");
    the lineage of the statements that could be read is kept even when it is set.
    """

    inputs: list[str] = attrs.field(factory=list)
    outputs: list[str] = attrs.field(factory=list)
    temp_inputs: list[str] = attrs.field(factory=list)
    temp_outputs: list[str] = attrs.field(factory=list)
    statement_types: list[str] = attrs.field(factory=list)
    error: str | None = None


def table_lineage(
    sql: str,
    dialect: str,
    default_database: str | None = None,
    default_schema: str | None = None,
    *,
    temp_tables: Iterable[str] = (),
    max_bytes: int = MAX_SQL_BYTES,
    quote_dotted_parts: bool = False,
) -> TableLineage:
    """Return the tables `sql` reads and writes, as a `TableLineage`. Never raises.

    `dialect` is a sqlglot dialect name, or one of the aliases in `harvesters.sql.dialects` ("ansi" =
    sqlglot's default dialect, "sparksql", "mssql", ...). `default_database`/`default_schema` qualify
    unqualified names (T-SQL also assumes schema dbo once a database is known); `USE` statements in the text
    change them for the rest of it. Defaults are read like identifiers of the dialect: a Snowflake default is
    upper-cased unless written quoted (`'"Mixed"'`). `temp_tables` names temp objects that earlier
    statements of the same session created (e.g. Snowflake TEMPORARY tables) so they are reported as temp.
    Texts over `max_bytes` (UTF-8) are refused with an error. Names carry no quotes or brackets, unless
    `quote_dotted_parts` (a caller that splits names back into parts): then a part holding a dot is quoted as the
    dialect quotes it (`DialectRules.dotted_part_quotes`: T-SQL `[10.0.0.5].db.dbo.t`).
    """
    try:
        if not isinstance(sql, str):
            return TableLineage(error=f"empty: no SQL text ({type(sql).__name__})")
        if not sql.strip():
            return TableLineage(error="empty: no SQL text")
        if len(sql) > max_bytes // 4:
            size = len(sql.encode("utf-8", "replace"))
            if size > max_bytes:
                return TableLineage(error=f"too large: {size} bytes > {max_bytes}")
        rules = rules_for(dialect)
        analyzer = _Analyzer(rules or DIALECTS["ansi"], default_database, default_schema, temp_tables,
                             quote_dotted_parts)
        if rules is None:
            analyzer.errors.append(f"unknown dialect: {dialect!r} (read as ansi)")
        return analyzer.run(sql)
    except Exception as exc:  # noqa: BLE001 - the one public boundary: log text must never crash a harvester
        return TableLineage(error=f"internal error: {type(exc).__name__}: {exc}"[:200])


class _QuietCommandFallback(logging.Filter):
    """Drops sqlglot's "Falling back to parsing as a 'Command'" warnings (one per odd statement in a log
    of thousands); `table_lineage` reports such statements in `.error` instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


_sqlglot_logger = logging.getLogger("sqlglot")
if not any(isinstance(f, _QuietCommandFallback) for f in _sqlglot_logger.filters):
    _sqlglot_logger.addFilter(_QuietCommandFallback())


@attrs.frozen
class _Name:
    display: str  # qualified, case-normalised: what inputs/outputs report
    key: str  # display.casefold(): identity for de-duplication and "created in this text"
    written: str  # as written without quotes/brackets: what temp_inputs/temp_outputs report
    temp: bool


# Write modes. CREATE marks the table as created by this text, so later reads of it are not inputs.
_CREATE, _WRITE, _DROP = "create", "write", "drop"

# Statement classes that never have run-level lineage -> the statement type reported for them.
_NO_LINEAGE: dict[type[exp.Expr], str] = {
    exp.Set: "SET",
    exp.Declare: "DECLARE",
    exp.Transaction: "BEGIN TRANSACTION",
    exp.Commit: "COMMIT",
    exp.Rollback: "ROLLBACK",
    exp.Describe: "DESCRIBE",
    exp.Show: "SHOW",
    exp.Analyze: "ANALYZE",
    exp.Cache: "CACHE",
    exp.Uncache: "UNCACHE",
    exp.Refresh: "REFRESH",
    exp.Pragma: "PRAGMA",
    exp.Grant: "GRANT",
    exp.Revoke: "REVOKE",
    exp.Comment: "COMMENT",
    exp.Kill: "KILL",
    exp.Put: "PUT",  # Snowflake file transfers to and from stages
    exp.ListStage: "LIST",
}
# Statements sqlglot keeps as an opaque Command whose first keyword says they have no table lineage.
_NO_LINEAGE_COMMANDS = frozenset(
    "ADD BACKUP BEGIN CALL CHECKPOINT CLOSE COMMIT DBCC DEALLOCATE DECLARE DENY DESC DESCRIBE END EXEC EXECUTE "
    "EXPLAIN FETCH GET GO GRANT LIST LS MSCK OPEN OPTIMIZE PREPARE PRINT PUT RAISERROR READTEXT RECONFIGURE "
    "REMOVE RESET RESTORE RETURN REVERT REVOKE RM ROLLBACK SAVE SET SETUSER SHOW SHUTDOWN THROW UNSET "
    "UPDATETEXT USE VACUUM WAITFOR WHILE WRITETEXT".split()
) | {"UPDATE STATISTICS", "COPY FILES"}
# Control-of-flow words sqlglot reads as a bare column (`RETURN`, `BREAK`, `THROW;`) or a column with an alias
# (`GOTO done`, `RETURN @code`): statements without lineage.
_CONTROL_WORDS = frozenset({
    "RETURN", "BREAK", "CONTINUE", "GOTO", "THROW", "LEAVE", "ITERATE", "OPEN", "CLOSE", "DEALLOCATE",
})
# Abbreviations reported under their full statement type.
_KEYWORD_NAMES = {"EXEC": "EXECUTE", "DESC": "DESCRIBE"}
# CREATE/DROP kinds whose target is a dataset (others: FUNCTION, PROCEDURE, INDEX, SCHEMA, STAGE, ...).
_DATASET_KINDS = frozenset({"TABLE", "VIEW", "EXTERNAL TABLE", "MATERIALIZED VIEW", "DYNAMIC TABLE"})
# ... of them, those holding rows of their own (not a view's query)
_TABLE_KINDS = frozenset({"TABLE", "EXTERNAL TABLE", "DYNAMIC TABLE"})
# How far before a created object's name its CREATE keyword is looked for (see _Analyzer._create_words).
_CREATE_HEAD_CHARS = 200
_CREATE_WORD = re.compile(r"\bCREATE\b", re.IGNORECASE)
_QUERIES = (exp.Select, exp.SetOperation, exp.Subquery, exp.Values)
_OUTPUT_WORD = re.compile(r"\bOUTPUT\b", re.IGNORECASE)
_TABLE_LITERAL = re.compile(r"\bTABLE\s*\(\s*'", re.IGNORECASE)
# Subtrees whose tables are not read: foreign-key REFERENCES targets, a temporal table's HISTORY_TABLE (attached or
# created empty, nothing read from it).
_PRUNE = (exp.Reference, exp.WithSystemVersioningProperty)
# T-SQL definitions that run to the end of their batch: first keywords -> statement type.
_DEFINITIONS = {"PROC": "PROCEDURE", "PROCEDURE": "PROCEDURE", "FUNCTION": "FUNCTION", "TRIGGER": "TRIGGER"}


class _Analyzer:
    """Accumulates the lineage of one text, statement by statement."""

    def __init__(
        self,
        rules: DialectRules,
        database: str | None,
        schema: str | None,
        temp_tables: Iterable[str],
        quote_dotted_parts: bool = False,
    ) -> None:
        self.rules = rules
        self.part_quotes = rules.dotted_part_quotes if quote_dotted_parts else None
        self.dialect = Dialect.get_or_raise(rules.sqlglot)
        self.database = self._default(database)
        self.schema = self._default(schema)
        self.inputs: dict[str, str] = {}
        self.outputs: dict[str, str] = {}
        self.temp_inputs: dict[str, str] = {}
        self.temp_outputs: dict[str, str] = {}
        self.created: set[str] = set()
        written = {_strip_quotes(t).casefold() for t in temp_tables}
        # a temp table named as the caller knows it (`tt`) is also the one a qualified reference names (`db.sch.tt`):
        # reported under the caller's name, which the caller resolves
        self.temp_aliases = {".".join(self._qualify(w.split("."))).casefold(): w for w in written}
        self.temp_keys: set[str] = written | set(self.temp_aliases)
        self.types: dict[str, None] = {}
        #: IF / WHILE conditions without a statement: the type of a text that is only that (Extended Events report
        #: an IF's or a WHILE's condition as a statement of its own; it reads the tables it names)
        self.headers: dict[str, None] = {}
        self.errors: list[str] = []
        self.depth = 0
        self.text = ""  # the batch being read (statement nodes point into it)
        self.has_output = False  # it has an OUTPUT clause (T-SQL's composable DML needs one)
        self.has_table_literal = False  # it has a Snowflake table literal, TABLE('...')
        #: the linked server an `EXEC ('...') AT srv` batch being read runs on: its names are four-part names on it
        self.remote: exp.Identifier | None = None

    # ---- driving -------------------------------------------------------------------------------------

    def run(self, sql: str) -> TableLineage:
        call = prepared_call(sql) if self.rules.prepared_calls else None
        if call is not None:
            self._prepared(call)
        else:
            batches = split_batches(sql, self.rules.batch_separator)
            for batch in batches:
                self._batch(batch)
        errors = list(dict.fromkeys(self.errors))
        if not self.types:
            self.types = self.headers
        if not errors and not self.types:
            errors = ["empty: no SQL statement"]
        error = None
        if errors:
            error = errors[0] + (f" (+{len(errors) - 1} more)" if len(errors) > 1 else "")
        return TableLineage(
            inputs=_sorted(self.inputs.values()),
            outputs=_sorted(self.outputs.values()),
            temp_inputs=_sorted(self.temp_inputs.values()),
            temp_outputs=_sorted(self.temp_outputs.values()),
            statement_types=list(self.types),
            error=error,
        )

    def _prepared(self, call: PreparedCall) -> None:
        """A driver's prepared/cursor call (harvesters/sql/prepared.py): the statement it runs, like
        sp_executesql's; a prepare-only call has no lineage of its own, nor has `sp_execute <handle>` here (the
        harvester resolves the handle through the session)."""
        if call.runs and call.sql is not None:
            self._batch(call.sql)
        elif call.sql is not None:
            self.types["PREPARE"] = None
        else:
            self.types["EXECUTE PREPARED" if call.runs else "EXECUTE"] = None

    def _batch(self, text: str) -> None:
        if self.rules.text_fix:
            text = self.rules.text_fix(text)
        # dynamic SQL reads an inner batch in the middle of this one; the word tests are made once per batch (per
        # statement they made a long script quadratic)
        outer = self.text, self.has_output, self.has_table_literal
        self.text = text
        self.has_output = _OUTPUT_WORD.search(text) is not None
        self.has_table_literal = self.rules.table_literals and _TABLE_LITERAL.search(text) is not None
        try:
            self._read_batch(text)
        finally:
            self.text, self.has_output, self.has_table_literal = outer

    def _read_batch(self, text: str) -> None:
        try:
            tokens = self.dialect.tokenize(text)
        except (SqlglotError, RecursionError) as exc:
            self.errors.append(_reason("unparseable", exc))
            return
        if not tokens:
            return
        depth = deepest = 0
        for token in tokens:
            if token.token_type == TokenType.L_PAREN:
                depth += 1
                deepest = max(deepest, depth)
            elif token.token_type == TokenType.R_PAREN:
                depth -= 1
        if deepest > MAX_NESTING:
            self.errors.append(f"unparseable: nested too deeply ({deepest} levels of parentheses)")
            return
        definition = self._definition(tokens)
        if definition:
            self.types[definition] = None
            return
        spans: list[tuple[int, int]] = []
        if self.rules.clauses_last:
            tokens = _clauses_last(tokens, self.rules.clauses_last, text)
        if self.rules.commands_end_at_new_statements:  # (first: the token fix reads what a command swallowed)
            tokens = _reopen_swallowed(tokens, self.dialect, text)
        if self.rules.token_fix and (self.rules.token_fix_when is None or self.rules.token_fix_when.search(text)):
            tokens, spans = self.rules.token_fix(tokens, text)
        upper = text.upper() if self.rules.ignored_create_words or self.rules.form_fixes else ""
        # (after the token fix: a BigQuery block's first statement is tokens only once it has read them again; the
        # words looked for in the text first: the walk over every token cost BigQuery texts 2%)
        if any(word in upper for word in self.rules.ignored_create_words):
            tokens = _drop_create_words(tokens, self.rules.ignored_create_words)
        for form in self.rules.form_fixes:
            if form.applies(text, upper):
                tokens = form.rewrite(tokens, text)
        # text another server runs, located there once per parsed statement, its nested statements with it (see
        # harvesters/sql/remote.py; the word test first: most texts call no other server)
        remote = self.rules.remote_queries and REMOTE_CALL.search(text) is not None
        for piece, command in _opaque_pieces(tokens, self.rules.opaque_commands):
            if command:  # BACKUP / DBCC / CHECKPOINT ...: sqlglot misreads these; no lineage
                self.types[command] = None
                continue
            for statement in self._parse(piece, text):
                self._statement(inline_remote_queries(statement, self.dialect) if remote else statement)
        for start, end in spans:  # T-SQL OUTPUT ... INTO targets cut out by the token fix
            name = self._name(self._to_table(text[start : end + 1]))
            if name:
                self._write(name, _WRITE)

    def _definition(self, tokens: list[Token]) -> str | None:
        """`CREATE [OR ALTER] PROCEDURE ...` starting a T-SQL batch: its body runs to the batch end."""
        if not self.rules.definition_runs_to_batch_end:
            return None
        words = [t.text.upper() for t in tokens[:4]]
        if words[:1] not in (["CREATE"], ["ALTER"]):
            return None
        rest = words[3:4] if words[1:3] == ["OR", "ALTER"] else words[1:2]
        kind = _DEFINITIONS.get(rest[0]) if rest else None
        return f"{words[0]} {kind}" if kind else None

    def _parse(self, tokens: list[Token], text: str) -> list[exp.Expr]:
        """Parse a batch; on failure, parse its statements one by one: a bad statement costs only itself."""
        try:
            parsed = [e for e in self.dialect.parser().parse(tokens, text) if e is not None]
            if not (self.rules.commands_end_at_new_statements and any(map(_holds_command, parsed))):
                return parsed
            # an opaque command may have swallowed the statements after it: its `;`-separated piece is read again,
            # where _parse_chunk ends the command at the next line opening a statement (the other pieces keep their
            # parse: one per piece, as sqlglot's parser splits them, unless a `;` with comments made it split more)
            chunks = list(_semicolon_chunks(tokens))
            if len(chunks) != len(parsed):
                return [e for chunk in chunks for e in self._parse_chunk(chunk, text)]
            return [e for node, chunk in zip(parsed, chunks)
                    for e in (self._parse_chunk(chunk, text) if _holds_command(node) else [node])]
        except (SqlglotError, RecursionError):
            pass
        statements: list[exp.Expr] = []
        for chunk in _segments(tokens):
            statements.extend(self._parse_chunk(chunk, text))
        return statements

    def _parse_chunk(self, chunk: list[Token], text: str) -> list[exp.Expr]:
        """Parse one `;`-free run of tokens that may hold several statements (T-SQL needs no `;`)."""
        statements: list[exp.Expr] = []
        while chunk:
            step = self._window_step(chunk, text)
            if step:  # the first statement ends there, as parsing the whole chunk would have said
                statements.extend(self._parse_chunk(chunk[:step], text))
                chunk = chunk[step:]
                continue
            try:
                parsed = [e for e in self.dialect.parser().parse(chunk, text) if e is not None]
                cut = _command_end(chunk) if self.rules.commands_end_at_new_statements and len(parsed) == 1 \
                    and isinstance(parsed[0], exp.Command) else 0
                if cut:  # the command swallowed the statements after it: read them on their own
                    statements.extend(self._parse_chunk(chunk[:cut], text))
                    chunk = chunk[cut:]
                    continue
                statements.extend(parsed)
                return statements
            except RecursionError:
                self.errors.append("unparseable: nested too deeply")
                return statements
            except ParseError as exc:
                split = _split_point(chunk, exc, self.dialect, self.rules.commands_end_at_new_statements)
                if split:
                    statements.extend(self._parse_chunk(chunk[:split], text))
                    chunk = chunk[split:]
                    continue
                head = chunk[0].text.upper()
                cut = 0
                if self.rules.commands_end_at_new_statements and head in _NO_LINEAGE_COMMANDS:
                    # `WHILE @i < 10` (then `BEGIN` on the next line): a header without lineage, then the rest; a
                    # header alone is one when it holds no statement keyword (no query in its condition)
                    cut = _command_end(chunk) or (
                        len(chunk) if not any(t.token_type in _COMMAND_ENDS for t in chunk[1:]) else 0)
                if cut:
                    statements.append(exp.Command(this=head))
                    chunk = chunk[cut:]
                    continue
                statements.extend(self._fallback(chunk, text, exc))
                return statements
            except SqlglotError as exc:
                self.errors.append(_reason("unparseable", exc))
                return statements
        return statements

    def _window_step(self, chunk: list[Token], text: str) -> int:
        """Where the chunk's first statement ends, read from a window of its first tokens (0: not known that way).

        Why: :meth:`_parse_chunk` learns where a `;`-less T-SQL statement ends by parsing the whole rest of the
        chunk (the parser then fails at the second statement, or takes the rest for one opaque command), once per
        statement: quadratic (2,000 `SET @x = @x + 1` lines took 7 s, 4,000 took 29 s). The window holds about four
        statements; what the parser says about the first one there is what it says with the whole chunk (it reads
        left to right), unless the window's end is near: then the whole chunk is parsed, as before."""
        if not self.rules.commands_end_at_new_statements or len(chunk) < 2 * _WINDOW_MIN:
            return 0
        guess = _command_end(chunk)  # the next line opening a statement: the first statement's likely end
        size = max(_WINDOW_MIN, 4 * guess)
        if not guess or size >= len(chunk):
            return 0
        window, limit = chunk[:size], size - _WINDOW_MARGIN
        try:
            parsed = [e for e in self.dialect.parser().parse(window, text) if e is not None]
        except ParseError as exc:
            split = _split_point(chunk, exc, self.dialect, True)
            return split if split < limit else 0
        except (SqlglotError, RecursionError):
            return 0
        if len(parsed) == 1 and isinstance(parsed[0], exp.Command):  # one command swallowed the window
            cut = _command_end(window)
            return cut if cut < limit else 0
        return 0

    def _fallback(self, chunk: list[Token], text: str, exc: SqlglotError) -> list[exp.Expr]:
        """Re-read a statement the dialect's parser rejected with the dialect's fallbacks, if any."""
        keyword = _KEYWORD_NAMES.get(chunk[0].text.upper(), chunk[0].text.upper())
        if keyword == "COPY" and len(chunk) > 1 and chunk[1].text.upper() == "FILES":
            keyword = "COPY FILES"  # Snowflake: files from stage to stage, no table
        if keyword in _NO_LINEAGE_COMMANDS and keyword != "WHILE":  # WAITFOR DELAY ..., odd SET options: no lineage
            # (a WHILE here still holds its loop's statements: they are not dropped silently)
            return [exp.Command(this=keyword)]
        source = text[chunk[0].start : chunk[-1].end + 1]
        rest = text[chunk[1].start : chunk[-1].end + 1] if len(chunk) > 1 else ""
        if keyword in ("CREATE", "DROP") and self._is_definition(rest):  # CREATE ROW ACCESS POLICY ...
            return [exp.Command(this=keyword, expression=exp.Literal.string(rest))]
        if keyword == "CREATE" and (after := self._table_shell(chunk, text)):
            return self._parse_chunk(chunk[after:], text) if after < len(chunk) else []
        for name in self.rules.fallbacks:
            try:
                return [e for e in Dialect.get_or_raise(name).parse(source) if e is not None]
            except (SqlglotError, RecursionError):
                continue
        self.errors.append(_reason("unparseable", exc))
        return []

    # ---- statements ----------------------------------------------------------------------------------

    def _statement(self, node: exp.Expr) -> None:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            for cls, candidate in _HANDLERS.items():
                if isinstance(node, cls):
                    handler = candidate
                    break
        if handler is not None:
            handler(self, node)
            return
        kind = next((v for k, v in _NO_LINEAGE.items() if isinstance(node, k)), None)
        if kind is None and isinstance(node, exp.Anonymous) and node.name.upper() in _NO_LINEAGE_COMMANDS:
            kind = node.name.upper()  # T-SQL RAISERROR(...) / RETURN (SELECT ...) read as a bare function call
        kind = kind or _control_word(node)
        if kind and isinstance(node, (exp.Set, exp.Declare, exp.Anonymous)):
            self._lineage(kind, [node])  # `SET @n = (SELECT COUNT(*) FROM t)`: a variable's query reads t
        elif kind:
            self.types[kind] = None
        elif not isinstance(node, (exp.Semicolon, exp.EndStatement)):
            # Not a statement sqlglot models (often a bare expression from garbage text): no type for it.
            self.errors.append(f"unsupported statement: {type(node).__name__.upper()}")

    def _lineage(
        self,
        kind: str | None,
        scopes: Iterable[exp.Expr | None],
        writes: Iterable[tuple[exp.Expr | _Name | None, str]] = (),
        skip: Iterable[exp.Expr | None] = (),
    ) -> None:
        """Record a statement of type `kind`: every table under `scopes` except `skip` is read, then
        `writes` are written."""
        if kind:
            self.types[kind] = None
        scopes = list(scopes)
        skipped = {id(node) for node in skip if node is not None}
        ctes = _ctes(scopes) if self.rules.writes_through_ctes else {}
        if ctes:
            # a write through a CTE goes to its base table, whose reference in the CTE is the target, no read
            writes = [(_through_cte(t, ctes) if isinstance(t, exp.Table) else t, mode) for t, mode in writes]
            skipped.update(id(t) for t, _ in writes if isinstance(t, exp.Table))
        for scope in scopes:
            if scope is None:
                continue
            for table in _read_tables(scope, skipped, self.rules.cte_self_reference_recursive):
                name = self._name(table)
                if name:
                    self._read(name)
            for name in self._function_tables(scope, 0):
                self._read(name)
        for target, mode in writes:
            name = target if isinstance(target, _Name) or target is None else self._name(target)
            if name:
                self._write(name, mode)

    def _query(self, node: exp.Expr) -> None:
        into = next(node.find_all(exp.Into), None)
        writes: list[tuple[exp.Table | _Name | None, str]] = []
        target = into.this if into is not None else None
        if into is not None and isinstance(target, exp.Table):
            name = self._name(target)
            if name and into.args.get("temporary") and not name.temp:
                name = self._as_temp(name)
            writes.append((name, _CREATE))
        writes.extend(self._table_function_writes(node))
        self._lineage("SELECT INTO" if into is not None else "SELECT", [node], writes, [target])

    def _insert(self, node: exp.Insert) -> None:
        target = _unwrap_schema(node.this)
        # Hive's `INSERT OVERWRITE TABLE t PARTITION (...) IF NOT EXISTS` (read as `exists`, see forms.py) may leave the
        # rows in place: not "created by this text"
        mode = _CREATE if node.args.get("overwrite") and not node.args.get("exists") else _WRITE
        # T-SQL's composable DML, `INSERT ... SELECT ... FROM (MERGE t ... OUTPUT ...) AS c`: the inner statement
        # writes its own target (no read) and reads its sources; its OUTPUT rows flow into the INSERT's target
        # (a walk of the INSERT's tree only where the text has an OUTPUT clause, which composable DML needs)
        nested = [n for n in node.find_all(exp.Merge, exp.Update, exp.Delete)
                  if n.find_ancestor(exp.Merge, exp.Update, exp.Delete, exp.Insert) is node] \
            if self.has_output else []
        for statement in nested:
            self._statement(statement)
        writes = [(target, mode)] if isinstance(target, exp.Table) else []
        self._lineage("INSERT", [node], writes, [target, *(n.this for n in nested)])

    def _multitable_insert(self, node: exp.MultitableInserts) -> None:
        """Snowflake/Oracle `INSERT [OVERWRITE] ALL|FIRST [WHEN ... THEN] INTO t1 ... SELECT ... FROM src` and
        Hive `FROM src INSERT ... SELECT ... INSERT ... SELECT ...`: every INTO table is written, the source
        (and the WHEN conditions and VALUES) read."""
        inserts = [e.this if isinstance(e, exp.ConditionalInsert) else e for e in node.expressions]
        inserts = [i for i in inserts if isinstance(i, exp.Insert)]
        targets = [_unwrap_schema(i.this) for i in inserts]
        # sqlglot keeps Hive's per-INSERT OVERWRITE but drops Snowflake's `INSERT OVERWRITE ALL`: read the text
        overwrite_all = self._written_overwrite(targets[0]) if targets else False
        writes: list[tuple[exp.Table | _Name | None, str]] = [
            (t, _CREATE if overwrite_all or i.args.get("overwrite") else _WRITE)
            for i, t in zip(inserts, targets)
            if isinstance(t, exp.Table)
        ]
        self._lineage("INSERT", [node], writes, targets)

    def _written_overwrite(self, target: exp.Expr | None) -> bool:
        """Whether OVERWRITE follows the INSERT keyword nearest before `target` in the batch text."""
        identifier = target.find(exp.Identifier) if target is not None else None
        start = identifier.meta.get("start") if identifier is not None else None
        if not isinstance(start, int) or not 0 < start <= len(self.text):
            return False
        inserts = list(_INSERT_WORD.finditer(self.text, 0, start))
        return bool(inserts and inserts[-1].group(1))

    def _update(self, node: exp.Update) -> None:
        target = node.this
        candidates = _source_tables(node.args.get("from_"), target)
        resolved = self._through_derived(_resolve_target(target, candidates, self.rules.aliased_reference_is_target),
                                         node.args.get("from_"))
        self._lineage("UPDATE", [node], [(resolved, _WRITE)], [target, resolved])

    def _delete(self, node: exp.Delete) -> None:
        # T-SQL `DELETE dbo.t WHERE ...` (no FROM): sqlglot puts the table in `tables` and False in `this`/`using`
        this = node.this if isinstance(node.this, exp.Expr) else None
        using = node.args.get("using")
        sources = [this, *(using if isinstance(using, list) else [])]
        targets = [t for t in (node.args.get("tables") or [this]) if isinstance(t, exp.Expr)]
        candidates = _source_tables(*sources)
        resolved = [self._through_derived(_resolve_target(t, candidates, self.rules.aliased_reference_is_target),
                                          *sources) for t in targets]
        self._lineage("DELETE", [node], [(t, _WRITE) for t in resolved], [*targets, *resolved])

    def _through_derived(self, target: exp.Expr, *sources: exp.Expr | None) -> exp.Expr | None:
        """T-SQL `UPDATE d ... FROM (SELECT TOP 1 ... FROM dbo.q ...) AS d` / `DELETE d FROM (...) AS d`: a write to
        a derived table changes its one base table, as a write through a CTE does (see _through_cte)."""
        if not self.rules.writes_through_ctes or not isinstance(target, exp.Table):
            return target
        derived = _derived_tables(*sources)
        return _through_cte(target, derived) if derived else target

    def _merge(self, node: exp.Merge) -> None:
        self._lineage("MERGE", [node], [(node.this, _WRITE)], [node.this])

    def _create(self, node: exp.Create) -> None:
        kind = str(node.args.get("kind") or "").upper()
        target = _unwrap_schema(node.this)
        if kind not in _DATASET_KINDS or not isinstance(target, exp.Table):
            self.types[f"CREATE {kind}".strip()] = None
            if kind in ("DATABASE", "SCHEMA") and self.rules.create_sets_current and isinstance(target, exp.Table):
                self._created_current(kind, target)
            body = node.args.get("expression")
            if isinstance(body, exp.Block) and body.expressions and isinstance(body.expressions[0], _BODY_STRINGS):
                # `CREATE PROCEDURE ... AS $$ <body> $$;` then more statements: sqlglot reads those into the
                # definition's block, after its body string; they run now, the body only when called
                for statement in body.expressions[1:]:
                    if statement is not None:
                        self._statement(statement)
            return
        name = self._name(target)
        properties = node.args.get("properties")
        temporary = self.rules.temporary_properties
        if name and properties and any(_is_temporary(p, temporary) for p in properties.expressions):
            name = self._as_temp(name)
        words = self._create_words(target)
        # IF NOT EXISTS may leave an existing table (and its rows) in place: not "created by this text"; so does
        # Snowflake's CREATE OR ALTER TABLE (it changes the columns, keeps the rows; sqlglot reads it as OR REPLACE).
        altered = kind in _TABLE_KINDS and words[:2] == ["OR", "ALTER"]
        mode = _WRITE if node.args.get("exists") and not node.args.get("replace") or altered else _CREATE
        # ClickHouse `CREATE MATERIALIZED VIEW mv TO t AS SELECT ...`: the view's rows are written into t
        to_tables = [p.this for p in properties.expressions if isinstance(p, exp.ToTableProperty)] if properties else []
        writes = [(name, mode), *((t, _WRITE) for t in to_tables)]
        # a RECURSIVE view's body reads the view itself (its rows so far), which is no input
        own = self._tables_named(node.args.get("expression"), name) if name and "RECURSIVE" in words else []
        self._lineage(f"CREATE {kind}", [node], writes, [target, *to_tables, *own])

    def _created_current(self, kind: str, target: exp.Table) -> None:
        """Snowflake: a created database (then its PUBLIC schema) or schema becomes the current one."""
        parts = [self._ident(p) for p in target.parts if isinstance(p, exp.Identifier)]
        if kind == "DATABASE" and len(parts) == 1:
            self._use_database(parts[0])
        elif kind == "SCHEMA" and parts:
            if len(parts) >= 2:
                self.database = parts[-2]
            self.schema = parts[-1]

    def _create_words(self, target: exp.Expr) -> list[str]:
        """The words between CREATE and the created object's name in the text, upper-cased (`OR ALTER`,
        `OR REPLACE RECURSIVE VIEW`): sqlglot's tree keeps neither OR ALTER (read as OR REPLACE) nor RECURSIVE (a word
        dropped before parsing, see DialectRules.ignored_create_words). Looked for just before the name."""
        identifier = target.find(exp.Identifier)
        start = identifier.meta.get("start") if identifier is not None else None
        if not isinstance(start, int) or not 0 < start <= len(self.text):
            return []
        head = self.text[max(0, start - _CREATE_HEAD_CHARS) : start]
        creates = list(_CREATE_WORD.finditer(head))
        return [w.upper() for w in _WORDS.findall(head, creates[-1].end())] if creates else []

    def _tables_named(self, scope: exp.Expr | None, name: _Name) -> list[exp.Table]:
        """The table references under `scope` that name the table `name`."""
        if scope is None:
            return []
        return [t for t in scope.find_all(exp.Table) if (n := self._name(t)) is not None and n.key == name.key]

    def _drop(self, node: exp.Drop) -> None:
        kind = str(node.args.get("kind") or "").upper()
        tables = node.args.get("tables") or [node.this]
        writes = [(t, _DROP) for t in tables] if kind in _DATASET_KINDS else []
        self._lineage(f"DROP {kind}".strip(), [], writes)

    def _truncate(self, node: exp.TruncateTable) -> None:
        self._lineage("TRUNCATE", [], [(t, _WRITE) for t in node.expressions])

    def _alter(self, node: exp.Alter) -> None:
        kind = str(node.args.get("kind") or "").upper()
        if kind not in _DATASET_KINDS:
            self.types[f"ALTER {kind}".strip()] = None
            return
        actions = node.args.get("actions") or []
        renames = [a.this for a in actions if isinstance(a, exp.AlterRename)]
        swaps = [a.this for a in actions if isinstance(a, exp.SwapTable)]
        if renames:  # ALTER TABLE a RENAME TO b: b holds a's rows
            self._lineage(f"ALTER {kind}", [node.this], [(self._renamed(node.this, t), _WRITE) for t in renames])
        elif swaps:  # Snowflake ALTER TABLE a SWAP WITH b: each holds the other's rows afterwards
            tables = [node.this, *swaps]
            self._lineage(f"ALTER {kind}", tables, [(t, _WRITE) for t in tables])
        else:  # ALTER VIEW v [(c1, ...)] AS <query>: the view's new query is read
            queries = [a for a in actions if isinstance(a, exp.Query)]
            self._lineage(f"ALTER {kind}", queries, [(_unwrap_schema(node.this), _WRITE)])

    def _renamed(self, old: exp.Expr | None, new: exp.Expr | None) -> exp.Expr | None:
        """The table ``ALTER ... old RENAME TO new`` makes: where a rename keeps the schema
        (DialectRules.rename_keeps_schema), an unqualified ``new`` takes ``old``'s schema and database."""
        if not (self.rules.rename_keeps_schema and isinstance(old, exp.Table) and isinstance(new, exp.Table)) \
                or new.args.get("db") or not old.args.get("db"):
            return new
        qualified = new.copy()
        qualified.set("db", old.args["db"].copy())
        if old.args.get("catalog"):
            qualified.set("catalog", old.args["catalog"].copy())
        return qualified

    def _copy(self, node: exp.Copy) -> None:
        loading = bool(node.args.get("kind"))  # COPY INTO t FROM ...; False: COPY t TO ...
        # a stage or URL is no dataset, even written in double quotes (an identifier to the parser)
        files = [f for f in node.args.get("files") or [] if not _is_url(f)]
        target = _unwrap_schema(node.this)  # COPY INTO t (a, b) FROM ...
        if _is_url(target):
            target = None
        if loading:
            self._lineage("COPY", files, [(target, _WRITE)])
        else:
            self._lineage("COPY", [*files, target])

    def _undrop(self, node: exp.Undrop) -> None:
        """Snowflake UNDROP TABLE t: t comes back (with its rows) like a created table."""
        kind = str(node.args.get("kind") or "").upper()
        writes = [(node.this, _WRITE)] if kind in _DATASET_KINDS else []
        self._lineage(f"UNDROP {kind}".strip(), [], writes)

    def _export(self, node: exp.Export) -> None:
        """BigQuery `EXPORT DATA [WITH CONNECTION c] OPTIONS (...) AS <query>`: the query's tables are read; the files
        written are no dataset, nor is the connection."""
        self._lineage("EXPORT DATA", [node.this])

    def _load(self, node: exp.LoadData) -> None:
        mode = _CREATE if node.args.get("overwrite") else _WRITE
        self._lineage("LOAD DATA", [], [(node.this, mode)])

    def _use(self, node: exp.Use) -> None:
        self.types["USE"] = None
        kind = str(node.args.get("kind") or "").upper()
        # (Snowflake USE DATABASE IDENTIFIER('d') names the database by a string)
        table = self._identified(node.this) if isinstance(node.this, exp.Table) else None
        if kind not in ("", "DATABASE", "SCHEMA", "CATALOG") or table is None:
            return  # USE ROLE / WAREHOUSE / SECONDARY ROLES
        parts = [self._ident(p) for p in table.parts if isinstance(p, exp.Identifier)]
        if len(parts) >= 2:
            self.database, self.schema = parts[-2], parts[-1]
        elif parts and (kind == "CATALOG" or kind == "DATABASE" and not self.rules.database_is_schema
                        or not kind and self.rules.use_target == "database"):
            self._use_database(parts[0])
        elif parts:
            self.schema = parts[0]

    def _use_database(self, database: str) -> None:
        self.database = database
        if self.rules.use_database_resets_schema:
            self.schema = self.rules.schema_after_use_database

    def _execute(self, node: exp.Execute) -> None:
        """EXEC proc: unknown body, no lineage. EXEC sp_executesql N'...' / EXEC ('...'): the inner text. EXEC
        sp_rename of a table: see :meth:`_sp_rename`."""
        procedure = node.this
        if not isinstance(node, exp.ExecuteSql) and isinstance(procedure, exp.Table) \
                and procedure.name.lower() == "sp_rename" and self._sp_rename(node.expressions):
            return
        database = None
        if isinstance(node, exp.ExecuteSql):
            first = node.expressions[0] if node.expressions else None
            if isinstance(first, exp.EQ) and first.this.name.lower() == "stmt":  # @stmt = N'...' (named)
                first = first.expression
            # `EXEC Sales.sys.sp_executesql N'...'` (`Sales..sp_executesql`) runs the text in that database
            procedure = node.this
            if isinstance(procedure, exp.Table) and isinstance(procedure.args.get("catalog"), exp.Identifier):
                database = self._ident(procedure.args["catalog"])
        else:
            first = node.this.this if isinstance(node.this, exp.Subquery) else None
            if first is not None and node.this.alias.upper() == "AT":  # `EXEC ('...') AT srv`: run by srv
                remote = server_identifier(node.expressions[0]) if len(node.expressions) == 1 else None
                if remote is None or remote.name.upper() == "DATA_SOURCE":  # `AT DATA_SOURCE ds`: no SQL Server
                    self.types["EXECUTE"] = None
                    return
                self._dynamic(_literal_text(first), remote=remote)
                return
        self._dynamic(_literal_text(first), database)

    def _sp_rename(self, arguments: list[exp.Expr]) -> bool:
        """T-SQL ``EXEC sp_rename 's.old', 'new' [, 'OBJECT']`` (dbt-sqlserver's swap of ``model__dbt_tmp`` onto its
        model, table swaps of loaders): the new name, in the old one's schema, holds the old table's rows. A
        column's, an index's (another ``@objtype``) or a three-part name without ``'OBJECT'`` (``t.column``) is no
        table's: False, an EXECUTE as before."""
        named: dict[str | int, str] = {}
        for position, argument in enumerate(arguments):
            key: str | int = position
            if isinstance(argument, exp.EQ) and isinstance(argument.this, exp.Parameter):
                key, argument = argument.this.name.lower(), argument.expression
            if isinstance(argument, exp.National) or (isinstance(argument, exp.Literal) and argument.is_string):
                named[key] = argument.name
        old, new = named.get("objname", named.get(0)), named.get("newname", named.get(1))
        kind = named.get("objtype", named.get(2))
        if old is None or new is None or (kind is not None and kind.strip().upper() != "OBJECT"):
            return False
        source, renamed = self._to_table(old), self._to_table(new)
        if source is None or renamed is None or len(renamed.parts) != 1 \
                or (len(source.parts) > 2 and kind is None):
            return False
        target = source.copy()
        target.set("this", renamed.this)
        self._lineage("RENAME", [source], [(target, _WRITE)])
        return True

    def _dynamic(self, inner: str | None, database: str | None = None, remote: exp.Identifier | None = None
                 ) -> None:
        """Dynamic SQL given as a literal (EXEC ('...'), sp_executesql, Snowflake EXECUTE IMMEDIATE '...'): the inner
        text is read as a batch of its own (in ``database`` when given; on linked server ``remote``, whose defaults
        are not known here, when given); without a literal, or nested too deep, it is an EXECUTE."""
        if inner is None or self.depth >= _MAX_DYNAMIC_DEPTH:
            self.types["EXECUTE"] = None
            return
        saved = self.database, self.schema, self.remote  # USE inside dynamic SQL ends with it
        if database:
            self._use_database(database)
        if remote is not None:
            self.database = self.schema = None
            self.remote = remote
        self.depth += 1
        try:
            self._batch(inner)
        finally:
            self.depth -= 1
            self.database, self.schema, self.remote = saved

    def _block(self, node: exp.Expr) -> None:
        """IF / WHILE / BEGIN...END: the condition's tables are read, then each inner statement counts."""
        condition = node.this if isinstance(node, (exp.IfBlock, exp.WhileBlock)) else None
        if isinstance(condition, exp.Alias) and condition.alias.upper() in ("COMMIT", "ROLLBACK"):
            # `IF @@TRANCOUNT > 0 COMMIT TRAN`: sqlglot reads COMMIT as the condition's alias and TRAN as a column
            self.types[condition.alias.upper()] = None
            self._lineage(None, [condition.this])
            return
        bodies = [node.args.get(k) for k in ("true", "false", "body")] if condition is not None else [node]
        if condition is not None:
            self._lineage(None, [condition])  # typed by the statements inside
            if not any(_has_statement(body) for body in bodies):
                self.headers["WHILE" if isinstance(node, exp.WhileBlock) else "IF"] = None
        for body in bodies:
            if isinstance(body, exp.Block):
                for statement in body.expressions:
                    if statement is not None:  # (an empty BEGIN ... END, or a header cut from its block)
                        self._statement(statement)
            elif isinstance(body, exp.Expr):
                self._statement(body)

    def _command(self, node: exp.Command) -> None:
        keyword = str(node.this or "").upper()
        keyword = _KEYWORD_NAMES.get(keyword, keyword)
        expression = node.expression
        text = expression.name if isinstance(expression, exp.Literal) else str(expression or "")
        if keyword == "ALTER":
            self._alter_command(text)
        elif keyword == "EXECUTE" and (immediate := _IMMEDIATE.fullmatch(text)):
            quoted, dollar = immediate.groups()
            # (a Snowflake Scripting block in it, DECLARE ... BEGIN ... END, is read as its statements: scripting.py)
            self._dynamic(dollar if dollar is not None else quoted.replace("''", "'"))
        elif keyword == "RENAME" and self._rename_command(text):
            pass
        elif keyword == "UNLOAD" and (unload := _UNLOAD.match(text)):
            # Redshift UNLOAD ('<query>') TO 's3://...': the query's tables are read; the files are no dataset
            self.types[keyword] = None
            self._dynamic(re.sub(r"''|\\'", "'", unload.group(1)))
        elif keyword == "UNLOAD" and (unload := _UNLOAD_QUERY.fullmatch(text)):
            # Athena UNLOAD (<query>) TO 's3://...' [WITH (...)]: the same, the query written as it is
            self.types[keyword] = None
            self._dynamic(unload.group(1))
        elif keyword == "DECLARE" and (cursor := _CURSOR.match(text)):
            self.types["DECLARE"] = None
            self._cursor_query(_CURSOR_OPTIONS.sub("", cursor.group(1)))
        elif keyword in _NO_LINEAGE_COMMANDS or keyword.split(" ")[0] in _NO_LINEAGE_COMMANDS:
            self.types[keyword] = None
        elif keyword in ("CREATE", "DROP") and self._is_definition(text):
            self.types[keyword] = None
        else:
            self.types[keyword] = None
            self.errors.append(f"unsupported statement: {keyword}")

    def _cursor_query(self, query: str) -> None:
        """A T-SQL cursor's query (`DECLARE c CURSOR [options] FOR SELECT ...`): its tables are read when the
        cursor is opened, so they are inputs of this text; the statement stays a DECLARE."""
        try:
            parsed = [e for e in self.dialect.parse(query) if e is not None]
        except (SqlglotError, RecursionError) as exc:
            self.errors.append(_reason("unparseable", exc))
            return
        self._lineage(None, parsed)

    def _table_shell(self, chunk: list[Token], text: str) -> int:
        """`CREATE TABLE t (<columns sqlglot cannot read: ROWGUIDCOL, MASKED WITH (...), inline INDEX ...,
        PRIMARY KEY NONCLUSTERED HASH ...>) [ON fg] [WITH (...)]`: an empty table is created, t is the output and
        nothing is read. Returns the index where the next statement starts (T-SQL: the next line opening one), 0
        (the statement's error stands) when anything in it could read a table: a query, LIKE."""
        if len(chunk) < 4 or chunk[1].token_type != TokenType.TABLE:
            return 0
        columns = skip_name(chunk, 2)  # (#temp, ##global, db.s.t)
        if columns == 2 or columns >= len(chunk) or chunk[columns].token_type != TokenType.L_PAREN:
            return 0
        close = skip_group(chunk, columns)
        after = close - 1 + (_command_end(chunk[close - 1 :]) or len(chunk) - close + 1)
        if any(t.token_type in _READS_IN_CREATE for t in chunk[columns:after]):
            return 0
        name = text[chunk[2].start : chunk[columns - 1].end + 1]
        self._lineage("CREATE TABLE", [], [(self._name(self._to_table(name)), _CREATE)])
        return after

    def _rename_command(self, text: str) -> bool:
        """Synapse/SQL DW `RENAME OBJECT [::] [db.]s.a TO b` (the swap after a CTAS): b, in a's schema, holds a's
        rows; MySQL / Teradata / Exasol `RENAME TABLE a TO b [, c TO d ...]` and Oracle / Exasol `RENAME a TO b`: b
        holds a's rows, named as written. False when the text is none of these forms."""
        if (pairs := _RENAME_TABLES.fullmatch(text)) is not None:
            return self._rename_pairs(pairs.group(1))
        # (OBJECT a whole word: Oracle's `RENAME objects_old TO objects` is a pair)
        match = re.fullmatch(r"\s*OBJECT\b\s*(?:::)?\s*(.+?)\s+TO\s+(\S+)\s*;?\s*", text, re.IGNORECASE | re.DOTALL)
        if match is None:  # Oracle `RENAME a TO b` (a table, a view; a sequence or synonym cannot be told apart here)
            return _RENAME_ONE.fullmatch(text) is not None and self._rename_pairs(text)
        source, new = self._to_table(match.group(1)), self._to_table(match.group(2))
        if source is None or new is None:
            return False
        target = source.copy()
        target.set("this", new.this)
        self._lineage("RENAME", [source], [(target, _WRITE)])
        return True

    def _rename_pairs(self, pairs: str) -> bool:
        """`a TO b [, c TO d ...]`: each new name holds the old one's rows. False when a name is no table's."""
        renames = [(self._to_table(a), self._to_table(b)) for a, b in _RENAME_PAIR.findall(pairs)]
        if not renames or any(a is None or b is None for a, b in renames):
            return False
        self._lineage("RENAME", [a for a, _ in renames], [(b, _WRITE) for _, b in renames])
        return True

    def _is_definition(self, text: str) -> bool:
        """Whether the text after CREATE/DROP names an object kind without lineage (`OR REPLACE MASKING POLICY
        p ...`, `STREAM s ON TABLE t`, `SCHEMA s AUTHORIZATION o`, `COMPUTE POOL p ...`): the first kind word
        decides; a table or view has lineage, and so an error when sqlglot cannot read it; any other kind (a
        schema, a data source, a pool, a model) holds no rows of its own: a definition."""
        for word in _WORDS.findall(text, 0, 200)[:6]:
            word = word.upper()
            if word in ("TABLE", "VIEW"):
                return False
            if word in self.rules.definition_objects:
                return True
        return True

    def _alter_command(self, text: str) -> None:
        """ALTER [ICEBERG|DYNAMIC|EXTERNAL] TABLE t <clause sqlglot does not model>: t is written; EXCHANGE ...
        WITH TABLE s reads s; T-SQL's SWITCH [PARTITION n] TO s moves t's rows into s: t is read, s written. RENAME TO
        b (of those tables, or of a MATERIALIZED VIEW): b holds t's rows, as sqlglot's ALTER TABLE|VIEW ... RENAME."""
        if (renamed := _ALTER_RENAME.fullmatch(text)) is not None:
            kind = "MATERIALIZED VIEW" if renamed.group(1).upper().startswith("MATERIALIZED") else "TABLE"
            old, new = self._to_table(renamed.group(2)), self._to_table(renamed.group(3))
            self._lineage(f"ALTER {kind}", [old], [(self._renamed(old, new), _WRITE)])
            return
        try:
            tokens = self.dialect.tokenize(text)
        except SqlglotError:
            tokens = []
        first = 1 if tokens and tokens[0].text.upper() in ("ICEBERG", "DYNAMIC", "EXTERNAL") else 0
        if len(tokens) > first + 1 and tokens[first].token_type == TokenType.VIEW \
                and not any(t.token_type == TokenType.ALIAS for t in tokens):
            # Snowflake `ALTER VIEW v ADD ROW ACCESS POLICY p ON (c)` and other clauses sqlglot does not model: the
            # view is written, as by the ALTER VIEW clauses it models (a new query, `AS ...`, is no such clause)
            start = first + 1
            while start < len(tokens) and tokens[start].text.upper() in ("IF", "EXISTS"):
                start += 1
            self._lineage("ALTER VIEW", [], [(self._name(self._to_table(_name_text(tokens, start, text))), _WRITE)])
            return
        if len(tokens) <= first or tokens[first].token_type != TokenType.TABLE:
            self.types["ALTER"] = None
            return
        start = first + 1
        while start < len(tokens) and tokens[start].text.upper() in ("IF", "EXISTS", "ONLY"):
            start += 1
        target = self._name(self._to_table(_name_text(tokens, start, text)))
        source = switched_to = None
        for i in range(start, len(tokens) - 2):
            if tokens[i].token_type == TokenType.WITH and tokens[i + 1].token_type == TokenType.TABLE:
                source = self._name(self._to_table(_name_text(tokens, i + 2, text)))
        for i in range(start, len(tokens) - 1):
            if tokens[i].text.upper() == "SWITCH":
                to = next((j for j in range(i + 1, len(tokens) - 1) if tokens[j].text.upper() == "TO"), None)
                if to is not None:
                    switched_to = self._name(self._to_table(_name_text(tokens, to + 1, text)))
                break
        self._lineage("ALTER TABLE", [], [(target, _WRITE), (switched_to, _WRITE)])
        if source:
            self._read(source)
        if switched_to and target:
            self._read(target)

    def _table_function_writes(self, node: exp.Expr) -> list[tuple[exp.Table | _Name | None, str]]:
        """Tables written by dialect functions that move rows between tables named by arguments (DialectRules)."""
        return [(name, _WRITE) for name in self._function_tables(node, 1)]

    def _function_tables(self, node: exp.Expr, side: int) -> Iterator[_Name]:
        """Tables named by the input (`side` 0) or output (1) arguments of the dialect's table functions under
        `node`: a string (`'db.t'`) or a name (ClickHouse `dictGet(db.dict, ...)`)."""
        if side == 0 and self.has_table_literal:  # (else no tree walk)
            for rows in node.find_all(exp.TableFromRows):  # Snowflake's table literal, TABLE('db.s.t'): t is read
                if isinstance(rows.this, exp.Literal) and rows.this.is_string:
                    if (name := self._name(self._to_table(rows.this.name))) is not None:
                        yield name
        if not self.rules.table_functions:
            return
        for call in node.find_all(exp.Anonymous):
            spec = self.rules.table_functions.get(str(call.this).upper())
            args = call.expressions
            for position in spec[side] if spec else ():
                arg = args[position] if position < len(args) else None
                if isinstance(arg, exp.Literal) and arg.is_string:
                    name = self._name(self._to_table(arg.name))
                elif isinstance(arg, exp.Column) and all(isinstance(p, exp.Identifier) for p in arg.parts):
                    name = self._name(self._to_table(".".join(p.sql(self.dialect) for p in arg.parts)))
                else:
                    name = None
                if name:
                    yield name

    # ---- names ---------------------------------------------------------------------------------------

    def _read(self, name: _Name) -> None:
        if name.key in self.created:
            return  # the text made this table itself: reading it is not an input
        if name.temp:
            self.temp_inputs.setdefault(name.key, name.written)
        else:
            self.inputs.setdefault(name.key, name.display)

    def _write(self, name: _Name, mode: str) -> None:
        if name.temp:
            if mode != _DROP:
                self.temp_outputs.setdefault(name.key, name.written)
        else:
            self.outputs.setdefault(name.key, name.display)
        if mode == _CREATE:
            self.created.add(name.key)

    def _as_temp(self, name: _Name) -> _Name:
        """A name declared TEMPORARY by this text: later references to it are temp too."""
        self.temp_keys.update((name.key, name.written.casefold()))
        return attrs.evolve(name, temp=True)

    def _to_table(self, text: str) -> exp.Table | None:
        try:
            return exp.to_table(text, dialect=self.dialect)
        except (SqlglotError, RecursionError, ValueError):
            return None

    def _name(self, table: exp.Expr | None) -> _Name | None:
        """The dataset name of a table reference, or None for table functions, variables and stages."""
        if not isinstance(table, exp.Table):
            return None
        table = self._identified(table)
        if table is None or not isinstance(table.this, (exp.Identifier, exp.Dot)):
            return None
        if self.remote is not None:  # a table of an `EXEC ... AT srv` batch: srv's
            table = remote_table(table, self.remote)
        parts = four_parts(table) if isinstance(table.this, exp.Dot) else table.parts
        if not parts or not all(isinstance(p, exp.Identifier) for p in parts):
            return None
        if len(parts) < 4 and table.args.get("catalog") and not table.args.get("db"):  # `db..t`: empty schema part
            parts = [*parts[:-1], exp.Identifier(this=""), parts[-1]]
        last = parts[-1]
        prefix = "##" if last.args.get("global_") else "#" if last.args.get("temporary") else ""
        if prefix:  # T-SQL #t / ##t: session-scoped, never qualified
            written = prefix + last.name
            return _Name(written, written.casefold(), written, True)
        if self.rules.hash_names_are_temp and len(parts) == 1 and last.name.startswith("#"):  # Redshift #t
            return _Name(last.name, last.name.casefold(), last.name, True)
        if len(parts) == 1 and last.name.casefold() in self.rules.pseudo_tables:  # a trigger's `FROM inserted`
            return None
        if len(parts) == 1 and not last.args.get("quoted") and last.name.casefold() in self.rules.reserved_names:
            # `DELETE FROM table t`: invalid SQL sqlglot reads as a table named `table` (see DialectRules)
            self.errors.append(f"unparseable: {last.name.upper()} is a reserved word, no table's name")
            return None
        if len(parts) == 2 and last.args.get("quoted") and parts[0].name.casefold() in self.rules.path_formats:
            return None  # Spark `parquet.`/data/x``: files read (or written) without a table
        texts = [self._ident(p) for p in parts]
        names = [p.name for p in parts]
        if self.rules.partition_decorator and "$" in names[-1]:  # BigQuery `t$20230101`: a partition of t
            texts[-1], names[-1] = texts[-1].split("$", 1)[0], names[-1].split("$", 1)[0]
        written = ".".join(names)
        display = joined_name(self._qualify(texts), self.part_quotes)
        key = display.casefold()
        temp = key in self.temp_keys or written.casefold() in self.temp_keys
        if temp:
            written = self.temp_aliases.get(key, written)
        return _Name(display, key, written, temp)

    def _identified(self, table: exp.Table) -> exp.Table | None:
        """The table a Snowflake `IDENTIFIER('db.schema.t')` names, None when it holds no string (`IDENTIFIER($t)`:
        known only at run time); any other table is itself."""
        if not isinstance(table.this, exp.DynamicIdentifier):
            return table
        literal = table.this.this
        if not (isinstance(literal, exp.Literal) and literal.is_string):
            return None
        resolved = self._to_table(literal.name)
        return None if resolved is None or isinstance(resolved.this, exp.DynamicIdentifier) else resolved

    def _ident(self, identifier: exp.Expr) -> str:
        text = identifier.name
        if identifier.args.get("quoted") or self.rules.case == "as_written":
            return text
        return text.upper() if self.rules.case == "upper" else text.lower()

    def _qualify(self, parts: list[str]) -> list[str]:
        return qualified_parts(parts, self.rules, self.database, self.schema)

    def _default(self, value: str | None) -> str | None:
        return default_identifier(value, self.rules)


def _literal_text(node: exp.Expr | None) -> str | None:
    """The text of dynamic SQL's literal (``'...'``, ``N'...'``; sqlglot reads ``EXEC ('...')``'s as a name)."""
    if isinstance(node, exp.National) or (isinstance(node, exp.Literal) and node.is_string):
        return node.name
    if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
        return node.name if len(node.parts) == 1 else None
    return None


def qualified_parts(parts: list[str], rules: DialectRules, database: str | None, schema: str | None) -> list[str]:
    """A table name's parts with the defaults filled in as the dialect reads them (``db..t``: the dialect's empty
    schema; a bare name: the default schema, or the implicit one when only the database is known). Shared with
    :mod:`harvesters.sql.columns`, so column lineage names tables exactly as table lineage does."""
    if len(parts) >= 3 and parts[-2] == "":  # db..t
        parts = [*parts[:-2], rules.empty_schema or schema or "", parts[-1]]
    if len(parts) == 1:
        implicit = schema or (rules.implicit_schema if database else None)
        if implicit:
            parts = [implicit, *parts]
    if len(parts) == 2 and database:
        parts = [database, *parts]
    return parts


def joined_name(parts: list[str], quotes: tuple[str, str] | None) -> str:
    """A table's qualified parts as one dotted name; with ``quotes`` (the dialect's
    :attr:`DialectRules.dotted_part_quotes`, when the caller asked for them) a part holding a dot is quoted, so the
    name splits back into the same parts. Shared with :mod:`harvesters.sql.columns`."""
    if quotes is None or not any("." in part for part in parts):
        return ".".join(parts)
    opening, closing = quotes
    return ".".join(opening + part.replace(closing, closing * 2) + closing if "." in part else part
                    for part in parts)


def default_identifier(value: str | None, rules: DialectRules) -> str | None:
    """A default database/schema, read like an identifier of the dialect (quotes keep it exact)."""
    if not value or not value.strip():
        return None
    value = value.strip()
    stripped = _strip_quotes(value)
    if stripped != value or rules.case == "as_written":
        return stripped
    return value.upper() if rules.case == "upper" else value.lower()


# each handler takes the node type it is registered for (hence Any: a dict cannot tie key and value types)
_HANDLERS: dict[type[exp.Expr], Callable[[_Analyzer, Any], None]] = {
    exp.Select: _Analyzer._query,
    exp.SetOperation: _Analyzer._query,
    exp.Subquery: _Analyzer._query,
    exp.Values: _Analyzer._query,
    exp.Insert: _Analyzer._insert,
    exp.MultitableInserts: _Analyzer._multitable_insert,
    exp.Update: _Analyzer._update,
    exp.Delete: _Analyzer._delete,
    exp.Merge: _Analyzer._merge,
    exp.Create: _Analyzer._create,
    exp.Drop: _Analyzer._drop,
    exp.Undrop: _Analyzer._undrop,
    exp.TruncateTable: _Analyzer._truncate,
    exp.Alter: _Analyzer._alter,
    exp.Copy: _Analyzer._copy,
    exp.LoadData: _Analyzer._load,
    exp.Export: _Analyzer._export,
    exp.Use: _Analyzer._use,
    exp.Execute: _Analyzer._execute,
    exp.IfBlock: _Analyzer._block,
    exp.WhileBlock: _Analyzer._block,
    exp.Block: _Analyzer._block,
    exp.Command: _Analyzer._command,
}


def _read_tables(scope: exp.Expr, skipped: set[int], cte_self_recursive: bool) -> Iterator[exp.Table]:
    """Table references under `scope` that are reads: not skipped, not CTE names."""
    tables: list[exp.Table] = []
    cte_names: set[str] = set()
    for node in scope.walk(prune=lambda n: isinstance(n, _PRUNE)):
        if isinstance(node, exp.Table):
            if id(node) not in skipped:
                tables.append(node)
        elif isinstance(node, exp.CTE):
            cte_names.add(node.alias.casefold())
    for table in tables:
        if (
            cte_names
            and not table.args.get("db")
            and not table.args.get("catalog")
            and table.name.casefold() in cte_names
            and _is_cte_reference(table, table.name.casefold(), cte_self_recursive)
        ):
            continue
        yield table


def _is_cte_reference(table: exp.Table, name: str, self_recursive: bool) -> bool:
    """Whether an unqualified table reference names a CTE visible where it stands."""
    child: exp.Expr = table
    node = table.parent
    while node is not None:
        if isinstance(node, exp.With):
            # Inside a WITH only earlier CTEs are visible, and a CTE's own name only if it may recurse.
            recursive = self_recursive or bool(node.args.get("recursive"))
            for cte in node.expressions:
                if cte is child:
                    if recursive and cte.alias.casefold() == name:
                        return True
                    break
                if cte.alias.casefold() == name:
                    return True
        else:
            with_ = node.args.get("with_")
            if isinstance(with_, exp.With) and with_ is not child:
                if any(cte.alias.casefold() == name for cte in with_.expressions):
                    return True
        child, node = node, node.parent
    return False


def _from_list_nodes(*roots: exp.Expr | None) -> Iterator[exp.Expr]:
    """The nodes of FROM/JOIN/USING lists, not inside their subqueries (a subquery itself is one of them)."""
    for root in roots:
        if not isinstance(root, exp.Expr):  # None, or False where sqlglot marks an absent clause
            continue

        def nested(n: exp.Expr, root: exp.Expr = root) -> bool:  # root bound: one per loop iteration
            return isinstance(n, (exp.Subquery, exp.Query)) and n is not root

        yield from root.walk(prune=nested)


def _source_tables(*roots: exp.Expr | None) -> list[exp.Table]:
    """Tables of FROM/JOIN/USING lists (not inside subqueries): where an UPDATE/DELETE alias points."""
    return [node for node in _from_list_nodes(*roots) if isinstance(node, exp.Table)]


def _derived_tables(*roots: exp.Expr | None) -> dict[str, exp.Expr]:
    """The aliased subqueries of FROM/JOIN/USING lists (not inside subqueries): alias (casefolded) -> query."""
    return {node.alias.casefold(): node.this for node in _from_list_nodes(*roots)
            if isinstance(node, exp.Subquery) and node.alias and isinstance(node.this, exp.Query)}


def _ctes(statements: Iterable[exp.Expr | None]) -> dict[str, exp.Expr]:
    """The CTEs of the statements' own WITH: name (casefolded) -> query."""
    found: dict[str, exp.Expr] = {}
    for statement in statements:
        with_ = statement.args.get("with_") if isinstance(statement, exp.Expr) else None
        for cte in with_.expressions if isinstance(with_, exp.With) else []:
            found[cte.alias_or_name.casefold()] = cte.this
    return found


def _through_cte(target: exp.Table, ctes: dict[str, exp.Expr]) -> exp.Table | None:
    """A write to a CTE (T-SQL: `WITH c AS (SELECT ... FROM t) DELETE FROM c`) changes the CTE's one base table,
    through CTEs over CTEs; None when it has several (the server takes the one the changed columns come from,
    which the text alone does not tell). A target that names no CTE is itself."""
    seen: set[str] = set()
    while not target.args.get("db") and target.name.casefold() in ctes and target.name.casefold() not in seen:
        seen.add(target.name.casefold())
        query = ctes[target.name.casefold()]
        tables = _source_tables(query.args.get("from_"), *(query.args.get("joins") or []))
        if len(tables) != 1:
            return None
        target = tables[0]
    return target


def _resolve_target(target: exp.Expr, candidates: list[exp.Table], aliased_self: bool) -> exp.Expr:
    """`UPDATE t ... FROM x AS t` / `DELETE t FROM x AS t`: the target is the table aliased t; in
    `UPDATE dbo.t ... FROM dbo.t [AS a] JOIN ...` the FROM entry of the same name is the target itself."""
    if not isinstance(target, exp.Table) or target.args.get("alias"):
        return target
    if not target.args.get("db"):
        name = target.name.casefold()
        for candidate in candidates:
            if candidate is not target and candidate.alias and candidate.alias.casefold() == name:
                return candidate
    parts = _parts_key(target)
    same = [c for c in candidates if c is not target and _parts_key(c) == parts]
    for candidate in same:
        if not candidate.alias:
            return candidate
    # ``aliased_self`` (SQL Server): the one reference to the same table in FROM is the target, aliased or not
    # (`DELETE dbo.t FROM dbo.t AS x JOIN ...`); of several, the one without an alias
    return same[0] if aliased_self and len(same) == 1 else target


def _parts_key(table: exp.Table) -> tuple[str, ...]:
    return tuple(p.name.casefold() for p in table.parts)


# Keywords that always start a new statement at depth 0 unless one of _CONTINUES precedes them (MERGE ...
# THEN INSERT, ON DELETE CASCADE, FOR UPDATE, GRANT INSERT, UPDATE ON ...). SELECT/WITH/SET/DROP/ALTER
# also continue statements (INSERT ... SELECT, UPDATE t SET, ALTER TABLE t DROP ...), so they are not here.
_STARTS = frozenset({
    TokenType.INSERT, TokenType.UPDATE, TokenType.DELETE, TokenType.MERGE, TokenType.TRUNCATE,
    TokenType.DECLARE, TokenType.EXECUTE, TokenType.USE, TokenType.CREATE,
})
_CONTINUES = frozenset({
    TokenType.THEN, TokenType.ON, TokenType.FOR, TokenType.COMMA, TokenType.GRANT, TokenType.REVOKE,
    TokenType.L_PAREN, TokenType.DOT, TokenType.OR,
})
_CONTINUE_WORDS = frozenset({"KEY", "INSTEAD", "AFTER", "OF"})  # ON DUPLICATE KEY UPDATE, INSTEAD OF INSERT


def _semicolon_chunks(tokens: list[Token]) -> Iterator[list[Token]]:
    """The pieces between `;` tokens (what sqlglot's parser reads as one statement each)."""
    chunk: list[Token] = []
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if chunk:
                yield chunk
            chunk = []
        else:
            chunk.append(token)
    if chunk:
        yield chunk


def _segments(tokens: list[Token]) -> Iterator[list[Token]]:
    """Split a batch that failed to parse into likely statements: at `;` and at depth-0 keywords that
    always open a statement. Parsing each piece on its own keeps one bad statement from costing the
    others, and keeps the work linear for long T-SQL texts without `;`."""
    chunk: list[Token] = []
    depth = 0
    ctes_only = False  # the chunk is `WITH name AS (...) [, ...]` so far: the statement they belong to comes next
    for index, token in enumerate(tokens):
        kind = token.token_type
        if kind == TokenType.SEMICOLON:
            if chunk:
                yield chunk
            chunk, depth, ctes_only = [], 0, False
            continue
        if (
            depth == 0
            and chunk
            and kind in _STARTS
            and not ctes_only
            and chunk[-1].token_type not in _CONTINUES
            and chunk[-1].text.upper() not in _CONTINUE_WORDS
            and not _merge_range(tokens, index)
        ):
            yield chunk
            chunk = []
        if depth == 0:
            ctes_only = kind == TokenType.WITH if not chunk else ctes_only and kind not in _STARTS | _QUERY_STARTS
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth = max(depth - 1, 0)
        chunk.append(token)
    if chunk:
        yield chunk


_QUERY_STARTS = frozenset({TokenType.SELECT, TokenType.VALUES})
# A definition's body given as a string (`AS $$ ... $$`, `AS '...'`).
_BODY_STRINGS = (exp.RawString, exp.Literal)
# Tokens that may read a table inside or after a CREATE TABLE's column list (see _Analyzer._table_shell).
_READS_IN_CREATE = frozenset({TokenType.SELECT, TokenType.ALIAS, TokenType.LIKE, TokenType.FROM})
# Tokens after which a word on a new line cannot start a statement (the word continues an expression or list).
_NOT_BEFORE_STATEMENT = frozenset({
    TokenType.COMMA, TokenType.DOT, TokenType.L_PAREN, TokenType.EQ, TokenType.PLUS, TokenType.DASH,
    TokenType.STAR, TokenType.SLASH, TokenType.SELECT, TokenType.FROM, TokenType.JOIN, TokenType.AND, TokenType.OR,
    TokenType.WHERE, TokenType.ALIAS, TokenType.SET, TokenType.INTO, TokenType.TABLE, TokenType.ORDER_BY,
    TokenType.GROUP_BY, TokenType.PARTITION_BY, TokenType.CASE, TokenType.WHEN, TokenType.THEN, TokenType.NOT,
    TokenType.IN, TokenType.LIKE, TokenType.IS, TokenType.DISTINCT, TokenType.FOR,  # (DECLARE c CURSOR FOR + newline)
    TokenType.UNION, TokenType.ALL, TokenType.EXCEPT, TokenType.INTERSECT,
})


def _opaque_pieces(tokens: list[Token], words: frozenset[str]) -> Iterator[tuple[list[Token], str | None]]:
    """The batch cut around statements opening with one of the dialect's opaque command `words` (see
    DialectRules.opaque_commands): (tokens, None) pieces to parse and ([], WORD) for each such command. A word
    opens a statement first in the batch, after `;`, or first on its line after a token that ends a clause.
    The command runs to the next `;` or the next line starting with a statement keyword."""
    if not words or not any(t.text.upper() in words for t in tokens):
        yield tokens, None
        return
    piece: list[Token] = []
    command: str | None = None
    previous: Token | None = None
    for index, token in enumerate(tokens):
        kind, word = token.token_type, token.text.upper()
        new_line = previous is not None and token.line != previous.line
        at_start = previous is None or previous.token_type == TokenType.SEMICOLON or (
            new_line and previous.token_type not in _NOT_BEFORE_STATEMENT)
        if command is not None:
            # (a WITH line is the command's options, `BACKUP ...` then `WITH INIT`, unless it opens a CTE)
            opens = kind in (TokenType.SELECT, TokenType.SET, TokenType.BEGIN) or (
                kind == TokenType.WITH and _opens_cte(tokens, index))
            if kind == TokenType.SEMICOLON or (at_start and (kind in _STARTS or opens or word in words)):
                yield [], command
                command = None
        if command is None:
            if at_start and word in words and kind in (TokenType.VAR, TokenType.COMMAND):
                if piece:
                    yield piece, None
                piece, command = [], word
            else:
                piece.append(token)
        previous = token
    if command is not None:
        yield [], command
    if piece:
        yield piece, None


# Words that open a statement of their own on a new line after an opaque command (see _command_end); ALTER and
# DROP only before the kind of object they change (`ALTER TABLE t` then `ALTER COLUMN c ...` is one statement).
# COMMIT / ROLLBACK too: an `ALTER PARTITION FUNCTION ...` (an opaque command) took the COMMIT of the next line.
_COMMAND_ENDS = _STARTS | {TokenType.SELECT, TokenType.SET, TokenType.BEGIN, TokenType.COMMIT, TokenType.ROLLBACK}
_OBJECT_KINDS = frozenset({"TABLE", "VIEW", "INDEX", "PROC", "PROCEDURE", "FUNCTION", "TRIGGER", "SCHEMA",
                           "SYNONYM", "TYPE", "SEQUENCE", "STATISTICS", "DATABASE"})


def _command_end(chunk: list[Token]) -> int:
    """Index of the first token after the first that opens a new statement: first on its line, outside
    parentheses, after a token that ends a clause, and a statement keyword (WITH only before a CTE's name); 0 if
    none. An opaque command (sqlglot's fallback) otherwise runs to the next `;`."""
    depth = 0
    for index in range(1, len(chunk)):
        token, previous = chunk[index], chunk[index - 1]
        if previous.token_type == TokenType.L_PAREN:
            depth += 1
        elif previous.token_type == TokenType.R_PAREN:
            depth = max(depth - 1, 0)
        if depth or token.line == previous.line or (previous.token_type in _NOT_BEFORE_STATEMENT
                                                    and not _ends_with_all(chunk, index - 1)):
            continue
        word, after = token.text.upper(), chunk[index + 1] if index + 1 < len(chunk) else None
        if _merge_range(chunk, index):
            continue
        if token.token_type in _COMMAND_ENDS:
            return index
        if word in ("IF", "WHILE") and previous.text.upper() not in KINDS_BEFORE_IF \
                and previous.token_type != TokenType.PARAMETER:  # `BEGIN` then `IF @x = 1 ...` (not `@if`)
            return index
        if word in ("ALTER", "DROP") and after is not None and after.text.upper() in _OBJECT_KINDS:
            return index
        if token.token_type == TokenType.WITH and _opens_cte(chunk, index):
            return index
    return 0


def _merge_range(tokens: list[Token], at: int) -> bool:
    """Whether ``tokens[at]`` is the MERGE of `ALTER PARTITION FUNCTION f () MERGE RANGE (value)`, which opens no
    statement (a MERGE's target may be a table named range, never followed by a parenthesis)."""
    return tokens[at].token_type == TokenType.MERGE and at + 2 < len(tokens) \
        and tokens[at + 1].text.upper() == "RANGE" and tokens[at + 2].token_type == TokenType.L_PAREN


def _ends_with_all(tokens: list[Token], at: int) -> bool:
    """Whether ``tokens[at]`` is an ALL that ends a statement (`NOCHECK CONSTRAINT ALL`, `ENABLE TRIGGER ALL`), not
    one a query goes on after (`UNION ALL`, `SELECT ALL`)."""
    return tokens[at].token_type == TokenType.ALL and at > 0 and tokens[at - 1].token_type not in (
        TokenType.UNION, TokenType.EXCEPT, TokenType.INTERSECT, TokenType.SELECT)


def _opens_cte(tokens: list[Token], at: int) -> bool:
    """`WITH name AS (` or `WITH name (columns) AS (` at ``at``: a CTE, not an options list (`WITH (ONLINE = ON)`,
    `WITH DEFAULT_SCHEMA = s`)."""
    name = at + 1
    if name >= len(tokens) or tokens[name].token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
        return False
    after = skip_group(tokens, name + 1)
    return after + 1 < len(tokens) and tokens[after].token_type == TokenType.ALIAS \
        and tokens[after + 1].token_type == TokenType.L_PAREN


# Snowflake `EXECUTE IMMEDIATE '<sql>' | $$<sql>$$ [USING (...)]` after the EXECUTE keyword: the literal's text.
_IMMEDIATE = re.compile(r"\s*IMMEDIATE\s+(?:'((?:[^']|'')*)'|\$\$(.*?)\$\$)\s*(?:USING\b.*)?;?\s*",
                        re.IGNORECASE | re.DOTALL)


# `DECLARE c [options] CURSOR [options] FOR <query>` (the text after DECLARE): the query; and its trailing
# `FOR UPDATE [OF ...]` / `FOR READ ONLY`, which is no part of the query.
_CURSOR = re.compile(r"\s*[^\s@]\S*\s+(?:\w+\s+)*?CURSOR\b(?:\s+\w+)*?\s+FOR\s+(.+)", re.IGNORECASE | re.DOTALL)
_CURSOR_OPTIONS = re.compile(r"\bFOR\s+(?:UPDATE\b|READ\s+ONLY\b).*$", re.IGNORECASE | re.DOTALL)
# The words of a CREATE/DROP command's text (`TABLE[dbo].[t]` needs no space after TABLE).
_WORDS = re.compile(r"\w+")
# `RENAME TABLE a TO b, c TO d` (the text after RENAME) and its pairs (Teradata also writes `a AS b`); a name's
# parts may be quoted with spaces inside.
_RENAME_NAME = r"(?:`[^`]*`|\"[^\"]*\"|\[[^\]]*\]|[^\s,;`\"\[])+"
_RENAME_PAIR = re.compile(rf"({_RENAME_NAME})\s+(?:TO|AS)\s+({_RENAME_NAME})", re.IGNORECASE)
_RENAME_TABLES = re.compile(rf"\s*TABLES?\s+((?:{_RENAME_PAIR.pattern})(?:\s*,\s*{_RENAME_PAIR.pattern})*)\s*;?\s*",
                            re.IGNORECASE)
# Oracle's `RENAME a TO b` (the text after RENAME).
_RENAME_ONE = re.compile(rf"\s*{_RENAME_PAIR.pattern}\s*;?\s*", re.IGNORECASE)
# `ALTER <kind> [IF EXISTS] a RENAME TO b` for the kinds sqlglot keeps as an opaque command (the text after ALTER).
_ALTER_RENAME = re.compile(rf"\s*((?:ICEBERG|DYNAMIC|EXTERNAL)\s+TABLE|MATERIALIZED\s+VIEW)\s+(?:IF\s+EXISTS\s+)?"
                           rf"({_RENAME_NAME})\s+RENAME\s+TO\s+({_RENAME_NAME})\s*;?\s*", re.IGNORECASE)
# Redshift UNLOAD's query: a literal in parentheses, its quotes doubled or backslash-escaped.
_UNLOAD = re.compile(r"\s*\(\s*'((?:[^'\\]|''|\\.)*)'\s*\)", re.DOTALL)
# Athena UNLOAD's query: in parentheses, before `TO '<location>' [WITH (<options>)]`.
_UNLOAD_QUERY = re.compile(r"\s*\((.*)\)\s*TO\s+'[^']*'\s*(?:WITH\s*\(.*\))?\s*;?\s*", re.IGNORECASE | re.DOTALL)


#: Tokens the tokenizer may let swallow the rest of the statement as one string (T-SQL's FETCH is a command word of
#: its own type: `FETCH NEXT FROM c INTO @a` then `IF @a > 1 UPDATE ...` on the next lines was one FETCH).
_SWALLOWING = frozenset({TokenType.COMMAND, TokenType.END, TokenType.FETCH})


def _reopen_swallowed(tokens: list[Token], dialect: Dialect, text: str) -> list[Token]:
    """The tokenizer reads the rest of a statement after a command word (`PRINT`, `UPDATE STATISTICS`, and in T-SQL
    an `END` that opens a statement, after `;`) as one string, up to the next `;`: where that string runs over a
    line opening a new statement (see _command_end), keep its part before that line as the command's string and
    tokenize the rest again, in place; after END (which takes no string: `END TRY`, `END` then `ELSE ...`), all
    of it. What is tokenized again is looked at again (`END END`: the second END swallowed the rest too)."""
    out: list[Token] = []
    pending = tokens[::-1]  # a stack: what is tokenized again goes back on it
    while pending:
        token = pending.pop()
        previous = out[-1] if out else None
        after_end = previous is not None and previous.token_type == TokenType.END
        if (previous is None or previous.token_type not in _SWALLOWING
                or token.token_type != TokenType.STRING or ("\n" not in token.text and not after_end)):
            out.append(token)
            continue
        token = command_string(token, previous, text)
        inner = string_tokens(token, dialect.tokenize)
        if inner is None:
            out.append(token)
            continue
        base = token.end - len(token.text) + 1  # (a string token's end and line are its last character's)
        first_line = token.line - token.text.count("\n")
        cut = 0 if after_end else _command_end([previous, *inner]) - 1  # (the command word leads: index 0)
        if cut < 0 or (cut == 0 and not after_end):
            out.append(token)
            continue
        if cut:
            head = token.text[: inner[cut - 1].end - base + 1]
            out.append(Token(TokenType.STRING, head, first_line, token.col, base, inner[cut - 1].end))
        pending.extend(reversed(inner[cut:]))
    return out


# Words that, first on their line, end a T-SQL statement the parser ran into (a block's end, a jump).
_BLOCK_WORDS = frozenset({"END", "ELSE", "RETURN", "BREAK", "CONTINUE", "GOTO", "WHILE"})


# _window_step: the smallest window (tokens), and how near its end the parser may have failed for want of the tokens
# after it (its lookahead is a few tokens; a statement cut by the window's end fails at the end).
_WINDOW_MIN = 64
_WINDOW_MARGIN = 16


def _split_point(chunk: list[Token], exc: ParseError, dialect: Dialect, block_words: bool = False) -> int:
    """Index where a second statement starts, when the parse failed right there (T-SQL needs no `;`);
    ``block_words`` (T-SQL): also where one of :data:`_BLOCK_WORDS`, or a statement keyword just before the failure,
    stands first on its line."""
    if not exc.errors:
        return 0
    line, col = exc.errors[0].get("line"), exc.errors[0].get("col")
    starters = dialect.parser_class.STATEMENT_PARSERS.keys() | {TokenType.SELECT, TokenType.WITH}
    depth = 0
    for index, token in enumerate(chunk):
        if token.line == line and token.col == col:
            if index > 0 and depth == 0 and token.token_type in starters:
                return index
            # END / ELSE / RETURN... first on their line end a T-SQL block or statement (`BEGIN TRY ... END TRY`);
            # the parser may have taken END for the statement's alias and failed on the word after it
            for at in (index, index - 1) if block_words else ():
                if at > 0 and depth == 0 and (chunk[at].text.upper() in _BLOCK_WORDS
                                              or (at < index and chunk[at].token_type in starters)) \
                        and chunk[at - 1].line != chunk[at].line:
                    return at
            return 0
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
    return 0


def _holds_command(node: exp.Expr) -> bool:
    """Whether a parsed statement is an opaque command, or a T-SQL IF / WHILE whose statements hold one (the
    token fix ends each condition with `;`: the parser then reads every later `;` piece into the block)."""
    if isinstance(node, exp.Command):
        return True
    return isinstance(node, (exp.IfBlock, exp.WhileBlock)) and node.find(exp.Command) is not None


def _has_statement(body: object) -> bool:
    """Whether an IF / WHILE body holds a statement (a block cut from its header holds only None)."""
    if isinstance(body, exp.Block):
        return any(statement is not None for statement in body.expressions)
    return isinstance(body, exp.Expr)


def _control_word(node: exp.Expr) -> str | None:
    """`RETURN` / `GOTO label` / `THROW` as sqlglot reads them (a column, maybe aliased): the word, else None."""
    column = node.this if isinstance(node, exp.Alias) else node
    if isinstance(column, exp.Column) and not column.table and column.name.upper() in _CONTROL_WORDS:
        return column.name.upper()
    return None


def _is_url(node: exp.Expr | None) -> bool:
    """A location written as a double-quoted name (`COPY INTO t FROM "s3://b/p/"`): a table name holds no `://`."""
    return isinstance(node, exp.Table) and "://" in node.name


def _unwrap_schema(node: exp.Expr | None) -> exp.Expr | None:
    """`INSERT INTO t (a, b)` / `CREATE TABLE t (a int)`: the table inside the column list."""
    return node.this if isinstance(node, exp.Schema) else node


def _name_text(tokens: list[Token], start: int, text: str) -> str:
    """Source text of the dotted name starting at token `start`."""
    end = start
    while end + 2 < len(tokens) and tokens[end + 1].token_type == TokenType.DOT:
        end += 2
    if start >= len(tokens):
        return ""
    return text[tokens[start].start : tokens[end].end + 1]


def _is_temporary(prop: exp.Expr, temporary: tuple[type[exp.Expr], ...]) -> bool:
    """A CREATE property making the object session-scoped (see DialectRules.temporary_properties). sqlglot reads
    Teradata's `CREATE MULTISET VOLATILE TABLE` with a function's VOLATILE stability, not as a VolatileProperty."""
    if isinstance(prop, temporary):
        return True
    return exp.VolatileProperty in temporary and isinstance(prop, exp.StabilityProperty) \
        and prop.name.upper() == "VOLATILE"


def _drop_create_words(tokens: list[Token], ignored: dict[str, frozenset[str]]) -> list[Token]:
    """Tokens without the `ignored` words standing after `CREATE [OR REPLACE|ALTER]` or `DROP` before one of their
    followers (`CREATE LOCAL TEMPORARY TABLE` -> `CREATE TEMPORARY TABLE`); see DialectRules."""
    drop: set[int] = set()
    for index, token in enumerate(tokens):
        if token.token_type not in (TokenType.CREATE, TokenType.DROP):
            continue
        at = index + 1
        if at + 1 < len(tokens) and tokens[at].token_type == TokenType.OR:
            at += 2
        while at + 1 < len(tokens) and tokens[at + 1].text.upper() in ignored.get(tokens[at].text.upper(), ()):
            drop.add(at)
            at += 1
    return [t for i, t in enumerate(tokens) if i not in drop] if drop else tokens


def _clauses_last(tokens: list[Token], clauses: tuple[tuple[str, ...], ...], text: str) -> list[Token]:
    """Tokens with each of the `clauses` (its words, then a parenthesised group) moved to the end of its statement,
    before the `;` (`CREATE TABLE t USING TEMPLATE (<query>) COMMENT = 'x'` -> `CREATE TABLE t COMMENT = 'x' USING
    TEMPLATE (<query>)`); see DialectRules.clauses_last. Tokens keep their positions in the text."""
    upper = text.upper()
    for words in clauses:
        if words[-1] not in upper:
            continue
        size, i = len(words), 0
        while i + size < len(tokens):
            if tokens[i].text.upper() != words[0] or [t.text.upper() for t in tokens[i : i + size]] != list(words) \
                    or tokens[i + size].token_type != TokenType.L_PAREN:
                i += 1
                continue
            after = skip_group(tokens, i + size)
            end = next((j for j in range(after, len(tokens)) if tokens[j].token_type == TokenType.SEMICOLON),
                       len(tokens))
            tokens = [*tokens[:i], *tokens[after:end], *tokens[i:after], *tokens[end:]]
            i = end
    return tokens


def _strip_quotes(name: str) -> str:
    return ".".join(part.strip('"[]`') for part in name.split("."))


# An INSERT keyword and whether OVERWRITE follows it (comments in between are not expected there).
_INSERT_WORD = re.compile(r"\bINSERT\s+(OVERWRITE\b)?", re.IGNORECASE)
_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.\w+, text: (.*?), line: .*?>")
_CLASS_REPR = re.compile(r"<class '(?:\w+\.)*(\w+)'>")


def _reason(prefix: str, exc: BaseException) -> str:
    """A short, one-line reason from a sqlglot error (token and class reprs shortened)."""
    detail = (getattr(exc, "errors", None) or [{}])[0].get("description") or str(exc)
    detail = _CLASS_REPR.sub(r"\1", _TOKEN_REPR.sub(r"'\1'", detail.splitlines()[0] if detail else ""))
    return f"{prefix}: {detail[:120]}" if detail else prefix


def _sorted(names: Iterable[str]) -> list[str]:
    return sorted(names)
