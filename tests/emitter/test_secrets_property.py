"""Property: a secret written in any syntax the redaction table knows never leaves the process.

Hypothesis draws secrets and puts them in every syntax below, in every place a source carries text (SQL text,
application name, QUERY_TAG, user name, error message, client hostname); none may survive into a serialized event
(``event_dict``), a log line (``RedactingFilter``), or the events file, spool, state file and stderr of a real
harvest (``harvest sqlserver`` over generated Extended Events, ``harvest snowflake`` over a generated export, both
with ``--state``, delivering to a refused HTTP port so that everything is spooled)."""
from __future__ import annotations

import json
import logging
import string
from datetime import datetime, timedelta, timezone
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emitter.naming import normalize_name
from emitter.records import FAIL, JobRef, JobType, RunRecord, RunRef
from emitter.redact import RedactingFilter, redact
from emitter.serialize import event_dict
from emitter.spool import Spool, describe_destination
from harvesters.cli import main

# Every syntax of the redaction table, {s} the secret: each becomes text the harvest reads.
SYNTAXES = [
    "ALTER LOGIN etl WITH PASSWORD = N'{s}'",
    "CREATE LOGIN l WITH PASSWORD = '{s}', CHECK_POLICY = OFF",
    "OPEN SYMMETRIC KEY k DECRYPTION BY PASSWORD = N'{s}'",
    "CREATE DATABASE SCOPED CREDENTIAL c WITH IDENTITY = 'u', SECRET = N'{s}'",
    "EXEC sp_addlinkedsrvlogin 'srv', 'false', NULL, 'rmt', N'{s}'",
    "EXEC sp_addlinkedsrvlogin @rmtsrvname = N'srv', @rmtuser = N'u', @rmtpassword = N'{s}'",
    "EXEC sp_addlogin 'u', '{s}'",
    "SELECT * FROM OPENROWSET('SQLNCLI', 'srv'; 'sa'; '{s}', 'SELECT 1')",
    "EXEC xp_cmdshell 'sqlcmd -S srv -U sa -P {s} -Q x'",
    "EXEC xp_cmdshell 'bcp db.dbo.t out f.dat -S srv -U sa -P{s} -c'",
    "Driver={{ODBC Driver 18}};Server=s;UID=u;Password=a {s};Database=d",
    "Server=s;PWD={{{s}}};UID=u",
    "jdbc:sqlserver://h:1433;user=sa;password={s};encrypt=true",
    "postgresql://bob:{s}@db.example.com:5432/app",
    "api_key: {s}",
    '{{"client_secret": "{s}"}}',
    "--password {s} --user bob",
    "Authorization: Bearer {s}",
    "CREATE USER scott IDENTIFIED BY {s}",
    "CREATE STAGE s URL='s3://b/' CREDENTIALS=(AWS_KEY_ID='k' AWS_SECRET_KEY='{s}')",
    "DECLARE @api_key NVARCHAR(64) = N'{s}'",
    "apikey {s}",
    "token ghp_{s}",
    "AccountKey={s};EndpointSuffix=core.windows.net",
]

# Secrets: 20-30 characters alternating letters and digits (random-looking, so the shape rules apply too),
# starting with "Zq" so that no other text of the run can contain one by chance.
_letters = st.text(alphabet=string.ascii_letters, min_size=10, max_size=15)
_digits = st.text(alphabet=string.digits, min_size=10, max_size=15)
secrets = st.builds(lambda a, b: "Zq" + "".join(x + y for x, y in zip(a, b)), _letters, _digits)


def texts(secret: str) -> list[str]:
    return [syntax.format(s=secret) for syntax in SYNTAXES]


@settings(max_examples=60, deadline=None)
@given(secret=secrets, syntax=st.sampled_from(SYNTAXES), before=st.sampled_from(["", "x ", "-- note\n", "(" ]),
       after=st.sampled_from(["", " ", ";", "\n", ")"]))
def test_no_secret_survives_redaction(secret: str, syntax: str, before: str, after: str) -> None:
    text = before + syntax.format(s=secret) + after
    out = redact(text)
    assert secret not in out, (text, out)
    assert redact(out) == out


_RUN = RunRef("01900000-0000-7000-8000-0000000000aa", JobRef("default", "etl.load"))


@settings(max_examples=20, deadline=None)
@given(secret=secrets)
def test_no_secret_in_a_serialized_event(secret: str) -> None:
    from openlineage.client.facet_v2 import error_message_run, sql_job

    for text in texts(secret):
        record = RunRecord(
            FAIL, datetime(2024, 5, 14, tzinfo=timezone.utc), JobRef("default", f"etl.{text}"),
            "01900000-0000-7000-8000-0000000000bb", JobType("QUERY", "SQLSERVER"), parent=_RUN,
            run_facets={"errorMessage": error_message_run.ErrorMessageRunFacet(message=text,
                                                                               programmingLanguage="SQL")},
            job_facets={"sql": sql_job.SQLJobFacet(query=text)})
        serialized = json.dumps(event_dict(record)).lower()
        assert secret.lower() not in serialized, text


