"""harvesters.sqlserver.xevents: the three input shapes, bad input, resume offsets, bounded pieces."""
from __future__ import annotations

import codecs
import io
from datetime import datetime, timezone

import pytest

from harvesters.sqlserver import xevents
from harvesters.sqlserver.xevents import Unreadable, XEvent, parse_event, parse_time, read_events, read_file

from paths import SHARED

SAMPLES = SHARED / "xevents-samples"


def _sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes().strip()


E01 = "01_sql_statement_completed_insert_select.xml"
E04 = "04_sql_statement_completed_update_join.xml"


def _kinds(items) -> list[tuple[str, str]]:
    return [("event", i.value.name) if isinstance(i.value, XEvent) else ("unreadable", i.value.reason)
            for i in items]


# sample file -> (event name, timestamp, session_id, database_name, client_app_name, sql field prefix)
SAMPLE_CASES = [
    (E01, [("sql_statement_completed", "2024-05-14T02:15:07.482+00:00", "87", "DW",
            "SSIS-LoadFactSales-{7C1E2B40-5A3D-4F0E-9C11-3B8E2D6A9F01}", "INSERT INTO [DW].[dbo].[FactSales]")]),
    ("02_sql_statement_completed_select_into_temp.xml",
     [("sql_statement_completed", "2024-05-14T02:20:11.905+00:00", "112", "WideWorldImporters",
       "Microsoft SQL Server Management Studio - Query", "SELECT o.OrderID")]),
    ("03_sp_statement_completed_merge.xml",
     [("sp_statement_completed", "2024-05-14T02:30:44.117+00:00", "87", "DW", ".Net SqlClient Data Provider",
       "MERGE dbo.DimCustomer")]),
    (E04, [("sql_statement_completed", "2024-05-14T03:02:19.350+00:00", "64", "OrdersDb", "OrderStatusSync",
            "UPDATE t")]),
    ("05_sql_batch_completed_cte_insert.xml",
     [("sql_batch_completed", "2024-05-14T03:10:02.771+00:00", "112", "WideWorldImporters", "sqlcmd",
       "SET NOCOUNT ON;")]),
    ("06_rpc_completed_exec_proc.xml",
     [("rpc_completed", "2024-05-14T02:30:45.002+00:00", "87", "DW", ".Net SqlClient Data Provider",
       "exec etl.usp_LoadDimCustomer")]),
    ("07_module_end_proc.xml",
     [("module_end", "2024-05-14T02:30:44.998+00:00", "87", "DW", ".Net SqlClient Data Provider",
       "EXEC etl.usp_LoadDimCustomer")]),
    ("08_rpc_completed_sp_executesql.xml",
     [("rpc_completed", "2024-05-14T03:41:27.064+00:00", "71", "OrdersDb", "Core Microsoft SqlClient Data Provider",
       "exec sp_executesql N'INSERT INTO [dbo].[AuditLog]")]),
    ("09_sql_statement_completed_insert_from_temp.xml",
     [("sql_statement_completed", "2024-05-14T02:20:12.318+00:00", "112", "WideWorldImporters",
       "Microsoft SQL Server Management Studio - Query", "INSERT INTO ReportingDb.Sales.OrderArchive")]),
    ("10_ring_buffer_target.xml",
     [("sql_statement_completed", "2024-05-14T04:00:03.127+00:00", "95", "Finance",
       "SQLAgent - TSQL JobStep (Job 0x8F1C2D3E4B5A69788796A5B4C3D2E1F0 : Step 2)", "INSERT INTO [Finance]"),
      ("sql_batch_completed", "2024-05-14T04:00:03.131+00:00", "95", "Finance",
       "SQLAgent - TSQL JobStep (Job 0x8F1C2D3E4B5A69788796A5B4C3D2E1F0 : Step 2)", "DELETE FROM [Finance]")]),
]


