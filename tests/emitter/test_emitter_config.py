"""Configuration precedence (explicit > openlineage.yml > environment > embedded default) and the mapping of
openlineage-spark keys onto openlineage-python transports."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from emitter.config import load_config
from emitter.emitter import Emitter

HTTP_YML = "transport:\n  type: http\n  url: http://yaml:5000\n  auth:\n    type: api_key\n    apiKey: from-yaml\n"

# id, explicit overrides, openlineage.yml text (None: no file), environment, expected transport (subset), source
CASES = [
    ("embedded-default", {}, None, {}, {"type": "file", "append": True}, "embedded default"),
    ("env-simple-url", {}, None, {"OPENLINEAGE_URL": "http://env:5000", "OPENLINEAGE_API_KEY": "k1"},
     {"type": "http", "url": "http://env:5000", "auth": {"type": "api_key", "apiKey": "k1"}}, "environment"),
    ("env-dynamic", {}, None, {"OPENLINEAGE__TRANSPORT__TYPE": "console"}, {"type": "console"}, "environment"),
    ("env-dynamic-json", {}, None, {"OPENLINEAGE__TRANSPORT": '{"type": "http", "url": "http://j:1"}'},
     {"type": "http", "url": "http://j:1"}, "environment"),
    ("yaml-over-env", {}, HTTP_YML, {"OPENLINEAGE_URL": "http://env:5000"},
     {"type": "http", "url": "http://yaml:5000", "auth": {"type": "api_key", "apiKey": "from-yaml"}},
     "openlineage.yml"),
    ("explicit-over-yaml-same-type", {"transport.url": "http://explicit:5000"}, HTTP_YML, {},
     {"type": "http", "url": "http://explicit:5000", "auth": {"type": "api_key", "apiKey": "from-yaml"}},
     "explicit configuration"),
    ("explicit-other-type-replaces", {"transport.type": "file", "transport.location": "/tmp/x.jsonl"}, HTTP_YML,
     {}, {"type": "file", "log_file_path": "/tmp/x.jsonl", "append": True}, "explicit configuration"),
    ("java-http-keys", {"transport.type": "http", "transport.url": "http://m:5000", "transport.endpoint":
                        "/api/v1/lineage", "transport.timeoutInMillis": "2500", "transport.compression": "gzip",
                        "transport.auth.type": "api_key", "transport.auth.apiKey": "k2"}, None, {},
     {"type": "http", "url": "http://m:5000", "endpoint": "/api/v1/lineage", "timeout": 2.5, "compression": "gzip",
      "auth": {"type": "api_key", "apiKey": "k2"}}, "explicit configuration"),
    ("java-kafka-keys", {"transport.type": "kafka", "transport.topicName": "lineage",
                         "transport.properties.bootstrap.servers": "k:9092"}, None, {},
     {"type": "kafka", "topic": "lineage", "config": {"bootstrap.servers": "k:9092"}},  # (one key, as the JVM's)
     "explicit configuration"),
    ("composite-kafka-member-dotted-property", {
        "transport.type": "composite", "transport.transports.config.type": "kafka",
        "transport.transports.config.topicName": "t", "transport.transports.config.properties.client.id": "x"},
     None, {}, {"type": "composite", "transports": {"config": {"type": "kafka", "topic": "t",
                                                               "config": {"client.id": "x"}}}},
     "explicit configuration"),
    ("dotted-header-name", {"transport.type": "http", "transport.url": "http://m:5000",
                            "transport.headers.X-Team.Id": "7"}, None, {},
     {"type": "http", "custom_headers": {"X-Team.Id": "7"}}, "explicit configuration"),
    # an auth provider's class path keeps its case (it was lower-cased: "Failed to import ...apikeytokenprovider")
    ("auth-provider-class-path", {"transport.type": "http", "transport.url": "http://m:5000",
                                  "transport.auth.type": "openlineage.client.transport.http.ApiKeyTokenProvider",
                                  "transport.auth.apiKey": "k"}, None, {},
     {"type": "http", "auth": {"type": "openlineage.client.transport.http.ApiKeyTokenProvider", "apiKey": "k"}},
     "explicit configuration"),
    # the JVM's composite keys, and their booleans as booleans ("false" from SparkConf was true)
    ("java-composite-keys", {"transport.type": "composite", "transport.continueOnFailure": "false",
                             "transport.continueOnSuccess": "true", "transport.transports.a.type": "console"},
     None, {}, {"type": "composite", "continue_on_failure": False, "continue_on_success": True,
                "transports": {"a": {"type": "console"}}}, "explicit configuration"),
    ("file-debug-mode-a-file-each", {"transport.type": "file", "transport.location": "/tmp/x",
                                     "transport.debug_mode": "true"}, None, {},
     {"type": "file", "log_file_path": "/tmp/x", "append": False}, "explicit configuration"),
    ("camel-case-custom-headers", {"transport.type": "http", "transport.url": "http://m:5000",
                                   "transport.customHeaders.X-Team": "data"}, None, {},
     {"type": "http", "custom_headers": {"X-Team": "data"}}, "explicit configuration"),
    ("custom-class-path-keeps-its-case", {"transport.type": "openlineage.client.transport.console.ConsoleTransport"},
     None, {}, {"type": "openlineage.client.transport.console.ConsoleTransport"}, "explicit configuration"),
    ("composite", {"transport.type": "composite", "transport.transports.a.type": "console",
                   "transport.transports.b.type": "file", "transport.transports.b.location": "/tmp/b.jsonl"},
     None, {}, {"type": "composite", "transports": {"a": {"type": "console"},
                                                    "b": {"type": "file", "log_file_path": "/tmp/b.jsonl",
                                                          "append": True}}}, "explicit configuration"),
]


def subset(expected, actual) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and subset(v, actual[k]) for k, v in expected.items())
    return expected == actual


@pytest.mark.parametrize("case_id, explicit, yml, env, expected, source", CASES, ids=[c[0] for c in CASES])
def test_precedence_and_key_mapping(tmp_path, monkeypatch, case_id, explicit, yml, env, expected, source):
    if yml is not None:
        (tmp_path / "openlineage.yml").write_text(yml)
        monkeypatch.setenv("OPENLINEAGE_CONFIG", str(tmp_path / "openlineage.yml"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = load_config(explicit)
    assert subset(expected, dict(config.transport)), config.transport
    assert config.source.endswith(source)


TRIO = {"OPENLINEAGE_URL": "http://b:5000", "OPENLINEAGE_API_KEY": "key-of-b", "OPENLINEAGE_ENDPOINT": "b/path"}
YML_A = "transport:\n  type: http\n  url: http://a:5000\n"
B_AUTH = {"type": "api_key", "apiKey": "key-of-b"}


# the whole transport, as openlineage-python resolves the same file and variables: id, openlineage.yml, environment,
# the transport
@pytest.mark.parametrize(("yml", "env", "transport"), [
    # the file names the transport: OPENLINEAGE_URL's key and endpoint are not sent to the file's backend
    (YML_A, TRIO, {"type": "http", "url": "http://a:5000"}),
    (None, {**TRIO, "OPENLINEAGE__TRANSPORT__TYPE": "console"}, {"type": "console"}),
    # variables without a type add to the file's transport (they were dropped: events went without the key)
    (YML_A, {"OPENLINEAGE__TRANSPORT__AUTH": '{"type": "api_key", "apiKey": "k"}',
             "OPENLINEAGE__TRANSPORT__COMPRESSION": "gzip"},
     {"type": "http", "url": "http://a:5000", "auth": {"type": "api_key", "apiKey": "k"}, "compression": "gzip"}),
    # a composite gets OPENLINEAGE_URL as its default_http member (it was ignored: no event sent there)
    (None, {**TRIO, "OPENLINEAGE__TRANSPORT__TYPE": "composite",
            "OPENLINEAGE__TRANSPORT__TRANSPORTS__LOCAL__TYPE": "console"},
     {"type": "composite", "transports": {"local": {"type": "console"}, "default_http": {
         "type": "http", "url": "http://b:5000", "endpoint": "b/path", "auth": B_AUTH}}}),
    # async_http takes the url, endpoint and key it lacks (it exited 2: "url key not passed")
    (None, {**TRIO, "OPENLINEAGE__TRANSPORT__TYPE": "async_http"},
     {"type": "async_http", "url": "http://b:5000", "endpoint": "b/path", "auth": B_AUTH}),
    (None, {**TRIO, "OPENLINEAGE__TRANSPORT__TYPE": "async_http", "OPENLINEAGE__TRANSPORT__URL": "http://c:1"},
     {"type": "async_http", "url": "http://c:1", "endpoint": "b/path", "auth": B_AUTH}),
    # nothing else names a transport: the trio is it, with typeless variables added
    (None, {**TRIO, "OPENLINEAGE__TRANSPORT__COMPRESSION": "gzip"},
     {"type": "http", "url": "http://b:5000", "endpoint": "b/path", "auth": B_AUTH, "compression": "gzip"}),
    # a composite that lists no members yet: OPENLINEAGE_URL is its one (it was "composite `transports` not passed")
    (None, {**TRIO, "OPENLINEAGE__TRANSPORT__TYPE": "composite"},
     {"type": "composite", "transports": {"default_http": {
         "type": "http", "url": "http://b:5000", "endpoint": "b/path", "auth": B_AUTH}}}),
    # an empty default_http member keeps OPENLINEAGE_URL out, openlineage-python's way (it was a typeless member)
    (None, {**TRIO, "OPENLINEAGE__TRANSPORT__TYPE": "composite",
            "OPENLINEAGE__TRANSPORT__TRANSPORTS__DEFAULT_HTTP": "{}",
            "OPENLINEAGE__TRANSPORT__TRANSPORTS__LOCAL__TYPE": "console"},
     {"type": "composite", "transports": {"local": {"type": "console"}}}),
    # a whole section replaces what its sub-keys say, as openlineage-python reads them (they were merged over it)
    (None, {"OPENLINEAGE__TRANSPORT": '{"type": "console"}', "OPENLINEAGE__TRANSPORT__TYPE": "http",
            "OPENLINEAGE__TRANSPORT__URL": "http://c:1"}, {"type": "console"}),
], ids=["file-names-it", "dynamic-type-names-it", "typeless-variables-join-the-file", "composite-default-http",
        "async-http-filled", "async-http-own-url-kept", "trio-alone", "composite-without-members",
        "empty-default-http-keeps-the-url-out", "whole-section-wins"])
def test_openlineage_url_goes_where_openlineage_python_puts_it(tmp_path, monkeypatch, yml, env, transport):
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(tmp_path / "openlineage.yml"))  # (no file: none)
    if yml is not None:
        (tmp_path / "openlineage.yml").write_text(yml)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert dict(load_config().transport) == transport


def test_embedded_default_is_a_file_in_the_state_dir(isolated_lineage_env, capsys):
    emitter = Emitter.from_config()
    assert emitter.config.transport["log_file_path"] == str(isolated_lineage_env / "openlineage-events.jsonl")
    Emitter.from_config()
    assert capsys.readouterr().err.count("lineage events are appended to") == 1  # printed once per process


@pytest.mark.parametrize("setting", [{"env": "OPENLINEAGE_DISABLED"}, {"key": "disabled"}])
def test_disabled_emits_nothing(tmp_path, monkeypatch, setting):
    out = tmp_path / "e.jsonl"
    conf = {"transport.type": "file", "transport.location": str(out)}
    if "env" in setting:
        monkeypatch.setenv(setting["env"], "true")
    else:
        conf[setting["key"]] = "true"
    from lineage_capture.demo import demo_records

    emitter = Emitter.from_config(conf)
    emitter.emit_batch(demo_records())
    emitter.close()
    assert not out.exists()


def test_unknown_keys_are_warned_about(tmp_path, monkeypatch, caplog):
    (tmp_path / "openlineage.yml").write_text("transprot:\n  type: console\n")
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(tmp_path / "openlineage.yml"))
    with caplog.at_level(logging.WARNING):
        Emitter.from_config({"transport.type": "http", "transport.url": "http://h:1", "transport.urll": "x"})
    assert "unknown OpenLineage configuration key 'transprot'" in caplog.text
    assert "unknown key 'urll' in the http transport configuration" in caplog.text


UNUSABLE = [  # (id, settings, the error names)
    ("no_url", {"transport.type": "http"}, "transport.url is not set: the http transport needs it"),
    ("timeout_in_millis_not_a_number", {"transport.type": "http", "transport.url": "http://h:1",
                                        "transport.timeoutInMillis": "soon"},
     "transport.timeoutInMillis cannot be used"),
    ("timeout_not_a_number", {"transport.type": "http", "transport.url": "http://h:1", "transport.timeout": "x"},
     "transport.timeout cannot be used"),
    ("timeout_in_millis_zero", {"transport.type": "http", "transport.url": "http://h:1",
                                "transport.timeoutInMillis": "0"},
     "transport.timeoutInMillis cannot be used: must be a positive number, not '0'"),
    ("timeout_negative", {"transport.type": "http", "transport.url": "http://h:1", "transport.timeout": "-5"},
     "transport.timeout cannot be used: must be a positive number, not '-5'"),
    ("timeout_nan", {"transport.type": "http", "transport.url": "http://h:1", "transport.timeout": "nan"},
     "transport.timeout cannot be used: must be a positive number, not 'nan'"),
    ("spool_max_bytes_not_a_number", {"spool.maxBytes": "abc"}, "spool.maxBytes must be a whole number of bytes"),
    ("spool_max_bytes_negative", {"spool.maxBytes": "-1"}, "spool.maxBytes must be above 0, not -1"),
]


@pytest.mark.parametrize("settings,names", [row[1:] for row in UNUSABLE], ids=[row[0] for row in UNUSABLE])
def test_unusable_transport_is_a_clear_error(tmp_path, monkeypatch, settings, names):
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(tmp_path / "none.yml"))
    with pytest.raises(ValueError, match=names):
        Emitter.from_config(settings)


@pytest.mark.parametrize("case_id, explicit, yml, env, expected, source",
                         [c for c in CASES if c[4]["type"] != "kafka"],
                         ids=[c[0] for c in CASES if c[4]["type"] != "kafka"])
def test_valid_configurations_warn_about_nothing(tmp_path, monkeypatch, caplog, case_id, explicit, yml, env,
                                                 expected, source):
    if yml is not None:
        (tmp_path / "openlineage.yml").write_text(yml)
        monkeypatch.setenv("OPENLINEAGE_CONFIG", str(tmp_path / "openlineage.yml"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING):
        Emitter.from_config(explicit).close()
    assert "unknown" not in caplog.text


BAD_FILES = [  # (id, openlineage.yml text, the one-line error)
    ("unterminated_quote", 'transport:\n  type: http\n  auth: {type: api_key, apiKey: "S3cretKey9\n',
     r"openlineage.yml: not valid YAML \(line 4, column 1\): found unexpected end of stream"),
    ("tab_indentation", "transport:\n\ttype: http\n",
     r"openlineage.yml: not valid YAML \(line 2, column 1\): found character '\\t' that cannot start any token"),
    ("not_a_mapping", "- a\n- b\n", "openlineage.yml: expected a mapping at the top level"),
]


@pytest.mark.parametrize("text,message", [row[1:] for row in BAD_FILES], ids=[row[0] for row in BAD_FILES])
def test_a_file_that_is_no_configuration_is_a_one_line_error(tmp_path, monkeypatch, text, message):
    # a configuration error (the commands exit 2 with it), never a YAML traceback; nothing of the file's text in it
    path = tmp_path / "openlineage.yml"
    path.write_text(text)
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(path))
    with pytest.raises(ValueError, match=message) as raised:
        Emitter.from_config({})
    assert "\n" not in str(raised.value) and "S3cret" not in str(raised.value)


def test_an_unknown_transport_type_is_named_with_the_known_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(tmp_path / "none.yml"))
    named = r"unknown OpenLineage transport type 'bogus': one of .*\bhttp\b.*module\.Class"
    with pytest.raises(ValueError, match=named):
        Emitter.from_config({"transport.type": "bogus"})


@pytest.mark.parametrize("url, auth, warned", [
    ("http://user:pw@marquez:5000", {"type": "api_key", "apiKey": "k3y"}, True),  # the key was dropped silently
    ("http://user:pw@marquez:5000", None, False),
    ("http://marquez:5000", {"type": "api_key", "apiKey": "k3y"}, False),
], ids=["both", "url-only", "key-only"])
def test_credentials_in_the_url_beside_an_auth_setting_are_warned_about(tmp_path, monkeypatch, caplog, url, auth,
                                                                        warned):
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(tmp_path / "none.yml"))
    settings = {"transport.type": "http", "transport.url": url}
    if auth is not None:
        settings |= {f"transport.auth.{k}": v for k, v in auth.items()}
    with caplog.at_level(logging.WARNING):
        Emitter.from_config(settings).close()
    said = [r.getMessage() for r in caplog.records if "holds credentials" in r.getMessage()]
    assert said == ([("the http transport's url holds credentials and transport.auth (api_key) is set too: the url's "
                      "user and password are sent (HTTP Basic) and the api key is not; remove one of them")]
                    if warned else [])
    assert "k3y" not in caplog.text and "pw@" not in caplog.text


CONSOLE_PROGRAM = """
from datetime import datetime, timezone
from emitter.emitter import Emitter
from emitter.records import JobRef, JobType, RunRecord
emitter = Emitter.from_config({"transport.type": "console"})
emitter.emit(RunRecord("START", datetime(2024, 1, 1, tzinfo=timezone.utc), JobRef("ns", "job"),
                       "01900000-0000-7000-8000-0000000000a0", JobType("QUERY", "SQLSERVER")))
