"""`harvest sqlserver --xml` given something that is not Extended Events XML: it says what the file is and exits 2,
state untouched; a blank export is 0 events, exit 0."""
from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from harvesters.sqlserver.command import BINARY, BINARY_XEL, NO_EVENTS

from harvest_cli import run_harvest

EVENT = ('<event name="sql_statement_completed" package="sqlserver" timestamp="2024-05-14T02:00:00.000Z">'
         '<data name="duration"><value>1000</value></data>'
         '<data name="statement"><value><![CDATA[INSERT INTO dbo.b SELECT * FROM dbo.a]]></value></data>'
         '<action name="session_id" package="sqlserver"><value>51</value></action>'
         '<action name="database_name" package="sqlserver"><value>DW</value></action>'
         '<action name="client_app_name" package="sqlserver"><value>python_task::task1</value></action>'
         '</event>\n')
# the first bytes of an .xel file as SQL Server writes it: a binary header with NUL bytes
XEL_HEAD = bytes.fromhex("0000000000000000000100000000000000") + "openlineage".encode("utf-16-le") + b"\x00" * 64

# (file name, content, exit code, what stderr says)
CASES = [
    ("openlineage_0_133.xel", XEL_HEAD, 2, f": {BINARY_XEL}"),
    ("events.xml", XEL_HEAD, 2, f": {BINARY}"),
    ("events.xml", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 2, f": {BINARY}"),
    ("history.csv", b"QUERY_ID,START_TIME,QUERY_TEXT\nq1,2024-06-01 01:00:00,SELECT 1\n", 2, f": {NO_EVENTS}"),
    ("events.xml", b"<html><body>502 Bad Gateway</body></html>\n", 2, f": {NO_EVENTS}"),
    ("events.xml", b'<?xml version="1.0"?><RingBufferTarget eventsPerSec="0"></RingBufferTarget>', 2, f": {NO_EVENTS}"),
    ("events.xml", b"", 0, "0 events read"),
    ("events.xml", b"\r\n  \n", 0, "0 events read"),
    ("events.xml", EVENT.encode(), 0, "1 events read"),
    ("events.xml", codecs.BOM_UTF16_LE + EVENT.encode("utf-16-le"), 0, "1 events read"),  # sqlcmd -u
]


@pytest.mark.parametrize(("name", "content", "code", "said"), CASES)
def test_what_the_file_is(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes, code: int,
                          said: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    state = tmp_path / "state.json"
    got, events = run_harvest(tmp_path / "events.jsonl",
                              ["sqlserver", "--server", "h", "--xml", str(path), "--state", str(state)])
    err = capsys.readouterr().err
    assert got == code, err
    assert said in err
    assert "Traceback" not in err
    if code == 2:
        assert f"harvest sqlserver: {path}{said}" in err
        assert events == [] and not state.exists()
    else:
        assert len(events) == (4 if "1 events" in said else 0)
        # the position saved is past what was read (UTF-16 is counted in its UTF-8 form)
        read = len(content.decode("utf-16").encode()) if content.startswith(codecs.BOM_UTF16_LE) else len(content)
        assert json.loads(state.read_text())["files"][str(path)]["offset"] == (read if "1 events" in said else 0)


def test_a_file_with_events_after_the_saved_position_and_none_new_is_fine(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing new since the last harvest is not "no <event> found": that check is for a file read from its start."""
    path = tmp_path / "events.xml"
    path.write_text(EVENT)
    state = tmp_path / "state.json"
    args = ["sqlserver", "--server", "h", "--xml", str(path), "--state", str(state)]
    assert run_harvest(tmp_path / "events.jsonl", args)[0] == 0
    path.write_text(EVENT + "\n\n")
    code, events = run_harvest(tmp_path / "events.jsonl", args)
    assert (code, events) == (0, [])
    assert "0 events read" in capsys.readouterr().err