@pytest.mark.parametrize("name,expected", SAMPLE_CASES, ids=[c[0][:2] for c in SAMPLE_CASES])
def test_samples(name, expected):
    items = list(read_file(str(SAMPLES / name)))
    got = []
    for item in items:
        ev = item.value
        assert isinstance(ev, XEvent), ev
        sql = ev.data.get("statement") or ev.data.get("batch_text") or ""
        got.append((ev.name, ev.timestamp.isoformat(timespec="milliseconds"), ev.actions["session_id"],
                    ev.actions["database_name"], ev.actions["client_app_name"],
                    sql[:len(next(e[5] for e in expected if e[0] == ev.name))]))
    assert got == expected
    assert items[-1].resume_offset == (SAMPLES / name).stat().st_size


def test_map_fields_and_types_are_read():
    ev = parse_event(_sample("05_sql_batch_completed_cte_insert.xml"))
    assert (ev.data["result"], ev.texts["result"], ev.data["duration"]) == ("0", "OK", "188412")
    ring = [i.value for i in read_file(str(SAMPLES / "10_ring_buffer_target.xml"))]
    # ring buffer fields carry a <type> child: the value is still the <value> text
    assert ring[0].data["row_count"] == "2200"
    assert ring[0].actions["attach_activity_id"] == "6A5B4C3D-2E1F-4A0B-9C8D-7E6F5A4B3C2D-2"


@pytest.mark.parametrize("text,expected", [
    ("2024-05-14T02:15:07.482Z", datetime(2024, 5, 14, 2, 15, 7, 482000, timezone.utc)),
    ("2024-05-14T02:15:07.4821237Z", datetime(2024, 5, 14, 2, 15, 7, 482123, timezone.utc)),  # 7 digits: cut
    ("2024-05-14T02:15:07Z", datetime(2024, 5, 14, 2, 15, 7, tzinfo=timezone.utc)),
    ("2024-05-14T04:15:07.5+02:00", datetime(2024, 5, 14, 2, 15, 7, 500000, timezone.utc)),
])
def test_parse_time(text, expected):
    assert parse_time(text) == expected


A, B = _sample(E01), _sample(E04)
BIG_STATEMENT = A.replace(b"WHERE s.[BatchId]", b"WHERE " + b"1 = 1 AND " * 1_000_000 + b"s.[BatchId]")

# name -> (input bytes, expected items). One case per line; every case must keep B.
BAD_INPUT_CASES = [
    ("one per line", A + b"\n" + B + b"\n", [("event", "sql_statement_completed")] * 2),
    ("stream, no separator", A + B, [("event", "sql_statement_completed")] * 2),
    ("ring buffer on one line", b'<?xml version="1.0"?><RingBufferTarget eventCount="2">' + A + B
     + b"</RingBufferTarget>", [("event", "sql_statement_completed")] * 2),
    ("truncated outside CDATA", A[:500] + b"\n" + B, [("unreadable", "truncated event"),
                                                      ("event", "sql_statement_completed")]),
    ("truncated inside CDATA", A[:1200] + b"\n" + B, [("unreadable", "truncated event"),
                                                      ("event", "sql_statement_completed")]),
    ("invalid UTF-8", A.replace(b"FactSales", b"Fact\xffSales", 1) + b"\n" + B,
     [("unreadable", "invalid UTF-8"), ("event", "sql_statement_completed")]),
    ("junk line", A + b"\n(2 rows affected)\n" + B, [("event", "sql_statement_completed"),
                                                     ("unreadable", "text between events"),
                                                     ("event", "sql_statement_completed")]),
    ("<event inside a statement", A.replace(b"WHERE s.", b"WHERE '<event x>' = s.") + B,
     [("event", "sql_statement_completed")] * 2),
    ("unknown event", b'<event name="lock_acquired" package="sqlserver" timestamp="2024-05-14T02:00:00Z">'
     b'<data name="mode"><value>3</value></data></event>\n' + B,
     [("event", "lock_acquired"), ("event", "sql_statement_completed")]),
    ("no timestamp", b'<event name="x" package="y"><data name="a"><value>1</value></data></event>' + B,
     [("unreadable", "malformed event"), ("event", "sql_statement_completed")]),
    ("10 MB statement", BIG_STATEMENT + b"\n" + B, [("event", "sql_statement_completed")] * 2),
    ("leading junk", b"event_data\n----------\n" + A + b"\n" + B, [("event", "sql_statement_completed")] * 2),
]


