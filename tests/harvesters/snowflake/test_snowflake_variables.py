"""Session variables naming tables (harvesters/snowflake/variables.py): each text with the session's variables
before it, the text as it is parsed, and the variables after it."""
from __future__ import annotations

import pytest

from harvesters.snowflake.variables import resolve

T = "'db.s.t'"
# (text, the session's variables before, the text resolved, the variables after)
CASES = [
    ("SET tbl = 'db.s.t'", {}, "SET tbl = 'db.s.t'", {"TBL": T}),
    ("set Tbl='db.s.t';", {}, "set Tbl='db.s.t';", {"TBL": T}),
    ("INSERT INTO IDENTIFIER($tbl) SELECT * FROM src", {"TBL": T},
     "INSERT INTO IDENTIFIER('db.s.t') SELECT * FROM src", {"TBL": T}),
    # names are case-insensitive; a reference to a variable not known is left as written
    ("INSERT INTO identifier( $TBL ) SELECT * FROM IDENTIFIER($other)", {"TBL": T},
     "INSERT INTO identifier( 'db.s.t' ) SELECT * FROM IDENTIFIER($other)", {"TBL": T}),
    ("SELECT * FROM TABLE($tbl)", {"TBL": T}, "SELECT * FROM TABLE('db.s.t')", {"TBL": T}),
    # set and used in one text; a list of variables
    ("SET (a, b) = ('x.y.t1', 'x.y.t2'); INSERT INTO IDENTIFIER($a) SELECT * FROM IDENTIFIER($b)", {},
     "SET (a, b) = ('x.y.t1', 'x.y.t2'); INSERT INTO IDENTIFIER('x.y.t1') SELECT * FROM IDENTIFIER('x.y.t2')",
     {"A": "'x.y.t1'", "B": "'x.y.t2'"}),
    ("-- the target\nSET tbl = 'db.s.t'", {}, "-- the target\nSET tbl = 'db.s.t'", {"TBL": T}),
    # UNSET, and a value that is not a string literal: unknown from then on
    ("UNSET tbl; INSERT INTO IDENTIFIER($tbl) SELECT 1", {"TBL": T},
     "UNSET tbl; INSERT INTO IDENTIFIER($tbl) SELECT 1", {}),
    ("UNSET (a, tbl)", {"A": "'x'", "TBL": T, "C": "'y'"}, "UNSET (a, tbl)", {"C": "'y'"}),
    ("SET tbl = (SELECT max(name) FROM t)", {"TBL": T}, "SET tbl = (SELECT max(name) FROM t)", {}),
    ("SET (a, b) = (concat('a', 'b'), 'y')", {"A": "'x'"}, "SET (a, b) = (concat('a', 'b'), 'y')", {}),
    ("SET n = 3", {}, "SET n = 3", {}),
    # SET inside other statements sets no variable; stage columns are not variables
    ("UPDATE t SET col = 'x' WHERE id = 1", {}, "UPDATE t SET col = 'x' WHERE id = 1", {}),
    ("ALTER SESSION SET QUERY_TAG = 'etl'", {}, "ALTER SESSION SET QUERY_TAG = 'etl'", {}),
    ("SELECT $1, $2 FROM @stage", {"TBL": T}, "SELECT $1, $2 FROM @stage", {"TBL": T}),
    # a value that starts with a literal and goes on is an expression; a ';' inside a literal ends nothing
    ("SET tbl = 'db.s.' || 't'", {"TBL": T}, "SET tbl = 'db.s.' || 't'", {}),
    ("SET q = 'a;b'", {}, "SET q = 'a;b'", {"Q": "'a;b'"}),
    # a statement held by a variable, dollar-quoted as Snowflake's docs write it, run by EXECUTE IMMEDIATE
    ("SET stmt = $$INSERT INTO x.y.t SELECT 1$$; EXECUTE IMMEDIATE $stmt;", {},
     "SET stmt = $$INSERT INTO x.y.t SELECT 1$$; EXECUTE IMMEDIATE $$INSERT INTO x.y.t SELECT 1$$;",
     {"STMT": "$$INSERT INTO x.y.t SELECT 1$$"}),
    ("EXECUTE IMMEDIATE $stmt USING (v)", {"STMT": "'DELETE FROM t'"}, "EXECUTE IMMEDIATE 'DELETE FROM t' USING (v)",
     {"STMT": "'DELETE FROM t'"}),
    ("SET t = $$x.y.t$$; SELECT * FROM IDENTIFIER($t)", {}, "SET t = $$x.y.t$$; SELECT * FROM IDENTIFIER('x.y.t')",
     {"T": "$$x.y.t$$"}),
    ("SET t = $$x.y$$ || $$.t$$", {"T": T}, "SET t = $$x.y$$ || $$.t$$", {}),
]


@pytest.mark.parametrize("text,before,resolved,after", CASES, ids=[c[0][:40] for c in CASES])
def test_resolve(text, before, resolved, after):
    assert resolve(text, before) == (resolved, after)


def test_a_text_that_can_hold_no_variable_returns_the_same_mapping():
    variables = {"TBL": T}
    assert resolve("INSERT INTO t SELECT * FROM s", variables)[1] is variables