@settings(max_examples=20, deadline=None)
@given(secret=secrets)
def test_no_secret_in_a_log_line(secret: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    log_file = tmp_path_factory.mktemp("log") / "log.txt"
    handler = logging.FileHandler(log_file)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("test_secrets_property")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for text in texts(secret):
            logger.warning("statement %s failed", text)
            logger.warning(text)
            try:
                raise RuntimeError(text)
            except RuntimeError:
                logger.exception("delivery failed")
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert secret not in log_file.read_text()


# ---- real harvests: events file, spool, state file, stderr ------------------------------------------------

ACT = "A1B2C3D4-0000-4000-8000-0000000000"


def _xe(name: str, at: datetime, data: str, app: str, host: str, seq: int, activity: str) -> str:
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    actions = "".join(f'<action name="{k}" package="sqlserver"><value>{escape(v)}</value></action>' for k, v in (
        ("session_id", "51"), ("database_name", "Sales"), ("client_hostname", host), ("client_app_name", app),
        ("event_sequence", str(seq)), ("attach_activity_id", activity)))
    return f'<event name="{name}" package="sqlserver" timestamp="{stamp}">{data}{actions}</event>\n'


def _cdata(text: str) -> str:
    return f"<![CDATA[{text}]]>"


def xevents(secret: str, now: datetime) -> str:
    """For each syntax: an error_reported carrying it, then the statement it fails (an INSERT whose text carries it
    too), from an application and host carrying it; one error left pending at the end (kept in the state)."""
    out = []
    for i, text in enumerate(texts(secret)):
        at = now - timedelta(minutes=5) + timedelta(seconds=i)
        app = f"etl::load;{text}" if i % 2 else f"python_task::task1 {text}"
        host = f"WORKER1 {text}" if i % 3 == 0 else "WORKER1"
        act = f"{ACT}{i:02d}"
        error = (f'<data name="error_number"><value>50000</value></data><data name="severity"><value>16</value></data>'
                 f'<data name="message"><value>{_cdata("login failed: " + text)}</value></data>')
        out.append(_xe("error_reported", at - timedelta(microseconds=500), error, app, host, 2 * i, f"{act}-1"))
        sql = f"INSERT INTO dbo.t{i} SELECT * FROM dbo.s{i} /* {text} */"
        data = (f'<data name="duration"><value>1000</value></data>'
                f'<data name="statement"><value>{_cdata(sql)}</value></data>')
        out.append(_xe("sql_statement_completed", at, data, app, host, 2 * i + 1, f"{act}-2"))
    error = (f'<data name="error_number"><value>18456</value></data><data name="severity"><value>14</value></data>'
             f'<data name="message"><value>{_cdata("pending: " + texts(secret)[0])}</value></data>')
    out.append(_xe("error_reported", now - timedelta(minutes=1), error, "etl", "WORKER1", 999, f"{ACT}99-1"))
    return "".join(out)


def history(secret: str, now: datetime) -> str:
    """JSON lines: each syntax in a query text, a QUERY_TAG, a user name and an error message."""
    rows = []
    for i, text in enumerate(texts(secret)):
        start = now - timedelta(minutes=10) + timedelta(seconds=i)
        stamp = lambda t: t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " +0000"  # noqa: E731
        rows.append(json.dumps({
            "QUERY_ID": f"q{i}", "QUERY_TEXT": f"INSERT INTO db.s.t{i} SELECT * FROM db.s.src{i} /* {text} */",
            "START_TIME": stamp(start), "END_TIME": stamp(start + timedelta(milliseconds=200)), "SESSION_ID": "7",
            "QUERY_TAG": f"etl;{text}" if i % 2 else "", "USER_NAME": f"svc {text}", "WAREHOUSE_NAME": "WH",
            "EXECUTION_STATUS": "FAIL" if i % 3 == 0 else "SUCCESS",
            "ERROR_MESSAGE": f"failed: {text}" if i % 3 == 0 else ""}))
    return "\n".join(rows) + "\n"


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(root.rglob("*")) if p.is_file() and p.name not in ("events.xml", "history.jsonl")}


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=secrets)
def test_no_secret_leaves_a_real_harvest(secret: str, tmp_path_factory: pytest.TempPathFactory,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    now = datetime.now(timezone.utc)
    root = tmp_path_factory.mktemp("harvest")
    (root / "events.xml").write_text(xevents(secret, now), encoding="utf-8")
    (root / "history.jsonl").write_text(history(secret, now), encoding="utf-8")
    conf = ["--conf", "transport.type=file", "--conf", f"transport.location={root / 'events.jsonl'}"]
    main(["sqlserver", "--server", "db01", "--xml", str(root / "events.xml"), "--state", str(root / "sql.json"),
          *conf])
    main(["snowflake", "--account", "org-acct", "--history", str(root / "history.jsonl"),
          "--state", str(root / "sf.json"), *conf])
    main(["sqlserver", "--server", "db01", "--xml", str(root / "events.xml"), "--dry-run"])  # events on stdout
    out, err = capsys.readouterr()
    # the spool: the events as the emitter spools them, under a destination whose URL carries the secret too
    events = [json.loads(line) for line in (root / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    spool = Spool(root / "spool", 64 * 1024 * 1024,
                  describe_destination({"type": "http", "url": f"http://etl:{secret}@127.0.0.1:5000"}))
    assert spool.append_many(events) == len(events)
    files = _files(root)
    # the harvests did run: each statement of each syntax became a run, the states kept open task runs and the
    # pending error, the spool holds the events
    names = {d["name"] for e in events for d in e["outputs"]}
    assert {f"Sales.dbo.t{i}" for i in range(len(SYNTAXES))} | {f"DB.S.T{i}" for i in range(len(SYNTAXES))} <= names
    assert json.loads(files["sql.json"])["open_runs"] and json.loads(files["sql.json"])["pending_errors"]
    assert json.loads(files["sf.json"])["open_runs"]
    assert sum(text.count("Sales.dbo.t1") for name, text in files.items() if name.startswith("spool")) >= 2
    assert "INSERT INTO dbo.t1" in out
    # as written, and as a job name would carry it (normalised: lower-cased, camelCase split with "_")
    forms = {secret.lower(), normalize_name(secret)}
    for name, text in {**files, "stdout": out, "stderr": err}.items():
        for form in forms:
            assert form not in text.lower(), (name, form)