@pytest.mark.parametrize("data,expected", [c[1:] for c in BAD_INPUT_CASES], ids=[c[0] for c in BAD_INPUT_CASES])
@pytest.mark.parametrize("block", [xevents.BLOCK_BYTES, 97])  # small blocks: tags split across reads
def test_bad_input_is_counted_and_skipped(data, expected, block, monkeypatch):
    if block != xevents.BLOCK_BYTES and len(data) > 1_000_000:
        pytest.skip("10 MB in 97-byte blocks is slow and adds nothing")
    monkeypatch.setattr(xevents, "BLOCK_BYTES", block)
    items = list(read_events(io.BytesIO(data)))
    assert _kinds(items) == expected
    assert items[-1].value.actions["session_id"] == "64"  # B always survives
    assert items[-1].resume_offset == len(data)  # everything consumed


def test_truncated_at_end_keeps_the_position_before_it():
    data = A + b"\n" + B[:300]
    items = list(read_events(io.BytesIO(data)))
    assert _kinds(items) == [("event", "sql_statement_completed"), ("unreadable", "truncated event at end of input")]
    # the writer may still be appending: the position stays at the truncated event's start
    assert items[1].resume_offset == len(A) + 1 == items[0].resume_offset


@pytest.mark.parametrize("cut", range(1, len(b"<event ") + 1))
def test_a_next_event_cut_inside_its_tag_is_read_once_complete(cut):
    """The writer has written A and the first ``cut`` bytes of B's tag (`<`, `<e`, ... `<event `): A is read, the
    position stays right after it, and the next read, once B is whole, reads B. Before, a cut of 1-6 bytes left the
    position inside the tag and B was skipped, uncounted."""
    whole = A + b"\n" + B
    first = list(read_events(io.BytesIO(whole[:len(A) + 1 + cut])))
    assert _kinds(first)[0] == ("event", "sql_statement_completed")
    position = first[-1].resume_offset
    assert position <= len(A) + 1
    assert _kinds(read_events(io.BytesIO(whole), position)) == [("event", "sql_statement_completed")]


def test_oversized_event_is_skipped_with_bounded_memory():
    data = BIG_STATEMENT + b"\n" + B
    items = list(read_events(io.BytesIO(data), max_event_bytes=1_000_000))
    assert _kinds(items) == [("unreadable", "event larger than 1000000 bytes"), ("event", "sql_statement_completed")]
    assert isinstance(items[0].value, Unreadable) and items[0].value.offset == 0


def test_utf16_export_is_transcoded():
    data = codecs.BOM_UTF16_LE + (A.decode() + "\r\n" + B.decode() + "\r\n").encode("utf-16-le")
    assert _kinds(read_events(io.BytesIO(data))) == [("event", "sql_statement_completed")] * 2


@pytest.mark.parametrize("block", [xevents.BLOCK_BYTES, 101])
def test_resuming_from_every_offset_reads_exactly_the_rest(block, monkeypatch):
    monkeypatch.setattr(xevents, "BLOCK_BYTES", block)
    data = b"\n".join([A, B, A[:700], B, A]) + b"\n"
    items = list(read_events(io.BytesIO(data)))
    assert _kinds(items) == [("event", "sql_statement_completed")] * 2 + [("unreadable", "truncated event")] + \
        [("event", "sql_statement_completed")] * 2
    for index, item in enumerate(items):
        rest = list(read_events(io.BytesIO(data[item.resume_offset:])))
        resumed = list(read_events(io.BytesIO(data), item.resume_offset))
        assert _kinds(resumed) == _kinds(items[index + 1:]) == _kinds(rest)
        assert [i.resume_offset for i in resumed] == [i.resume_offset for i in items[index + 1:]]
