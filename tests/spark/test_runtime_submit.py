"""Activation end to end: ``spark-submit --conf spark.openlineage.python.enabled=true app.py`` with an app
that knows nothing about lineage. The start-up hook (``lineage_capture.pth``) must do everything."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_runtime import ClassArchive, driver_env, spooled_events

from ol_schema import assert_valid_event, read_events

VENV_BIN = Path(sys.executable).parent
SPARK_SUBMIT = VENV_BIN / "spark-submit"
APP_FILE = Path(__file__).parent / "apps" / "orders_app.py"
SPY_APP = Path(__file__).parent / "apps" / "import_spy_app.py"
CONTEXT_APP = Path(__file__).parent / "apps" / "context_app.py"
APP = "orders_app"
WRITE = f"{APP}.execute_insert_into_hadoop_fs_relation_command.lake_orders"
SLOW_WRITE = f"{APP}.execute_insert_into_hadoop_fs_relation_command.lake_slow"
FAILED_WRITE = f"{APP}.execute_insert_into_hadoop_fs_relation_command.lake_failed"
#: the Parquet schema-merge job Spark runs inside the app's spark.read.parquet: an RDD job with a START only (JVM)
FOOTERS = f"{APP}.map_partitions_parallel_collection"
PARENT_RUN = "01890000-0000-7000-8000-000000000001"

pytestmark = pytest.mark.skipif(not SPARK_SUBMIT.exists(), reason="spark-submit not found next to python")


def submit(workdir: str, ending: str | None, conf: dict[str, str], hook_pythonpath: list[str],
           class_archive: ClassArchive, state_dir: Path, app: Path = APP_FILE) -> subprocess.CompletedProcess:
    env = driver_env(hook_pythonpath, state_dir)
    with class_archive.java_options() as java:
        command = [str(SPARK_SUBMIT), "--master", "local[1]", "--driver-memory", "512m",
                   "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
                   "--conf", "spark.sql.shuffle.partitions=1", "--driver-java-options", java]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        return subprocess.run([*command, str(app), workdir, *([ending] if ending else [])], env=env,
                              capture_output=True, text=True, timeout=240, cwd=workdir)


def submit_with_baseline(workdir: str, ending: str | None, conf: dict[str, str], hook_pythonpath: list[str],
                         class_archive: ClassArchive, state_dir: Path
                         ) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess, Path]:
    """The run with ``conf`` and, side by side (two cores: ~3 s saved per pair), the same application without any
    conf (the plugin not enabled) in a directory of its own, its output with that directory named as the first
    run's; and the baseline's state directory."""
    from concurrent.futures import ThreadPoolExecutor

    own = Path(workdir) / "baseline"
    (own / "state").mkdir(parents=True)
    with ThreadPoolExecutor(max_workers=1) as pool:
        started = pool.submit(submit, str(own), ending, {}, hook_pythonpath, class_archive, own / "state")
        result = submit(workdir, ending, conf, hook_pythonpath, class_archive, state_dir)
        baseline = started.result()
    baseline.stdout, baseline.stderr = (text.replace(str(own), workdir) for text in (baseline.stdout, baseline.stderr))
    return result, baseline, own / "state"


def traceback_of(output: str) -> list[str]:
    """The Python traceback printed last, without log lines. spark-submit merges the driver's stderr into
    its stdout, so that is where the traceback is."""
    lines = output.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)"))
    log_line = re.compile(r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d |\{\"ts\"|lineage capture:)")
    # py4j numbers JVM objects as the process creates them ("calling o44.parquet"): the plugin creates some too
    return [re.sub(r"\bo\d+\.", "o<n>.", line) for line in lines[start:] if not log_line.match(line)]


FILE = {"spark.openlineage.transport.type": "file"}
# no execution poll: the orders app's first write may outlast its interval (START/RUNNING would come early)
ON = {"spark.openlineage.python.enabled": "true", "spark.openlineage.python.pollIntervalSeconds": "0"}
PARENT = {"spark.openlineage.parentJobNamespace": "airflow", "spark.openlineage.parentJobName": "dag.task",
          "spark.openlineage.parentRunId": PARENT_RUN}

# (id, app ending, extra conf, exit code, expected (eventType, job) sequence, app error message or None)
SCENARIOS = [
    ("stop", "stop", {**ON, **FILE, **PARENT}, 0,
     [("START", APP), ("START", WRITE), ("RUNNING", WRITE), ("COMPLETE", WRITE), ("START", FOOTERS), ("COMPLETE", APP)],
     None),
    ("action_fails", "action_fails", {**ON, **FILE}, 1,
     [("START", APP), ("START", WRITE), ("RUNNING", WRITE), ("COMPLETE", WRITE), ("START", FOOTERS),
      ("START", FAILED_WRITE), ("RUNNING", FAILED_WRITE), ("FAIL", FAILED_WRITE),
      ("FAIL", APP)], "boom in a task"),
    ("app_raises", "raise", {**ON, **FILE}, 1,
     [("START", APP), ("START", WRITE), ("RUNNING", WRITE), ("COMPLETE", WRITE), ("START", FOOTERS), ("FAIL", APP)],
     "ValueError: boom from the app"),
    ("sys_exit_3", "exit3", {**ON, **FILE}, 3,
     [("START", APP), ("START", WRITE), ("RUNNING", WRITE), ("COMPLETE", WRITE), ("START", FOOTERS), ("FAIL", APP)],
     "the application exited with code 3"),
    # killed (Python dies of SIGTERM, spark-submit's exit code is 128 + 15 as without the plugin): the run ends
    # as failed instead of staying open for ever
    ("sigterm", "sigterm", {**ON, **FILE}, 143,
     [("START", APP), ("START", WRITE), ("RUNNING", WRITE), ("COMPLETE", WRITE), ("START", FOOTERS), ("FAIL", APP)],
     "the application was terminated by SIGTERM"),
    ("sigterm_in_an_action", "sigterm_in_an_action", {**ON, **FILE}, 143,
     [("START", APP), ("START", WRITE), ("RUNNING", WRITE), ("COMPLETE", WRITE), ("START", FOOTERS), ("FAIL", APP)],
     "the application was terminated by SIGTERM"),
    ("own_sigterm_handler", "own_sigterm_handler", {**ON, **FILE}, 7,
     [("START", APP), ("START", WRITE), ("RUNNING", WRITE), ("COMPLETE", WRITE), ("START", FOOTERS), ("FAIL", APP)],
     "the application exited with code 7"),
]


@pytest.mark.parametrize("name,ending,conf,code,expected,error", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_spark_submit(workdir, hook_pythonpath, class_archive, isolated_lineage_env, name, ending, conf, code,
                      expected, error):
    events_file = Path(workdir) / "events.jsonl"
    conf = {**conf, "spark.openlineage.transport.location": str(events_file)}
    # an application that fails is also run without the plugin (side by side): its failure must be untouched
    baseline = None
    if ending in ("action_fails", "raise", "sigterm"):
        result, baseline, baseline_state = submit_with_baseline(workdir, ending, conf, hook_pythonpath,
                                                                class_archive, isolated_lineage_env)
    else:
        result = submit(workdir, ending, conf, hook_pythonpath, class_archive, isolated_lineage_env)
    assert result.returncode == code, result.stderr[-3000:]
    assert "rows: 5" in result.stdout
    if name == "stop":  # a configured transport, known keys: the plugin prints nothing (item 7 of issue 12)
        assert result.stdout.strip() == "rows: 5"
    events = read_events(events_file)
    for event in events:
        assert_valid_event(event)
    assert [(e["eventType"], e["job"]["name"]) for e in events] == expected, result.stdout[-5000:]
    app_run = events[0]["run"]["runId"]
    assert events[-1]["run"]["runId"] == app_run
    app_parent = events[0]["run"]["facets"].get("parent")
    assert (app_parent["run"]["runId"] if app_parent else None) == (PARENT_RUN if "parentRunId" in str(conf) else None)
    for action in events[1:-1]:
        parent = action["run"]["facets"]["parent"]
        assert (parent["job"]["name"], parent["run"]["runId"]) == (APP, app_run)
    app_error = events[-1]["run"]["facets"].get("errorMessage")
    assert (app_error is None) == (error is None)
    if error is not None:
        assert error in app_error["message"]
        assert app_error["programmingLanguage"] == "PYTHON"
    if baseline is not None:
        # the application's own failure is untouched: same exit code (and traceback) as without the plugin
        assert baseline.returncode == code
        assert list(baseline_state.iterdir()) == []  # not enabled: the hook stayed inert (no events)
        if ending != "sigterm":  # (a process killed by a signal prints no traceback)
            assert traceback_of(result.stdout) == traceback_of(baseline.stdout)


CLOSING = "py4j.clientserver INFO Closing down clientserver connection"


def _without(line: str, lines: list[str]) -> list[str]:
    return [each for each in lines if each != line]


@pytest.mark.parametrize("ending", ["info_logging", "info_logging_first"])
def test_an_application_logging_at_info_sees_only_its_own_lines(workdir, hook_pythonpath, class_archive,
                                                               isolated_lineage_env, ending):
    # the app's logging.basicConfig(INFO) after its session, or before it: our delivery summary and py4j's callback
    # server (which runs for the plugin only: `Python Server ready to receive messages`) stay out of its output; its
    # own line is there
    events_file = Path(workdir) / "events.jsonl"
    result, off, _ = submit_with_baseline(workdir, ending, {**ON, **FILE, "spark.openlineage.transport.location":
                                                             str(events_file)},
                                          hook_pythonpath, class_archive, isolated_lineage_env)
    assert result.returncode == 0, result.stderr[-3000:]
    # py4j logs the closing of the main thread's connection from its __del__ at interpreter teardown; whether that
    # object is freed before the process ends depends on the teardown order (with the plugin, the callback server's
    # daemon threads may still hold the gateway client): the line may be missing, never added
    on_lines, off_lines = (_without(CLOSING, r.stdout.strip().splitlines()) for r in (result, off))
    assert on_lines == off_lines, result.stdout[-3000:]
    assert result.stdout.count(CLOSING) <= off.stdout.count(CLOSING), result.stdout[-3000:]
    assert any(e["eventType"] == "COMPLETE" and e["job"]["name"].endswith("lake_again")
               for e in read_events(events_file))


def test_an_application_without_a_session(workdir, hook_pythonpath, class_archive, isolated_lineage_env):
    """A SparkContext and RDDs, never a session (the JVM integration listens to the context): the application's
    run and its RDD jobs, named and linked as with a session. Sent through a composite transport of two files:
    each gets every event, and the plugin says nothing (it named a configured member's file)."""
    Path(workdir, "in").mkdir()
    Path(workdir, "in", "lines.txt").write_text("a\nb\n")
    events_file, copy_file = Path(workdir) / "events.jsonl", Path(workdir) / "copy.jsonl"
    composite = {"spark.openlineage.transport.type": "composite",
                 "spark.openlineage.transport.transports.a.type": "file",
                 "spark.openlineage.transport.transports.a.location": str(events_file),
                 "spark.openlineage.transport.transports.b.type": "file",
                 "spark.openlineage.transport.transports.b.location": str(copy_file)}
    result = submit(workdir, "warnings", {**ON, **composite}, hook_pythonpath, class_archive, isolated_lineage_env,
                    app=CONTEXT_APP)  # (Spark's WARN level kept: a notice of ours would show)
    assert result.returncode == 0, result.stdout[-3000:]
    assert result.stdout.strip() == "lines: 2"
    assert [line for line in result.stderr.splitlines() if " lineage_capture: " in line] == []
    events = read_events(events_file)
    assert read_events(copy_file) == events
    for event in events:
        assert_valid_event(event)
    save = "context_only.map_partitions_python_map_partitions_hadoop"
    count = "context_only.python_map_partitions_hadoop"
    assert [(e["eventType"], e["job"]["name"], [i["name"] for i in e["inputs"]], [o["name"] for o in e["outputs"]])
            for e in events] == [
        ("START", "context_only", [], []),
        ("START", save, [f"{workdir}/in"], [f"{workdir}/out"]),
        ("COMPLETE", save, [f"{workdir}/in"], [f"{workdir}/out"]),
        ("START", count, [f"{workdir}/out"], []),
        ("COMPLETE", "context_only", [], [])]
    app_run = events[0]["run"]["runId"]
    assert {e["run"]["facets"]["parent"]["run"]["runId"] for e in events[1:-1]} == {app_run}
    assert events[-1]["run"]["runId"] == app_run


def test_the_driver_never_imports_openlineage_python(workdir, hook_pythonpath, class_archive, isolated_lineage_env):
    """No thread of the driver imports openlineage-python's client (0.25 s of CPU under spark-submit): the facets
    are deferred calls, built with the events by the emitter's child process (emitter.emitter_process), started as
    the driver starts (its imports overlap pyspark's, while a core is idle) and adopted by the application's run,
    the only one; and the events are whole."""
    events_file = Path(workdir) / "events.jsonl"
    result = submit(workdir, None, {**ON, **FILE, "spark.openlineage.transport.location": str(events_file)},
                    hook_pythonpath, class_archive, isolated_lineage_env, app=SPY_APP)
    assert result.returncode == 0, result.stdout[-3000:]
    assert json.loads((Path(workdir) / "importers.json").read_text()) == []
    children = json.loads((Path(workdir) / "emitter_children.json").read_text())
    assert len(children["start"]) == 1 and children["after"] == children["start"], children
    assert children["started_early"] == children["start"][0], children
    events = read_events(events_file)
    write = "import_spy.execute_insert_into_hadoop_fs_relation_command.lake_spy"
    assert [(e["eventType"], e["job"]["name"]) for e in events] == [
        ("START", "import_spy"), ("START", write), ("RUNNING", write), ("COMPLETE", write), ("COMPLETE", "import_spy")]
    for event in events:
        assert_valid_event(event)
        assert event["run"]["facets"]["processing_engine"]["name"] == "spark"


UNBUILDABLE = [({"spark.openlineage.transport.type": "htpp"}, "unknown OpenLineage transport type 'htpp': one of"),
               ({"spark.openlineage.transport.type": "http"}, "transport.url is not set: the http transport needs it")]


@pytest.mark.parametrize("transport,says", UNBUILDABLE, ids=["type_misspelt", "http_without_url"])
def test_a_transport_that_cannot_be_built_leaves_the_output_alone(workdir, hook_pythonpath, class_archive,
                                                                   isolated_lineage_env, transport, says):
    """A transport type with a typo, or an http transport without its url: one warning where Spark's go (before the
    app's setLogLevel, so it is said as the application starts, not when the emitter's child builds the transport),
    the application's output untouched (not on the driver's stderr, which spark-submit prints as the application's
    output; openlineage-python, which tried to import `htpp` as a class, is not asked)."""
    result = submit(workdir, "stop", {**ON, **transport}, hook_pythonpath, class_archive, isolated_lineage_env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "rows: 5"
    ours = [line for line in result.stderr.splitlines() if " lineage_capture: " in line]
    assert len(ours) == 1 and says in ours[0], ours


def test_no_transport_configured_says_where_events_go_once_outside_the_output(workdir, hook_pythonpath,
                                                                               class_archive, isolated_lineage_env):
    """Nothing configured: the default events file is named once, as a warning where Spark's go; the application's
    output (spark-submit's stdout, where the driver's stderr is copied) stays its own."""
    result = submit(workdir, "stop", ON, hook_pythonpath, class_archive, isolated_lineage_env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "rows: 5"
    ours = [line for line in result.stderr.splitlines() if " lineage_capture: " in line]
    default_file = isolated_lineage_env / "openlineage-events.jsonl"
    notice = f"lineage events are appended to {default_file}"
    assert [line.split(" lineage_capture: ", 1)[1] for line in ours] == [notice]
    assert default_file.stat().st_size > 0


@pytest.mark.parametrize("enabled", [None, "yes", "off_in_the_builder"])
def test_not_enabled_nothing_is_preloaded(workdir, hook_pythonpath, class_archive, isolated_lineage_env, enabled):
    """Without ``spark.openlineage.python.enabled=true`` the context's creation starts no preload: openlineage-python
    is never imported, nothing is written. A value meant as "on" that is not ``true`` (``yes``) is said once, where
    Spark's warnings go (it was silently off). No emitter child is started; and when spark-submit's command line
    enables the plugin but the application's builder says ``false`` (its SparkConf wins), the child started early
    is ended as the context is made."""
    ending = "off_in_the_builder" if enabled == "off_in_the_builder" else None
    conf = {"spark.openlineage.python.enabled": "true"} if ending else \
        {} if enabled is None else {"spark.openlineage.python.enabled": enabled}
    result = submit(workdir, ending, conf, hook_pythonpath, class_archive, isolated_lineage_env,
                    app=SPY_APP)
    assert result.returncode == 0, result.stdout[-3000:]
    assert json.loads((Path(workdir) / "importers.json").read_text()) == []
    children = json.loads((Path(workdir) / "emitter_children.json").read_text())
    assert (len(children["start"]), children["after"]) == (1 if ending else 0, []), children
    assert children["started_early"] == (children["start"][0] if ending else None), children
    assert list(isolated_lineage_env.iterdir()) == []
    ours = [line.split(" lineage_capture: ", 1)[1] for line in result.stderr.splitlines()
            if " lineage_capture: " in line]
    assert ours == ([] if enabled != "yes" else [
        "lineage capture: spark.openlineage.python.enabled=yes is not true: lineage capture stays off (say true)"])


def _hanging_backend() -> tuple[socket.socket, int]:
    """A server that accepts connections and never answers (until closed)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    return server, server.getsockname()[1]


RDD_SAVE = f"{APP}.map_partitions_python_parallel_collection"
# (app ending, the job it was running when killed)
KILLED_ACTIONS = [("sigterm_in_an_action", SLOW_WRITE), ("sigterm_in_an_rdd_action", RDD_SAVE)]


@pytest.mark.parametrize("ending,job", KILLED_ACTIONS, ids=[row[0] for row in KILLED_ACTIONS])
def test_sigterm_during_an_action_fails_it(workdir, hook_pythonpath, class_archive, isolated_lineage_env, ending,
                                           job):
    """Killed while a long write runs: a SQL write whose START the execution poll sent, or an RDD save (its wrapper
    reports it at its end, which never comes): that run gets its FAIL (it would stay open for ever, or never be
    seen), before the application's FAIL; the process still dies of the signal."""
    events_file = Path(workdir) / "events.jsonl"
    conf = {**ON, **FILE, "spark.openlineage.python.pollIntervalSeconds": "0.5",
            "spark.openlineage.transport.location": str(events_file)}
    result = submit(workdir, ending, conf, hook_pythonpath, class_archive, isolated_lineage_env)
    assert result.returncode == 143, result.stdout[-3000:]
    events = read_events(events_file)
    for event in events:
        assert_valid_event(event)
    slow = [e for e in events if e["job"]["name"] == job]
    assert slow, [(e["eventType"], e["job"]["name"]) for e in events]
    assert slow[0]["eventType"] == "START" and slow[-1]["eventType"] == "FAIL"
    assert {e["eventType"] for e in slow[1:-1]} <= {"RUNNING"}
    assert len({e["run"]["runId"] for e in slow}) == 1
    assert slow[-1]["run"]["facets"]["errorMessage"]["message"] == (
        "the application ended while this action ran: the application was terminated by SIGTERM")
    assert [(e["eventType"], e["job"]["name"]) for e in events[-2:]] == [("FAIL", job), ("FAIL", APP)]
    assert "terminated by SIGTERM" in events[-1]["run"]["facets"]["errorMessage"]["message"]
    if job == RDD_SAVE:
        assert [o["name"] for o in slow[-1]["outputs"]] == [f"{workdir}/lake/rdd_slow"]


# (backend, app ending, exit code, the application's terminal event)
DEAD_BACKENDS = [("refusing", "no_stop", 0, "COMPLETE"), ("hanging", "no_stop", 0, "COMPLETE"),
                 ("hanging", "sigterm", 143, "FAIL")]


@pytest.mark.parametrize("backend,ending,code,terminal", DEAD_BACKENDS, ids=[f"{d[0]}_{d[1]}" for d in DEAD_BACKENDS])
def test_dead_backend_and_no_stop(workdir, hook_pythonpath, class_archive, isolated_lineage_env, backend, ending,
                                  code, terminal):
    """http to a closed port (openlineage-python's retries: seconds per event) or to a server that never answers,
    app never stops Spark (or is killed): its exit code, nothing printed, every event spooled at the interpreter's
    exit (or the signal), quickly."""
    if backend == "refusing":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = None
    else:
        server, port = _hanging_backend()
    try:
        result = submit(workdir, ending, {**ON, "spark.openlineage.transport.type": "http",
                                             "spark.openlineage.transport.url": f"http://127.0.0.1:{port}",
                                             "spark.openlineage.transport.timeoutInMillis": "20000"},
                        hook_pythonpath, class_archive, isolated_lineage_env)
    finally:
        if server is not None:
            server.close()
    assert result.returncode == code, result.stderr[-3000:]
    assert result.stdout.strip() == "rows: 5"  # the driver's stderr is in stdout: nothing of ours there
    spooled = spooled_events(isolated_lineage_env)
    # the one in flight when the app ended is spooled too (it may reach the backend as well: at most once more)
    assert {(e["eventType"], e["job"]["name"]) for e in spooled} == {
        ("START", APP), ("START", WRITE), ("RUNNING", WRITE), ("COMPLETE", WRITE), ("START", FOOTERS),
        (terminal, APP)}
    assert [(e["eventType"], e["job"]["name"]) for e in spooled][-5:] == [
        ("START", WRITE), ("RUNNING", WRITE), ("COMPLETE", WRITE), ("START", FOOTERS), (terminal, APP)]




def test_backend_down_for_several_runs(workdir, hook_pythonpath, class_archive, isolated_lineage_env):
    """A backend refusing connections for two runs in a row, with the execution poll on and the app stopping as
    its last write's end is being reported. The second run's emitter is still replaying the first run's spool
    (openlineage-python retrying the refused connection for seconds) when it stops: its events still go to the
    spool, after the first run's. Each action is one run (the poll's START, then its RUNNING and COMPLETE), also
    when the end of the app makes the events of the action the worker is making."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = {**ON, "spark.openlineage.python.pollIntervalSeconds": "0.2", "spark.openlineage.transport.type": "http",
            "spark.openlineage.transport.url": f"http://127.0.0.1:{port}"}
    for _ in range(2):
        result = submit(workdir, "slow_write", conf, hook_pythonpath, class_archive, isolated_lineage_env)
        assert result.returncode == 0, result.stdout[-3000:]
        assert result.stdout.strip() == "rows: 5"
    spooled = spooled_events(isolated_lineage_env)
    apps = [e["run"]["runId"] for e in spooled if e["job"]["name"] == APP and e["eventType"] == "START"]
    assert len(apps) == 2
    for app in apps:
        events = [e for e in spooled if app in (e["run"]["runId"], e["run"]["facets"].get("parent", {}).get(
            "run", {}).get("runId"))]
        runs: dict[str, list[str]] = {}
        for event in events:
            runs.setdefault(event["job"]["name"], [])
            if event["run"]["runId"] not in runs[event["job"]["name"]]:
                runs[event["job"]["name"]].append(event["run"]["runId"])
        assert {job: len(ids) for job, ids in runs.items()} == {APP: 1, WRITE: 1, FOOTERS: 1, SLOW_WRITE: 1}
        by_job = {job: [e["eventType"] for e in events if e["job"]["name"] == job] for job in runs}
        assert by_job[APP] == ["START", "COMPLETE"]
        assert by_job[FOOTERS] == ["START"]
        for write in (WRITE, SLOW_WRITE):
            kinds_ = by_job[write]
            assert kinds_[0] == "START" and kinds_[-1] == "COMPLETE" and set(kinds_[1:-1]) <= {"RUNNING"}, kinds_
        assert "RUNNING" in by_job[SLOW_WRITE]
    # the first run's events first: each run's spool is replayed in order
    assert [e["run"]["runId"] for e in spooled if e["job"]["name"] == APP] == [apps[0], apps[0], apps[1], apps[1]]
