"""Per-dialect rules for `harvesters.sql.engine.table_lineage`, kept as data.

Everything that differs between SQL dialects (which sqlglot parser reads the text, how identifiers are
case-normalised, what `db..t` means, what `USE x` changes, how batches are separated) is a field of
`DialectRules`; the lineage code reads these fields and never branches on a dialect's name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

import attrs
from sqlglot import exp
from sqlglot.tokens import Token

from harvesters.sql.forms import (
    ANONYMOUS_PROCEDURES,
    ASYNC_STATEMENTS,
    CLONE_CLAUSES,
    DIRECTORY_FORMAT,
    PARTITION_IF_NOT_EXISTS,
    POPULATE,
    REPLACE_TABLE,
    SNOWFLAKE_TABLE_CLAUSES,
    FormFix,
    replace_into_fix,
)
from harvesters.sql.identifier_clause import name_tokens
from harvesters.sql.scripting import flatten_blocks
from harvesters.sql.scripting_variables import inline_scripting_variables
from harvesters.sql.tsql import fix_tokens as _tsql_fix_tokens
from harvesters.sql.tsql_text import tsql_text

CaseRule = Literal["upper", "lower", "as_written"]
# Rewrites a batch's tokens, given with the batch's text, before parsing; returns the tokens and the source spans
# of extra write targets it cut out (T-SQL `OUTPUT ... INTO t`). The text places what a rewrite reads again: the
# tokenizer ends a command's swallowed string after the whitespace it stripped (see retokenize.command_string).
TokenFix = Callable[[list[Token], str], tuple[list[Token], list[tuple[int, int]]]]
UseTarget = Literal["database", "schema"]

# Object kinds whose CREATE/DROP never has run-level lineage, when sqlglot keeps the statement as an opaque
# command (a procedure body runs only when called; a role, user, login, share or statistics object holds no rows
# of its own; a synonym only points at a table).
_DEFINITIONS = frozenset({
    "FUNCTION", "PROCEDURE", "PROC", "ROLE", "USER", "LOGIN", "SHARE", "STATISTICS", "CREDENTIAL", "CERTIFICATE",
    "KEY", "SYNONYM", "TYPE", "SEQUENCE", "ASSEMBLY", "ENDPOINT", "WAREHOUSE", "RESOURCE", "NETWORK", "CONNECTION",
    "REPLICATION", "FAILOVER", "APPLICATION", "ACCOUNT", "AUDIT", "SPECIFICATION", "SESSION", "WORKLOAD",
    "CLASSIFIER", "PARTITION", "FULLTEXT", "XML", "MESSAGE", "CONTRACT", "QUEUE", "SERVICE", "ROUTE",
})


@attrs.frozen
class DialectRules:
    """How one dialect names tables and scopes a text (see the table `DIALECTS` below)."""

    name: str
    # sqlglot dialect that parses the text ("" = sqlglot's default, ANSI-ish dialect).
    sqlglot: str
    # What unquoted identifiers are normalised to in returned names (quoted ones are always kept exactly).
    case: CaseRule = "as_written"
    # Schema meant by an empty schema part, `db..t` (T-SQL: the dbo schema; Snowflake: always PUBLIC).
    empty_schema: str | None = None
    # Schema assumed for an unqualified name when only the database is known (T-SQL resolves to dbo).
    implicit_schema: str | None = None
    # Which default a bare `USE x` changes: three-level dialects switch the database, two-level ones the
    # schema (MySQL/Hive/Spark "databases" sit directly above tables).
    use_target: UseTarget = "schema"
    # Schema that becomes current after `USE DATABASE x` (Snowflake switches to PUBLIC); None keeps it.
    schema_after_use_database: str | None = None
    # How a name part holding a dot is written in a returned name when the caller asks (`quote_dotted_parts`), so it
    # can split the name back into its parts (T-SQL `[10.0.0.5].db.dbo.t`: a linked server named by its address;
    # `dbo.[t.2024]`): (open, close), the close doubled inside as the dialect escapes it. None: parts are joined as
    # they are (the dot is ambiguous).
    dotted_part_quotes: tuple[str, str] | None = None
    # Whether `USE DATABASE x` forgets the current schema (it belonged to the old database).
    use_database_resets_schema: bool = False
    # Whether `CREATE DATABASE x` / `CREATE SCHEMA [d.]s` make the new one current, as a USE would (Snowflake).
    create_sets_current: bool = False
    # Client-side batch separator on a line of its own (sqlcmd/SSMS `GO [count]`); None = no batches.
    batch_separator: re.Pattern[str] | None = None
    # T-SQL: CREATE/ALTER PROCEDURE|FUNCTION|TRIGGER bodies run to the end of the batch, so a batch
    # starting with one of these is a definition, not run-level lineage.
    definition_runs_to_batch_end: bool = False
    # Whether a CTE's own name inside its body means the CTE (T-SQL CTEs recurse without RECURSIVE);
    # elsewhere it means the real table unless the WITH is RECURSIVE.
    cte_self_reference_recursive: bool = False
    # Token rewrite for grammar sqlglot's parser of this dialect lacks (see harvesters/sql_tsql.py).
    token_fix: TokenFix | None = None
    # When set, the token fix runs only on a text this matches (a cheap test on the text: most texts need no fix)
    token_fix_when: re.Pattern[str] | None = None
    # Dialects tried, in order, when this dialect's parser rejects a statement (logs hold SQL that is
    # valid for the server but outside sqlglot's grammar for it).
    fallbacks: tuple[str, ...] = ()
    # Functions that move data between tables named by string arguments: upper name -> (input
    # argument positions, output argument positions).
    table_functions: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = attrs.field(factory=dict)
    # CREATE properties that make the new table or view session-scoped: reported as a temp object, not a
    # dataset (see `TableLineage.temp_outputs`).
    temporary_properties: tuple[type[exp.Expr], ...] = (exp.TemporaryProperty,)
    # Words sqlglot's parser rejects after `CREATE [OR REPLACE]` that change nothing for lineage: word -> the
    # words it may stand before. They are dropped from the tokens before parsing.
    ignored_create_words: dict[str, frozenset[str]] = attrs.field(factory=dict)
    # CREATE clauses (their words, then a parenthesised group) sqlglot's parser reads only at the end of the statement:
    # moved there before parsing (Snowflake `USING TEMPLATE (<query>)` took the properties written after it for
    # part of its query, and the statement failed).
    clauses_last: tuple[tuple[str, ...], ...] = ()
    # Statement forms sqlglot's parser lacks, rewritten in the tokens after token_fix, each only on a text its pattern
    # finds something in (see harvesters/sql/forms.py: MySQL's REPLACE INTO, Spark's REPLACE TABLE, ...).
    form_fixes: tuple[FormFix, ...] = ()
    # Rewrites a batch's text before it is tokenized (forms the tokenizer or parser cannot read at all).
    text_fix: Callable[[str], str] | None = None
    # Object kinds whose CREATE/DROP has no run-level lineage, when sqlglot does not model the statement.
    definition_objects: frozenset[str] = _DEFINITIONS
    # First words of statements without table lineage that sqlglot's parser misreads (as a column, an alias) or
    # rejects: at the start of a statement they are read as an opaque command of that name, no lineage.
    opaque_commands: frozenset[str] = frozenset()
    # Whether a statement the parser keeps as an opaque command ends at the next line that opens a statement
    # (T-SQL needs no `;`: without this, `SET NOCOUNT ON` swallows the `INSERT` on the next line).
    commands_end_at_new_statements: bool = False
    # Whether INSERT/UPDATE/DELETE/MERGE may name a CTE of the statement (T-SQL's updatable CTEs): the write goes
    # to the CTE's one base table. Elsewhere a target is always a table, even one named like a CTE.
    writes_through_ctes: bool = False
    # `UPDATE t ... FROM t AS a JOIN ...` / `DELETE t FROM t AS a ...`: the one FROM reference to the target's table,
    # aliased or not, is the target itself (SQL Server's rule), not a read. Elsewhere (Postgres) it is a self-join.
    aliased_reference_is_target: bool = False
    # SQL Server's prepared and cursor calls (`sp_prepexec`, `sp_cursoropen`, ...): the statement they carry is
    # read like sp_executesql's (see harvesters/sql/prepared.py).
    prepared_calls: bool = False
    # Tables that are the server's own catalog, not datasets (see harvesters/sql/system.py): case-insensitive
    # regular expressions over the qualified name as the engine reports it.
    system_objects: tuple[str, ...] = ()
    # Row sets named like tables that are none when written without a schema (casefolded): T-SQL's trigger
    # `inserted` / `deleted` (statements run by a trigger reach the session's log with them); Spark's
    # `IDENTIFIER` of `INSERT INTO IDENTIFIER(:param)`, a table known only at run time.
    pseudo_tables: frozenset[str] = frozenset()
    # T-SQL `OPENQUERY(srv, 'query')` / `EXEC ('batch') AT srv`: text run by a linked server, its tables named as
    # four-part names on it (see harvesters/sql/remote.py).
    remote_queries: bool = False
    # `TABLE('db.s.t')` names the table t (Snowflake's table literal; sqlglot reads it as rows from a string).
    table_literals: bool = False
    # A bare name starting with `#` is a session's temp table (Redshift; T-SQL's parser marks its own `#t`).
    hash_names_are_temp: bool = False
    # `<format>.`<path>``: a query straight over files (Spark's parquet.`/data/x`), no table (casefolded formats).
    path_formats: frozenset[str] = frozenset()
    # BigQuery `t$20230101` / `t$__UNPARTITIONED__`: a partition of table t (the decorator is no part of its name).
    partition_decorator: bool = False
    # `USE DATABASE x` names a schema (Hive, Spark, Databricks: DATABASE and SCHEMA are synonyms).
    database_is_schema: bool = False
    # `ALTER TABLE s.t RENAME TO t2` leaves t2 in s (Postgres, Redshift, Vertica, Spark, Hive, BigQuery: a rename
    # cannot move a table); elsewhere (Snowflake, MySQL) an unqualified new name is taken in the current schema.
    rename_keeps_schema: bool = False
    # Reserved words sqlglot's parser takes for a table's name when written unquoted (casefolded): `DELETE FROM table
    # t` is invalid SQL, not a table named `table` aliased t (one so named is written quoted: "table", [table]).
    # Such a name is no dataset and the statement is reported unparseable. BigQuery, ClickHouse and Spark (unless in
    # ANSI mode) do not reserve TABLE.
    reserved_names: frozenset[str] = frozenset({"table"})


# Where a separator line is not one: inside a string literal, a comment or a quoted name (one pass of C regex).
_QUOTED = re.compile(r"'(?:[^']|'')*'|/\*.*?\*/|--[^\n]*|\[[^\]]*\]|\"[^\"]*\"", re.DOTALL)


# SnowSQL file commands (PUT/GET/LIST/REMOVE) take unquoted paths such as `file:///tmp/*.csv` or `@st/sub/*.csv`,
# whose `/*` the tokenizer takes for an unclosed comment (the whole text was lost): such a path is quoted.
_FILE_COMMAND = re.compile(r"^([ \t]*(?:PUT|GET|LIST|LS|REMOVE|RM)\b)([^\n;]*)", re.IGNORECASE | re.MULTILINE)
_UNQUOTED_PATH = re.compile(r"(?<![\w'\"])((?:file://|@)[^\s;'\"]*\*[^\s;'\"]*)", re.IGNORECASE)
# `FILE_FORMAT = sch.ff` (a qualified format name without parentheses) fails sqlglot's COPY: the same format given
# as `FILE_FORMAT = (FORMAT_NAME = sch.ff)`.
_FORMAT_NAME = re.compile(r"\b(FILE_FORMAT\s*=\s*)((?:\"[^\"]*\"|[\w$]+)(?:\s*\.\s*(?:\"[^\"]*\"|[\w$]+))+)",
                          re.IGNORECASE)
# `START TRANSACTION [NAME n]` is `BEGIN TRANSACTION` (same length: token positions stay those of the text).
_START_TRANSACTION = re.compile(r"(^|;)(\s*)START(\s+TRANSACTION\b)", re.IGNORECASE | re.MULTILINE)


def _snowflake_text(text: str) -> str:
    """Snowflake forms sqlglot cannot tokenize or parse, written as forms it can (see the patterns above), and
    Scripting variables naming a table or holding a statement, by their values (see scripting_variables.py)."""
    if "*" in text:
        text = _FILE_COMMAND.sub(lambda m: m.group(1) + _UNQUOTED_PATH.sub(r"'\1'", m.group(2)), text)
    if "FILE_FORMAT" in text.upper():
        text = _FORMAT_NAME.sub(r"\1(FORMAT_NAME = \2)", text)
    return inline_scripting_variables(_START_TRANSACTION.sub(r"\1\2BEGIN\3", text))


def split_batches(sql: str, separator: re.Pattern[str] | None) -> list[str]:
    """The text's batches: cut at each line matching ``separator`` (T-SQL's `GO`) that does not stand inside a
    string literal, a block comment or a quoted name, as SSMS and sqlcmd cut it."""
    if separator is None:
        return [sql]
    lines = list(separator.finditer(sql))
    if not lines:
        return [sql]
    quoted = [(m.start(), m.end()) for m in _QUOTED.finditer(sql)] if any(c in sql for c in "'/-[\"") else []
    batches, start, q = [], 0, 0
    for line in lines:
        while q < len(quoted) and quoted[q][1] <= line.start():
            q += 1
        if q < len(quoted) and quoted[q][0] < line.start():  # inside that quoted span
            continue
        batches.append(sql[start : line.start()])
        start = line.end()
    batches.append(sql[start:])
    return batches


# SnowSQL's client commands (`!source f.sql`, `!set x=y`, `!print ...`), a line each: never sent to the server.
_SNOWSQL_COMMAND = re.compile(r"^[ \t]*![A-Za-z][^\n]*$", re.MULTILINE)
_GO = re.compile(r"^[ \t]*GO(?:[ \t]+\d+)?[ \t\r]*(?:--[^\n]*)?$", re.IGNORECASE | re.MULTILINE)

_TSQL: dict[str, Any] = dict(
    sqlglot="tsql",
    empty_schema="dbo",
    implicit_schema="dbo",
    dotted_part_quotes=("[", "]"),
    use_target="database",
    batch_separator=_GO,
    definition_runs_to_batch_end=True,
    token_fix=_tsql_fix_tokens,
    text_fix=tsql_text,  # EXEC (@sql) of a string variable; WITH CHANGE_TRACKING_CONTEXT: see tsql_text.py
    cte_self_reference_recursive=True,
    commands_end_at_new_statements=True,
    writes_through_ctes=True,
    aliased_reference_is_target=True,
    opaque_commands=frozenset({
        "BACKUP", "RESTORE", "CHECKPOINT", "DBCC", "DENY", "RECONFIGURE", "SHUTDOWN", "REVERT", "SETUSER",
        "READTEXT", "WRITETEXT", "UPDATETEXT", "ENABLE", "DISABLE",  # ENABLE / DISABLE TRIGGER
    }),
    prepared_calls=True,
    remote_queries=True,
    # a trigger's `inserted`/`deleted`; `OPENQUERY(srv, '...')` whose query cannot be read: rows of (or sent to) a
    # linked server, no table here
    pseudo_tables=frozenset({"inserted", "deleted", "openquery", "openrowset", "opendatasource"}),
    system_objects=(
        r"(?:[^.]+\.)?sys\.[^.]+",  # catalog views and DMVs: sys.tables, master.sys.dm_exec_requests
        r"(?:[^.]+\.)?information_schema\.[^.]+",
        r"msdb\.dbo\.(?:sys|log_shipping_|backup|restore|suspect_pages)\w*",  # SQL Agent, backup history
        r"master\.dbo\.(?:spt_|sys|mspeer_|msreplication)\w*",
        r"tempdb\.[^.]*\.[^.]+",  # work tables of the server itself (session temp tables are #t, not these)
        r"(?:[^.]+\.)?dbo\.sys(?:objects|columns|indexes|users|databases|processes|jobs|jobhistory|jobsteps"
        r"|jobschedules|schedules|comments|depends|files|filegroups|logins|servers|types)",
    ),
)

# Spark's file sources that `SELECT * FROM <format>.`<path>`` reads directly (Databricks adds the last three).
_SPARK_FILE_FORMATS = frozenset({
    "parquet", "orc", "json", "csv", "text", "avro", "binaryfile", "delta", "cloud_files", "read_files",
})

_CLICKHOUSE_DICTIONARY_FUNCTIONS = frozenset(
    f"DICTGET{kind}{variant}"
    for kind in ("", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FLOAT32",
                 "FLOAT64", "DATE", "DATETIME", "UUID", "IPV4", "IPV6", "STRING")
    for variant in ("", "ORDEFAULT")
) | {"DICTGETORNULL", "DICTGETALL", "DICTHAS", "DICTGETHIERARCHY", "DICTISIN", "DICTGETCHILDREN",
     "DICTGETDESCENDANTS"}


def _spark(sqlglot_name: str, **rules: Any) -> DialectRules:
    """Rules of a dialect of the Spark family (Spark SQL, Databricks)."""
    return DialectRules(
        sqlglot=sqlglot_name,
        path_formats=_SPARK_FILE_FORMATS,
        database_is_schema=True,
        rename_keeps_schema=True,
        pseudo_tables=frozenset({"identifier"}),
        token_fix=name_tokens(sqlglot_name),  # IDENTIFIER('db.t') names a table: see identifier_clause.py
        token_fix_when=re.compile(r"\bIDENTIFIER\s*\(", re.IGNORECASE),
        form_fixes=(REPLACE_TABLE, DIRECTORY_FORMAT, PARTITION_IF_NOT_EXISTS, CLONE_CLAUSES),
        reserved_names=frozenset(),  # TABLE is reserved only in ANSI mode
        **rules,
    )

# Dialect name (as the caller and cases.jsonl spell it) -> rules.
DIALECTS: dict[str, DialectRules] = {
    "ansi": DialectRules("ansi", sqlglot=""),
    "tsql": DialectRules("tsql", **_TSQL),
    "fabric": DialectRules("fabric", **{**_TSQL, "sqlglot": "fabric"}),
    "snowflake": DialectRules(
        "snowflake",
        sqlglot="snowflake",
        case="upper",
        empty_schema="PUBLIC",
        use_target="database",
        schema_after_use_database="PUBLIC",
        use_database_resets_schema=True,
        create_sets_current=True,
        batch_separator=_SNOWSQL_COMMAND,
        text_fix=_snowflake_text,
        opaque_commands=frozenset({"UNSET"}),  # UNSET v / UNSET (a, b): session variables, like SET
        # a procedure body written without $$ is one string; a block that runs now is read: see scripting.py
        token_fix=flatten_blocks("snowflake", declare_sections=True),
        token_fix_when=re.compile(r"\b(?:BEGIN|DECLARE)\b", re.IGNORECASE),  # what opens a body or a block
        # TEMP, LOCAL/GLOBAL TEMP[ORARY] and VOLATILE are all TEMPORARY in Snowflake (sqlglot reads GLOBAL
        # TEMPORARY and VOLATILE, not LOCAL); TRANSIENT tables persist (no Fail-safe only): datasets.
        temporary_properties=(exp.TemporaryProperty, exp.VolatileProperty),
        # HYBRID (row store) and EVENT (log) tables are tables; sqlglot 30 rejects the words.
        ignored_create_words={
            "LOCAL": frozenset({"TEMP", "TEMPORARY"}),
            "HYBRID": frozenset({"TABLE"}),
            "EVENT": frozenset({"TABLE"}),
            "DYNAMIC": frozenset({"TABLE"}),  # (DROP DYNAMIC / EXTERNAL TABLE failed; CREATE read them already)
            "EXTERNAL": frozenset({"TABLE"}),
            # a RECURSIVE view's body may read the view itself: the engine reads the word in the text (_create_words)
            "RECURSIVE": frozenset({"VIEW"}),
            "SECURE": frozenset({"RECURSIVE"}),  # (SECURE only hides the view's text)
        },
        clauses_last=(("USING", "TEMPLATE"),),
        form_fixes=(SNOWFLAKE_TABLE_CLAUSES, ASYNC_STATEMENTS, ANONYMOUS_PROCEDURES),
        table_literals=True,
        # Objects that hold no rows of their own or run only later (a TASK's or PIPE's statement is logged
        # when it runs; a STREAM is an offset on its table; a SEMANTIC VIEW describes tables for Cortex Analyst,
        # no query): their definitions have no lineage.
        definition_objects=_DEFINITIONS
        | {"ALERT", "INTEGRATION", "PIPE", "POLICY", "RULE", "SECRET", "SEMANTIC", "STREAM", "TASK"},
        system_objects=(
            r"(?:[^.]+\.)?information_schema\.[^.]+",  # every database's INFORMATION_SCHEMA views
            r"snowflake\.[^.]+\.[^.]+",  # the shared SNOWFLAKE database: ACCOUNT_USAGE, ORGANIZATION_USAGE, ...
        ),
    ),
    "postgres": DialectRules("postgres", sqlglot="postgres", rename_keeps_schema=True),
    # Redshift SQL written by SQL Server-minded tools uses [bracketed] names, which only tsql reads.
    "redshift": DialectRules("redshift", sqlglot="redshift", fallbacks=("tsql",), hash_names_are_temp=True,
                             rename_keeps_schema=True),
    "vertica": DialectRules(
        "vertica",
        sqlglot="postgres",
        rename_keeps_schema=True,
        # SELECT SWAP_PARTITIONS_BETWEEN_TABLES('staging', min, max, 'target') moves staging -> target.
        # COPY/MOVE_PARTITIONS_TO_TABLE('src', min, max, 'target') and COPY_TABLE('src', 'target') copy src's rows
        table_functions={"SWAP_PARTITIONS_BETWEEN_TABLES": ((0,), (3,)), "COPY_PARTITIONS_TO_TABLE": ((0,), (3,)),
                         "MOVE_PARTITIONS_TO_TABLE": ((0,), (3,)), "COPY_TABLE": ((0,), (1,))},
    ),
    # dictGet*(dict, ...) / dictHas(dict, key) ...: a lookup in a dictionary, a stored object loaded from a table.
    "clickhouse": DialectRules("clickhouse", sqlglot="clickhouse", table_functions=dict.fromkeys(
        _CLICKHOUSE_DICTIONARY_FUNCTIONS, ((0,), ())), reserved_names=frozenset(), form_fixes=(POPULATE,)),
    # Athena runs DDL on Hive (`backquoted` names) and queries on Trino; logs and scripts mix the two quotings.
    "athena": DialectRules("athena", sqlglot="athena", fallbacks=("hive",)),
    # Athena runs its queries on Presto (engine v2) and Trino (v3): logs labelled so hold Athena's own statements too
    # (UNLOAD (<query>) TO 's3://...'), which only its parser reads.
    "presto": DialectRules("presto", sqlglot="presto", fallbacks=("athena",)),
    "trino": DialectRules("trino", sqlglot="trino", fallbacks=("athena",)),
    "sparksql": _spark("spark", name="sparksql"),
    "spark": _spark("spark", name="spark"),
    "spark2": _spark("spark2", name="spark2"),
    "databricks": _spark("databricks", name="databricks", use_target="schema"),
    "hive": DialectRules("hive", sqlglot="hive", database_is_schema=True, rename_keeps_schema=True,
                         form_fixes=(PARTITION_IF_NOT_EXISTS,)),
    "mysql": DialectRules("mysql", sqlglot="mysql", form_fixes=(replace_into_fix("mysql"),)),
    # a VOLATILE table lives for the session, as a TEMPORARY one: no dataset (lineage flows through it)
    "teradata": DialectRules("teradata", sqlglot="teradata",
                             temporary_properties=(exp.TemporaryProperty, exp.VolatileProperty)),
    "sqlite": DialectRules("sqlite", sqlglot="sqlite", form_fixes=(replace_into_fix("sqlite"),)),
    "singlestore": DialectRules("singlestore", sqlglot="singlestore", form_fixes=(replace_into_fix("singlestore"),)),
    "bigquery": DialectRules(
        "bigquery",
        sqlglot="bigquery",
        use_target="schema",
        partition_decorator=True,
        rename_keeps_schema=True,
        # CREATE PROCEDURE p() BEGIN ... END: the body runs when called; a script's blocks, IF, loops run now
        token_fix=flatten_blocks("bigquery", declare_sections=False),
        token_fix_when=re.compile(r"\b(?:BEGIN|IF|LOOP|WHILE|REPEAT|FOR)\b", re.IGNORECASE),
        # a SNAPSHOT table is a read-only table (CREATE SNAPSHOT TABLE s CLONE t, DROP SNAPSHOT TABLE s)
        ignored_create_words={"SNAPSHOT": frozenset({"TABLE"})},
        form_fixes=(CLONE_CLAUSES,),
        reserved_names=frozenset(),
    ),
}

# Every other sqlglot dialect, with generic rules (names as written, qualified with whatever is given); a dialect
# listed here and given rules above keeps those.
_GENERIC = (
    "doris", "dremio", "drill", "druid", "duckdb", "dune", "exasol",
    "materialize", "oracle", "presto", "risingwave", "singlestore", "sqlite", "starrocks", "teradata",
    "trino",
)
for _name in _GENERIC:
    DIALECTS.setdefault(_name, DialectRules(_name, sqlglot=_name))

# Other spellings callers use for the same dialects.
ALIASES: dict[str, str] = {
    "": "ansi",
    "sql": "ansi",
    "generic": "ansi",
    "mssql": "tsql",
    "sqlserver": "tsql",
    "sql_server": "tsql",
    "azuresql": "tsql",
    "synapse": "tsql",
    "postgresql": "postgres",
    "greenplum": "postgres",
    "psql": "postgres",
    "spark_sql": "sparksql",
    "mariadb": "mysql",
    "bq": "bigquery",
}


def rules_for(dialect: str | None) -> DialectRules | None:
    """The rules for a dialect name (case-insensitive, aliases accepted), or None if unknown."""
    key = (dialect or "").strip().lower()
    return DIALECTS.get(ALIASES.get(key, key))
