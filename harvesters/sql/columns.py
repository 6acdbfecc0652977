"""Column-level lineage of one SQL text: which input columns each written column is computed from.

:func:`column_lineage` answers for the statements that name what they write column by column:
``INSERT INTO t (c1, c2) SELECT ...`` (without a column list only when the caller knows ``t``'s columns),
``CREATE TABLE|VIEW t [(c1, ...)] AS SELECT ...`` and T-SQL ``SELECT ... INTO t``. Everything else (UPDATE,
MERGE, VALUES, COPY, multi-table INSERT, text sqlglot cannot parse) has no column lineage here: unknown stays
unknown, no column is ever invented. An output column is left out when any column it is computed from cannot be
told (an unqualified column of a join, ``*`` over a table whose columns are unknown, a temp table, a table
function): a partial list would read as the whole truth.

sqlglot does the work: the text is parsed for the dialect, identifiers are normalised once by the dialect's case
rule (:mod:`harvesters.sql.dialects`, so names match :func:`harvesters.sql.engine.table_lineage`'s: a T-SQL name
keeps its first spelling in the text, a Snowflake unquoted name is upper-cased) and quoted, ``*`` over a table is
expanded from ``table_columns`` when the caller knows them, and :func:`sqlglot.lineage.lineage` follows each
projection through CTEs, subqueries and set operations down to table columns.

Plain data only (no emitter, no harvester types), so any producer can turn it into a ``columnLineage`` facet:
``{output table: {output column: ((input table, input column, subtype), ...)}}`` with subtype ``IDENTITY`` (the
value is copied), ``TRANSFORMATION`` (computed from it) or ``AGGREGATION`` (an aggregate of it), all of them
``DIRECT`` transformations in the OpenLineage columnLineage facet's terms (1-2-0).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import OptimizeError, ParseError, SqlglotError
from sqlglot.lineage import Node, lineage
from sqlglot.tokens import TokenType

from harvesters.sql.dialects import DialectRules, rules_for, split_batches
from harvesters.sql.engine import default_identifier, joined_name, qualified_parts
from harvesters.sql.remote import REMOTE_CALL, four_parts, inline_remote_queries

__all__ = ["IDENTITY", "TRANSFORMATION", "AGGREGATION", "ColumnSource", "ColumnLineage", "column_lineage"]

IDENTITY, TRANSFORMATION, AGGREGATION = "IDENTITY", "TRANSFORMATION", "AGGREGATION"
_RANK = {IDENTITY: 0, TRANSFORMATION: 1, AGGREGATION: 2}
#: (input table, input column, subtype)
ColumnSource = tuple[str, str, str]
#: output table -> output column -> its sources (a tuple: the answer is cached and shared)
ColumnLineage = dict[str, dict[str, tuple[ColumnSource, ...]]]
#: the known columns of a table (by its qualified name as reported), or None when unknown
TableColumns = Callable[[str], Sequence[str] | None]
#: Longest text worth a column-level look (the table-level engine refuses 512 KiB; a statement writing
#: columns is far smaller, and sqlglot's qualify is the costly part).
MAX_SQL_CHARS = 100_000
_CREATE_KINDS = frozenset({"TABLE", "VIEW", "MATERIALIZED VIEW", "DYNAMIC TABLE", "TRANSIENT TABLE"})

log = logging.getLogger(__name__)


def column_lineage(sql: str, dialect: str, default_database: str | None = None, default_schema: str | None = None,
                   *, table_columns: TableColumns | None = None, temp_tables: Iterable[str] = (),
                   quote_dotted_parts: bool = False) -> ColumnLineage:
    """Column lineage of ``sql`` (see the module): ``{output table: {column: ((table, column, subtype), ...)}}``.

    Table names are qualified with the defaults (and ``quote_dotted_parts``) as
    :func:`harvesters.sql.engine.table_lineage` qualifies them.
    ``table_columns(name)`` gives a table's columns when the caller knows them (``*`` is expanded, an INSERT
    without a column list is mapped by position); ``temp_tables`` are session temp tables (not datasets: a
    column computed from one is left out). Never raises: an empty mapping when nothing is known.
    """
    if not isinstance(sql, str) or not sql.strip() or len(sql) > MAX_SQL_CHARS:
        return {}
    try:
        rules = rules_for(dialect)
        if rules is None:
            return {}
        walker = _Walker(rules, default_database, default_schema, table_columns, temp_tables, quote_dotted_parts)
        return walker.run(sql)
    except _ERRORS as error:
        log.debug("no column lineage: %s: %s", type(error).__name__, error)
        return {}


#: What sqlglot raises on text or trees it cannot follow.
_ERRORS = (SqlglotError, RecursionError, ValueError, KeyError, AttributeError, TypeError)


class _Walker:
    def __init__(self, rules: DialectRules, database: str | None, schema: str | None,
                 table_columns: TableColumns | None, temp_tables: Iterable[str], quote_dotted_parts: bool = False
                 ) -> None:
        self.rules = rules
        self.part_quotes = rules.dotted_part_quotes if quote_dotted_parts else None
        self.database = self._default(database)
        self.schema = self._default(schema)
        self.table_columns = table_columns
        self.temps = {t.strip('"[]').casefold() for t in temp_tables}
        self.spelling: dict[str, str] = {}  # casefolded -> first spelling (as_written dialects)

    # ---- driving ---------------------------------------------------------------------------------------

    def run(self, sql: str) -> ColumnLineage:
        batches = split_batches(sql, self.rules.batch_separator)
        result: ColumnLineage = {}
        for batch in batches:
            if not batch.strip():
                continue
            remote = Dialect.get_or_raise(self.rules.sqlglot) \
                if self.rules.remote_queries and REMOTE_CALL.search(batch) is not None else None
            for statement in _parse(batch, self.rules.sqlglot):
                if statement is None:
                    continue
                try:
                    if remote is not None:  # a linked server's query read as a derived table of its tables there
                        statement = inline_remote_queries(statement, remote)
                    found = self._statement(statement)
                except _ERRORS as error:  # a statement sqlglot cannot follow costs only itself
                    log.debug("no column lineage for a statement: %s: %s", type(error).__name__, error)
                    continue
                if found is not None:
                    table, columns = found
                    if columns:
                        result.setdefault(table, {}).update(columns)
        return result

    def _statement(self, node: exp.Expr) -> tuple[str, dict[str, tuple[ColumnSource, ...]]] | None:
        """(output table, its columns' sources) of one statement, or None when it writes no named columns."""
        target: exp.Expr | None = None
        query: exp.Expr | None = None
        if isinstance(node, exp.Insert):
            target, query = node.this, node.expression
        elif isinstance(node, exp.Create) and str(node.args.get("kind") or "").upper() in _CREATE_KINDS:
            target, query = node.this, node.expression
        elif isinstance(node, exp.Select) and isinstance(node.args.get("into"), exp.Into):
            into = node.args["into"]
            target, query = into.this, node.copy()
            query.set("into", None)
        if target is None or not isinstance(query, (exp.Select, exp.SetOperation, exp.Subquery)):
            return None
        if isinstance(query, exp.Subquery):
            query = query.unnest()
        if not isinstance(query, (exp.Select, exp.SetOperation)):
            return None
        columns: list[str] | None = None
        if isinstance(target, exp.Schema):
            columns = [c.name for c in target.expressions if isinstance(c, (exp.Identifier, exp.ColumnDef, exp.Column))]
            target = target.this
        if not isinstance(target, exp.Table):
            return None
        if columns is not None:  # the target's spelling first (T-SQL: the first spelling in the text wins)
            columns = [self._ident_text(c) for c in columns]
        query = query.copy()
        with_ = node.args.get("with_") or node.args.get("with")
        if with_ is not None and query.args.get("with_") is None and query.args.get("with") is None:
            query.set("with_" if "with_" in type(query).arg_types else "with", with_.copy())  # WITH c AS (...) INSERT
        self._canonical(query)
        self._canonical(target)
        for source in query.find_all(exp.Table):  # sqlglot would alias `FROM dbo.Orders` as its folded name
            if not source.alias and isinstance(source.this, exp.Identifier):
                source.set("alias", exp.TableAlias(this=exp.to_identifier(source.name, quoted=True)))
        table = self._table_name(target)
        if table is None:
            return None
        if columns is None and isinstance(node, exp.Insert):
            known = self.table_columns(table) if self.table_columns else None
            if not known:
                return None  # INSERT INTO t SELECT ...: which column gets which value depends on t's definition
            columns = list(known)
        ctes = {cte.alias.casefold(): cte.this for cte in query.find_all(exp.CTE)}
        self._expand_stars(query, ctes)
        self._qualify_by_source(query, ctes)
        selects = query.selects
        if columns is not None and (len(columns) != len(selects) or any(_is_star(s) for s in selects)):
            return None  # which value goes to which column is not known
        names = self._name_projections(query)
        outputs = columns if columns is not None else names
        # every identifier is quoted and normalised by now: sqlglot's default dialect compares them exactly (T-SQL's
        # own would fold even quoted names to lower case)
        try:
            nodes = lineage(None, query, schema={}, dialect=None, copy=False)
        except OptimizeError:
            nodes = _lineage_in_parts(query, names)
        lineage_of: dict[str, tuple[ColumnSource, ...]] = {}
        for output, name, projection in zip(outputs, names, selects):
            if name is None or output is None or _is_star(projection) or name not in nodes:
                continue
            sources = self._sources(nodes[name])
            if sources:
                lineage_of[output] = sources
        return table, lineage_of

    # ---- sources -----------------------------------------------------------------------------------------

    def _sources(self, root: Node) -> tuple[ColumnSource, ...] | None:
        """The table columns a projection is computed from, with the strongest subtype on the way to each;
        None when one of them cannot be told."""
        found: dict[tuple[str, str], str] = {}
        stack: list[tuple[Node, str]] = [(root, IDENTITY)]
        while stack:
            node, subtype = stack.pop()
            if isinstance(node.expression, exp.Table):
                leaf = self._leaf(node)
                if leaf is None:
                    return None
                previous = found.get(leaf)
                if previous is None or _RANK[subtype] > _RANK[previous]:
                    found[leaf] = subtype
                continue
            if not node.downstream:
                if isinstance(node.expression, exp.Placeholder) or isinstance(node.source, exp.Placeholder):
                    return None  # a column whose table cannot be told
                continue  # a literal or a function without columns
            # a set operation's node carries its left branch's projection: each branch says what it does itself
            step = IDENTITY if isinstance(node.source, exp.SetOperation) else _subtype(node.expression)
            step = step if _RANK[step] > _RANK[subtype] else subtype
            stack.extend((child, step) for child in node.downstream)
        return tuple((table, column, subtype) for (table, column), subtype in sorted(found.items()))

    def _leaf(self, node: Node) -> tuple[str, str] | None:
        table = self._table_name(node.expression)
        if table is None:
            return None
        try:
            parts = _column_parts(node.name)  # "alias"."column", as sqlglot's lineage names the leaf
        except (SqlglotError, ValueError):
            return None
        if not parts:
            return None
        return table, parts[-1].name

    # ---- names -------------------------------------------------------------------------------------------

    def _canonical(self, tree: exp.Expr) -> None:
        """Every identifier normalised by the dialect's case rule and quoted, so sqlglot compares them exactly
        (T-SQL: the first spelling of a name in the text stands for all its spellings)."""
        for ident in tree.find_all(exp.Identifier, bfs=False):  # depth first: in the text's order (first spelling)
            if ident.args.get("quoted"):
                continue
            ident.set("this", self._ident_text(ident.name))
            ident.set("quoted", True)

    def _ident_text(self, text: str) -> str:
        if self.rules.case == "upper":
            return text.upper()
        if self.rules.case == "lower":
            return text.lower()
        return self.spelling.setdefault(text.casefold(), text)

    def _table_name(self, table: exp.Expr) -> str | None:
        """The qualified name of a table reference, as table_lineage reports it; None for temp tables,
        table functions and anything else that is not a dataset."""
        if not isinstance(table, exp.Table) or not isinstance(table.this, (exp.Identifier, exp.Dot)):
            return None
        parts = four_parts(table) if isinstance(table.this, exp.Dot) else table.parts
        if not parts or not all(isinstance(p, exp.Identifier) for p in parts):
            return None
        last = parts[-1]
        if last.args.get("temporary") or last.args.get("global_") or last.name.startswith("#"):
            return None
        if len(parts) == 1 and last.name.casefold() in self.rules.pseudo_tables:  # a trigger's `inserted`
            return None
        texts = [p.name for p in parts]
        if len(parts) < 4 and table.args.get("catalog") and not table.args.get("db"):  # db..t
            texts = [*texts[:-1], "", texts[-1]]
        name = joined_name(self._qualify(texts), self.part_quotes)
        if name.casefold() in self.temps or ".".join(texts).casefold() in self.temps or \
                texts[-1].casefold() in self.temps:
            return None
        return name

    def _qualify(self, parts: list[str]) -> list[str]:
        return qualified_parts(parts, self.rules, self.database, self.schema)

    def _default(self, value: str | None) -> str | None:
        return default_identifier(value, self.rules)

    # ---- projections -------------------------------------------------------------------------------------

    def _expand_stars(self, query: exp.Expr, ctes: dict[str, exp.Expr]) -> None:
        """``*`` / ``t.*`` written out where the columns of every source it covers are known: base tables from
        ``table_columns``, CTEs and subqueries from their own projections (innermost first, so a star over a CTE
        whose body had one is written out too)."""
        for select in reversed(list(query.find_all(exp.Select))):
            if not any(_is_star(p) for p in select.expressions):
                continue
            sources = _sources(select)
            expanded: list[exp.Expr] = []
            for projection in select.expressions:
                if not _is_star(projection):
                    expanded.append(projection)
                    continue
                qualifier = projection.table if isinstance(projection, exp.Column) else ""
                chosen = [t for t in sources if not qualifier or t.alias_or_name == qualifier]
                columns = [self._source_columns(t, ctes) for t in chosen]
                if not chosen or any(c is None for c in columns) or len(chosen) != len(sources) and not qualifier:
                    expanded.append(projection)  # stays a star: unknown
                    continue
                for source, known in zip(chosen, columns):
                    alias = source.alias_or_name
                    expanded.extend(exp.column(exp.to_identifier(c, quoted=True),
                                               table=exp.to_identifier(alias, quoted=True)) for c in known or ())
            select.set("expressions", expanded)

    def _qualify_by_source(self, query: exp.Expr, ctes: dict[str, exp.Expr]) -> None:
        """Unqualified projection columns given the one source they can come from: the select's only source, or
        the only one of its sources (all of them known) that has the column. sqlglot leaves them to its schema,
        which is empty here (and it loses them in a CTE after the first). Only selects whose columns cannot be
        an outer query's (the query, its CTEs, subqueries in FROM / JOIN); a name another projection uses as its
        alias is left alone (it may mean the alias)."""
        for select in list(query.find_all(exp.Select)):
            sources = _sources(select)
            if not sources or not _standalone(select):
                continue
            known = [self._source_columns(t, ctes) for t in sources] if len(sources) > 1 else [None]
            aliases = {p.alias.casefold() for p in select.expressions if isinstance(p, exp.Alias)}
            for projection in select.expressions:
                own = projection.alias.casefold() if isinstance(projection, exp.Alias) else ""
                for column in list(projection.find_all(exp.Column)):
                    name = column.name.casefold()
                    if column.table or name in aliases - {own} or column.find_ancestor(exp.Select) is not select:
                        continue
                    if len(sources) == 1:
                        holder: exp.Expr | None = sources[0]
                    elif any(k is None for k in known):
                        continue
                    else:
                        holders = [t for t, k in zip(sources, known) if name in {c.casefold() for c in k or ()}]
                        holder = holders[0] if len(holders) == 1 else None
                    if holder is not None and holder.alias_or_name:
                        column.set("table", exp.to_identifier(holder.alias_or_name, quoted=True))

    def _source_columns(self, source: exp.Expr, ctes: dict[str, exp.Expr]) -> list[str] | None:
        """The columns a FROM / JOIN source gives, when known: a CTE's or subquery's named projections (no star
        left), a base table's from ``table_columns``."""
        body: exp.Expr | None = source.this if isinstance(source, exp.Subquery) else None
        if isinstance(source, exp.Table) and not source.db and source.name.casefold() in ctes:
            body = ctes[source.name.casefold()]
        if body is not None:
            if not isinstance(body, (exp.Select, exp.SetOperation)) or any(_is_star(p) for p in body.selects):
                return None
            names = [p.alias_or_name for p in body.selects]
            return names if all(names) else None
        if isinstance(source, exp.Table):
            return self._known_columns(source)
        return None

    def _known_columns(self, table: exp.Table) -> list[str] | None:
        name = self._table_name(table)
        known = self.table_columns(name) if name and self.table_columns else None
        return [self._ident_text(c) for c in known] if known else None

    def _name_projections(self, query: exp.Select | exp.SetOperation) -> list[str | None]:
        """The output name of each projection of the (left-most) select, naming unnamed ones by position."""
        selects = query.selects
        names: list[str | None] = []
        for position, projection in enumerate(selects):
            if _is_star(projection):
                names.append(None)
                continue
            name = projection.alias_or_name
            if not name or not isinstance(projection, (exp.Alias, exp.Column)):
                name = f"_col_{position}"
                projection.replace(exp.alias_(projection.copy(), exp.to_identifier(name, quoted=True)))
            names.append(name)
        return names


def _lineage_in_parts(query: exp.Expr, names: list[str | None]) -> dict[str, Node]:
    """The lineage of a query sqlglot could not qualify as a whole: a column one clause names that sqlglot cannot
    place fails every output column. First without the clauses that choose or group rows (`WHERE b IN (SELECT b FROM
    t2)`: b may be the outer query's; `GROUP BY Age` naming the alias AGE; a join's ON naming a column its subquery
    does not give): no written value comes from them. Then, for a plain SELECT, each projection alone (`(SELECT
    avg(c) FROM t3) AS x, col2`: col2 is certain); a projection naming another one's alias is left out (`a AS b,
    b + 1 AS c`: whether b is the alias or a column depends on the dialect)."""
    bare = _without_filters(query)
    try:
        return lineage(None, bare.copy(), schema={}, dialect=None, copy=False)
    except OptimizeError:
        pass
    if not isinstance(bare, exp.Select):
        return {}
    aliases = {name.casefold() for name in names if name}
    nodes: dict[str, Node] = {}
    for name, projection in zip(names, bare.expressions):
        if name is None:
            continue
        named = {c.name.casefold() for c in projection.find_all(exp.Column) if not c.table}
        if named & (aliases - {name.casefold()}):
            continue
        alone = bare.copy()
        alone.set("expressions", [projection.copy()])
        try:
            nodes.update(lineage(None, alone, schema={}, dialect=None, copy=False))
        except OptimizeError:
            continue  # this projection's own columns cannot be placed: left out
    return nodes


def _without_filters(query: exp.Expr) -> exp.Expr:
    """A copy of `query` with the clauses that choose or group rows (WHERE, GROUP BY, HAVING, QUALIFY, JOIN ... ON)
    removed from each of its SELECTs: what remains names every column a projection's value is computed from."""
    query = query.copy()
    for select in list(query.find_all(exp.Select)):
        for clause in _FILTERS:
            select.set(clause, None)
    for join in list(query.find_all(exp.Join)):
        join.set("on", None)  # a join's condition chooses rows too
    return query


_FILTERS = ("where", "group", "having", "qualify")


def _parse(text: str, dialect: str) -> list[exp.Expr | None]:
    """The batch's statements; when sqlglot rejects the batch, each `;`-separated statement on its own, so one it
    cannot read (`INSERT ...; FORGOT TO COMMENT`) costs only itself."""
    reader = Dialect.get_or_raise(dialect)
    tokens = reader.tokenize(text)
    try:
        return reader.parser().parse(tokens, text)
    except ParseError:
        pass
    statements: list[exp.Expr | None] = []
    start = 0
    for end in [*(i for i, t in enumerate(tokens) if t.token_type == TokenType.SEMICOLON), len(tokens)]:
        if end > start:
            try:
                statements.extend(reader.parser().parse(tokens[start:end], text))
            except ParseError:
                pass
        start = end + 1
    return statements


def _column_parts(name: str) -> list[exp.Identifier]:
    column = exp.maybe_parse(name, into=exp.Column)
    return [p for p in column.parts if isinstance(p, exp.Identifier)] if isinstance(column, exp.Column) else []


def _is_star(projection: exp.Expr) -> bool:
    return isinstance(projection, exp.Star) or (isinstance(projection, exp.Column) and projection.is_star)


def _sources(select: exp.Select) -> list[exp.Expr]:
    """The sources of a select's FROM and JOINs (tables, CTE names, subqueries); none when one is anything else
    (a table function, UNNEST, VALUES ...: its columns are not known)."""
    sources: list[exp.Expr] = []
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is not None:
        sources.append(from_.this)
    sources.extend(join.this for join in select.args.get("joins") or ())
    return sources if all(isinstance(s, (exp.Table, exp.Subquery)) and isinstance(s.this, (exp.Identifier, exp.Query))
                          for s in sources) else []


def _standalone(select: exp.Select) -> bool:
    """Whether the select's columns can only be its own sources': the query itself, a CTE body, a subquery in
    FROM / JOIN, a branch of a set operation of those (not a subquery in an expression, which may be correlated)."""
    node: exp.Expr = select
    while node.parent is not None:
        parent = node.parent
        if isinstance(parent, exp.Select) and node.arg_key not in ("from_", "from", "joins", "with_", "with"):
            return False
        if not isinstance(parent, (exp.Select, exp.Subquery, exp.SetOperation, exp.CTE, exp.With, exp.From,
                                   exp.Join)):
            return False
        node = parent
    return True


def _subtype(expression: exp.Expr) -> str:
    inner = expression.this if isinstance(expression, exp.Alias) else expression
    if isinstance(inner, (exp.Column, exp.SetOperation, exp.Table, exp.Subquery)):
        return IDENTITY
    if inner.find(exp.AggFunc) is not None:
        return AGGREGATION
    return TRANSFORMATION