print(emitter.close())
"""


def test_the_console_transport_shows_each_event(tmp_path):
    """openlineage-python's console transport logs at INFO, which no handler showed here: nothing was printed,
    while every event counted as delivered."""
    env = {**os.environ, "LINEAGE_CAPTURE_STATE_DIR": str(tmp_path), "OPENLINEAGE_CONFIG": str(tmp_path / "no.yml")}
    run = subprocess.run([sys.executable, "-c", CONSOLE_PROGRAM], capture_output=True, text=True, env=env, timeout=60,
                         check=True)
    events = [json.loads(line) for line in run.stderr.splitlines() if line.startswith("{")]
    assert [(e["eventType"], e["job"]["name"]) for e in events] == [("START", "job")]


FILTERS_YML = """transport:
  type: file
  log_file_path: {out}
filters:
  - type: exact
    match: task.s1
  - type: regex
    regex: "solo.*"
"""


def test_filters_leave_out_the_jobs_they_name_as_openlineage_python_does(tmp_path, monkeypatch):
    from datetime import datetime, timezone

    from emitter.records import JobRef, JobType, RunRecord

    out = tmp_path / "e.jsonl"
    (tmp_path / "openlineage.yml").write_text(FILTERS_YML.format(out=out))
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(tmp_path / "openlineage.yml"))
    monkeypatch.setenv("LINEAGE_CAPTURE_STATE_DIR", str(tmp_path))
    emitter = Emitter.from_config()
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    for i, name in enumerate(["task.s1", "task.s10", "solo1", "task.solo", "task"]):
        emitter.emit(RunRecord("START", t0, JobRef("ns", name), f"01900000-0000-7000-8000-00000000000{i}",
                               JobType("QUERY", "SQLSERVER")))
    counts = emitter.close()
    sent = [json.loads(line)["job"]["name"] for line in out.read_text().splitlines()]
    # exact is the whole name; a regex matches at the name's start (re.match), as openlineage-python applies them
    assert (sent, counts.filtered, counts.delivered) == (["task.s10", "task.solo", "task"], 2, 3)


@pytest.mark.parametrize("filters", ['"not a list"', "[{type: exact}]", "[{type: glob, match: x}]"])
def test_a_filter_that_cannot_be_used_is_refused(tmp_path, monkeypatch, filters):
    (tmp_path / "openlineage.yml").write_text(f"transport:\n  type: console\nfilters: {filters}\n")
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(tmp_path / "openlineage.yml"))
    with pytest.raises(ValueError, match="filter"):
        Emitter.from_config()


@pytest.mark.parametrize("conf, code, says", [
    (["transport.type=http", "transport.url=http://m:5000"], 0, ""),
    (["transport.type=bogus"], 2, "unknown OpenLineage transport type 'bogus'"),
    (["transport.type=http", "transport.urll=http://m:5000"], 2,
     "transport.url is not set: the http transport needs it"),
    (["transport.type=http", "transport.url=http://m:5000", "transport.timeot=3"], 0,
     "unknown key 'timeot' in the http transport configuration"),
    (["transport.type=file", "transport.location=/nonexistent-dir/x.jsonl"], 0, ""),
    (["transport.type=kafka", "transport.topicName=t", "transport.properties.bootstrap.servers=127.0.0.1:9"], 0, ""),
    (["transport.type=composite", "transport.transports.a.type=console", "transport.transports.b.url=http://m"], 2,
     "transport.transports.b.type is not set"),
    (["transport.type=composite", "transport.transports.a.type=bogus"], 2,
     "unknown OpenLineage transport type 'bogus' (transport.transports.a.type)"),
], ids=["good", "unknown-type", "misspelt-url", "unknown-key", "file", "kafka-not-connected", "member-without-type",
        "member-of-unknown-type"])
def test_config_command_checks_the_transport_as_a_producer_builds_it(capsys, caplog, conf, code, says):
    """`lineage-capture config` said exit 0 for a configuration every producer refuses."""
    from emitter.cli import config_main

    assert config_main([f"--conf={c}" for c in conf]) == code
    err = capsys.readouterr().err + caplog.text  # (warnings: through logging)
    assert (says in err) if says else ("unknown" not in err and "cannot" not in err)
