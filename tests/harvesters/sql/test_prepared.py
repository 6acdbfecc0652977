"""harvesters.sql.prepared: what drivers' prepared and cursor calls carry, as SQL Server logs them; the lineage cache
shapes and reads them by the statement inside (table and column lineage)."""
from __future__ import annotations

import pytest

from harvesters.sql.cache import LineageCache, statement_shape
from harvesters.sql.prepared import PreparedCall, prepared_call

PREPEXEC = ("declare @p1 int\r\nset @p1=1073741825\r\nexec sp_prepexec @p1 output,N'@P0 int',"
            "N'INSERT INTO dbo.t (a, b) SELECT x, y + 1 FROM dbo.s WHERE z = @P0 AND w = ''it''''s''',42\r\nselect @p1")

# (logged text, what it is)
CASES = [
    (PREPEXEC, PreparedCall("sp_prepexec", True, "1073741825",
                            "INSERT INTO dbo.t (a, b) SELECT x, y + 1 FROM dbo.s WHERE z = @P0 AND w = 'it''s'")),
    ("exec sp_prepexec @p1 output,NULL,N'SELECT name FROM t'",
     PreparedCall("sp_prepexec", True, None, "SELECT name FROM t")),
    ("declare @p1 int\nset @p1=-1\nexec sp_prepare @p1 output,N'@P0 int',N'DELETE FROM t WHERE id = @P0',1\nselect @p1",
     PreparedCall("sp_prepare", False, None, "DELETE FROM t WHERE id = @P0")),
    ("declare @p1 int\nset @p1=7\nexec sp_prepare @p1 output,N'',N'DELETE FROM t',1\nselect @p1",
     PreparedCall("sp_prepare", False, "7", "DELETE FROM t")),
    ("exec sp_execute 7,N'x',3", PreparedCall("sp_execute", True, "7", None)),
    ("exec sp_execute @h", PreparedCall("sp_execute", True, None, None)),
    ("declare @p1 int\nset @p1=180150003\ndeclare @p3 int\nset @p3=8\nexec sp_cursoropen @p1 output,N'SELECT * FROM t',"
     "@p3 output\nselect @p1, @p3", PreparedCall("sp_cursoropen", True, None, "SELECT * FROM t")),
    ("declare @p1 int\nset @p1=9\ndeclare @p2 int\nset @p2=4\nexec sp_cursorprepexec @p1 output,@p2 output,NULL,"
     "N'SELECT * FROM u',4,1,1\nselect @p1, @p2", PreparedCall("sp_cursorprepexec", True, "9", "SELECT * FROM u")),
    ("exec sp_cursorexecute 9,@p2 output", PreparedCall("sp_cursorexecute", True, "9", None)),
    ("EXEC [sys].[sp_prepexec] @h OUTPUT, N'', N'SELECT 1'", PreparedCall("sp_prepexec", True, None, "SELECT 1")),
    ("exec sp_reset_connection", PreparedCall("sp_reset_connection", False)),
    ("exec sp_unprepare 7", PreparedCall("sp_unprepare", False)),
    ("exec sp_executesql N'SELECT 1'", None),  # sp_executesql is read by the engine itself
    ("SELECT sp_prepare_count FROM dbo.stats", None),
    ("exec dbo.sp_prepare_month 3", None),
    ("INSERT INTO t SELECT * FROM s", None),
]


@pytest.mark.parametrize(("text", "call"), CASES)
def test_prepared_call(text: str, call: PreparedCall | None) -> None:
    assert prepared_call(text) == call


@pytest.mark.parametrize(("first", "second", "same"), [
    (PREPEXEC, PREPEXEC.replace("set @p1=1073741825", "set @p1=5").replace(",42", ",43"), True),  # other handle, value
    (PREPEXEC, PREPEXEC.replace("dbo.s", "dbo.s2"), False),  # other statement inside
    ("exec sp_execute 7,N'x'", "exec sp_execute 8,N'y'", True),  # resolved by the harvester, not the engine
])
def test_shape_is_the_statement_inside(first: str, second: str, same: bool) -> None:
    assert (statement_shape(first) == statement_shape(second)) is same


def test_cache_reads_the_statement_a_prepexec_carries() -> None:
    found = LineageCache("tsql", "dbo").lineage(PREPEXEC, "DW")
    assert (found.inputs, found.outputs, found.statement_types, found.error) == (
        ("DW.dbo.s",), ("DW.dbo.t",), ("INSERT",), None)
    assert found.columns == (("DW.dbo.t", (("a", (("DW.dbo.s", "x", "IDENTITY"),)),
                                           ("b", (("DW.dbo.s", "y", "TRANSFORMATION"),)))),)
