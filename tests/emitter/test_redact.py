"""Secret redaction: every secret form is masked, ordinary lineage data is left byte-for-byte alone."""
from __future__ import annotations

import logging

import pytest

from emitter.redact import MASK, RULES, RedactingFilter, is_secret_key, redact, redact_obj

AKIA = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"

# (input, substrings that must NOT be in the output, substrings that must remain)
MASKED = [
    # JDBC / ODBC connection strings
    ("jdbc:sqlserver://h:1433;databaseName=db;user=sa;password=S3cr3t!;encrypt=true",
     ["S3cr3t!"], ["password=***;", "user=sa", "encrypt=true"]),
    ("jdbc:sqlserver://h;Password = sp@ce d;", ["sp@ce"], ["Password = ***"]),
    ("Driver={ODBC Driver 18};Server=h;UID=sa;PWD=Pl4in;Database=x", ["Pl4in"], ["PWD=***;", "UID=sa", "Database=x"]),
    ("Driver={ODBC Driver 18};Server=h;UID=sa;PWD={a;b}}c=d};Database=x", ["a;b", "c=d"], ["PWD={***};Database=x"]),
    ("DSN=x;pwd = \"quoted pw\";uid=u", ["quoted pw"], ['pwd = "***";uid=u']),
    ("jdbc:postgresql://h/db?password=x1y2z3&user=bob", ["x1y2z3"], ["password=***&user=bob"]),
    ("jdbc:mysql://h/db?user=bob&password=p%40ss&ssl=true", ["p%40ss"], ["password=***&ssl=true"]),
    ("jdbc:oracle:thin:scott/tiger99@//h:1521/svc", ["tiger99"], ["scott/***@//h:1521/svc"]),
    # user:password@ in URLs of any scheme
    ("postgresql://bob:hunter2@db.example.com:5432/app", ["hunter2"], ["postgresql://bob:***@db.example.com:5432/app"]),
    ("jdbc:mysql://etl:pa55w0rd@h:3306/db", ["pa55w0rd"], ["etl:***@h:3306/db"]),
    ("https://user:tok3n@artifactory.corp/repo", ["tok3n"], ["https://user:***@artifactory.corp/repo"]),
    ("mongodb+srv://app:mongoPw@cluster0.mongodb.net/db", ["mongoPw"], ["app:***@cluster0"]),
    # cloud keys in paths
    (f"s3a://{AKIA}:{AWS_SECRET}@bucket/path", [AKIA, AWS_SECRET, "wJalr", "EXAMPLEKEY"], ["s3a://AKIA***:***@bucket/path"]),
    (f"reading s3://bucket/key with {AKIA}", [AKIA], ["AKIA***", "s3://bucket/key"]),
    ("temporary ASIAY34FZKBOKMUTVV7A in use", ["ASIAY34FZKBOKMUTVV7A"], ["ASIA***"]),
    (f"env AWS_ACCESS_KEY_ID_{AKIA}", [AKIA], ["AWS_ACCESS_KEY_ID_AKIA***"]),
    # Azure
    ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=abc+/def==;EndpointSuffix=core.windows.net",
     ["abc+/def=="], ["AccountKey=***;", "AccountName=acct"]),
    ("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=KEYVAL=",
     ["KEYVAL"], ["SharedAccessKey=***", "SharedAccessKeyName=Root"]),
    ("BlobEndpoint=https://a.blob.core.windows.net/;SharedAccessSignature=sv=2020-08-04&ss=b&sig=SIGVAL%3D",
     ["SIGVAL", "sv=2020"], ["SharedAccessSignature=***"]),
    ("https://a.blob.core.windows.net/c/f.csv?sv=2020-08-04&se=2025-01-01&sp=r&sig=ABCDEF%2B%3D",
     ["ABCDEF"], ["sig=***", "sv=2020-08-04", "c/f.csv"]),
    ("spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net=AZKEY==",
     ["AZKEY"], ["fs.azure.account.key.acct.dfs.core.windows.net=***"]),
    ("fs.azure.sas.container.acct.blob.core.windows.net=sv=2020&sig=SASSIG",
     ["SASSIG", "sv=2020"], ["fs.azure.sas.container.acct.blob.core.windows.net=***"]),
    # SQL
    ("ALTER LOGIN etl WITH PASSWORD = 'p@ss''word', CHECK_POLICY = OFF",
     ["p@ss", "word'"], ["PASSWORD = '***'", "CHECK_POLICY = OFF"]),
    ("CREATE USER u PASSWORD='pw1' DEFAULT_ROLE=analyst", ["pw1"], ["PASSWORD='***'", "DEFAULT_ROLE=analyst"]),
    ("ALTER LOGIN x WITH PASSWORD = 'new1' OLD_PASSWORD = 'old1'", ["new1", "old1"], ["OLD_PASSWORD = '***'"]),
    ("CREATE ROLE r WITH LOGIN ENCRYPTED PASSWORD 'md5abc'", ["md5abc"], ["ENCRYPTED PASSWORD '***'"]),
    ("CREATE USER scott IDENTIFIED BY tiger", ["tiger"], ["IDENTIFIED BY ***"]),
    ("CREATE USER 'u'@'%' IDENTIFIED BY 'my pw'", ["my pw"], ["IDENTIFIED BY '***'", "'u'@'%'"]),
    ("ALTER USER app IDENTIFIED BY \"Quoted#1\"", ["Quoted#1"], ['IDENTIFIED BY "***"']),
    ("CREATE USER u IDENTIFIED WITH mysql_native_password BY 'natpw'", ["natpw"], ["BY '***'"]),
    (
        f"CREATE STAGE s URL='s3://b/p/' CREDENTIALS=(AWS_KEY_ID='{AKIA}' AWS_SECRET_KEY='sk1' AWS_TOKEN='tk1')",
        [AKIA, "sk1", "tk1"],
        ["AWS_KEY_ID='***'", "AWS_SECRET_KEY='***'", "AWS_TOKEN='***'", "URL='s3://b/p/'"],
    ),
    ("CREATE STAGE s URL='azure://a.blob.core.windows.net/c' CREDENTIALS=(AZURE_SAS_TOKEN='?sv=x&sig=y')",
     ["sig=y", "?sv=x"], ["AZURE_SAS_TOKEN='***'"]),
    ("CREATE SECRET s3sec (TYPE s3, KEY_ID 'kid1', SECRET 'ssec1', REGION 'us-east-1')",
     ["kid1", "ssec1"], ["KEY_ID '***'", "SECRET '***'", "REGION 'us-east-1'"]),
    ("COPY INTO t FROM @s ENCRYPTION = (TYPE='AWS_CSE' MASTER_KEY='mk1==')",
     ["mk1=="], ["MASTER_KEY='***'", "TYPE='AWS_CSE'"]),
    ("CREATE SECRET my_pw TYPE = PASSWORD USERNAME = 'svc' PASSWORD = 'snowpw'",
     ["snowpw"], ["PASSWORD = '***'", "USERNAME = 'svc'"]),
    ("CREATE SECRET gs TYPE = GENERIC_STRING SECRET_STRING = 'gsv'", ["gsv"], ["SECRET_STRING = '***'"]),
    (
        "CREATE DATABASE SCOPED CREDENTIAL c WITH IDENTITY = 'SHARED ACCESS SIGNATURE', SECRET = 'sv=2022&sig=zz'",
        ["sig=zz", "sv=2022"],
        ["IDENTITY = 'SHARED ACCESS SIGNATURE'", "SECRET = '***'"],
    ),
    ("ALTER USER u SET RSA_PUBLIC_KEY='MIIBpub' PRIVATE_KEY='pk1'",
     ["pk1"], ["PRIVATE_KEY='***'", "RSA_PUBLIC_KEY='MIIBpub'"]),
    ("-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIEvgIB\nADAN\n-----END ENCRYPTED PRIVATE KEY-----",
     ["MIIEvgIB", "ADAN"], ["-----BEGIN ENCRYPTED PRIVATE KEY-----***-----END"]),
    ("key: -----BEGIN PRIVATE KEY-----\nMIIEtruncat", ["MIIEtruncat"], ["-----BEGIN PRIVATE KEY-----***"]),
    # tokens, API keys, auth headers
    ("token=abc123&api_key=k1&apikey=k2&access_token=k3",
     ["abc123", "k1", "k2", "k3"], ["token=***", "api_key=***", "apikey=***", "access_token=***"]),
    ("curl -H 'Authorization: Bearer eyJhbGciOi.J9.x' https://x", ["eyJhbGciOi"], ["Authorization: ***", "https://x"]),
    ("Authorization: Basic dXNlcjpwYXNz", ["dXNlcjpwYXNz"], ["Authorization: ***"]),
    ('{"Authorization": "Bearer tok.tok"}', ["tok.tok"], ['"Authorization": "***"']),
    ("sent with bearer abc.def-ghi", ["abc.def-ghi"], ["bearer ***"]),
    # a backend's answer quoting the request's Basic credentials; plain English "basic ..." stays
    ('400 {"echo": "Basic bGluOlVybFB3ZDEyMzQ="} basic statistics, Basic realm="lineage"',
     ["bGluOlVybFB3ZDEyMzQ="], ['"Basic ***"', "basic statistics", 'Basic realm="lineage"']),
    ("echo: Basic dTpw5A==", ["dTpw5A=="], ["Basic ***"]),  # u:p\xe4, latin-1 as requests encodes it
    ("x-api-key: 0123456789abcdef", ["0123456789abcdef"], ["x-api-key: ***"]),
    # Spark/JVM options and properties in command lines and logs
    ("--conf spark.hadoop.fs.s3a.secret.key=SK1 --conf spark.openlineage.transport.auth.apiKey=AK1",
     ["SK1", "AK1"], ["secret.key=***", "apiKey=***"]),
    ("-Dpassword=dp1 -Djavax.net.ssl.trustStorePassword=tp1",
     ["dp1", "tp1"], ["-Dpassword=***", "trustStorePassword=***"]),
    ("db.password=x9 and sessionToken=st9", ["x9", "st9"], ["db.password=***", "sessionToken=***"]),
    ("{'password': 'pp', \"client_secret\": \"cs\", \"name\": \"orders\"}",
     ["pp'", "cs\""], ["'password': '***'", '"client_secret": "***"', '"name": "orders"']),
]


@pytest.mark.parametrize(("text", "gone", "kept"), MASKED)
def test_redact_masks(text: str, gone: list[str], kept: list[str]) -> None:
    out = redact(text)
    for secret in gone:
        assert secret not in out, out
    for part in kept:
        assert part in out, out
    assert redact(out) == out  # idempotent: masking twice changes nothing


# Issue 11: shapes that leaked, as input -> exact output (T-SQL N'...' literals keep their N and quotes).
MASKED_EXACT = [
    # a password after the word and a space, as error messages write it
    ("Login failed: connection string Server=x;PWD=S3cretV22; password S3cretW23",
     "Login failed: connection string Server=x;PWD=***; password ***"),
    ("Password 12345678 rejected; passwd P@ss!word", "Password *** rejected; passwd ***"),
    # PASSWORD = N'...' / SECRET = N'...' in every statement that takes one
    ("ALTER USER etl WITH PASSWORD = N'Secr3t!'", "ALTER USER etl WITH PASSWORD = N'***'"),
    ("ALTER LOGIN etl WITH PASSWORD = N'new''pw' OLD_PASSWORD = N'old1'",
     "ALTER LOGIN etl WITH PASSWORD = N'***' OLD_PASSWORD = N'***'"),
    ("CREATE LOGIN l WITH PASSWORD = N'Secr3t!', CHECK_POLICY = OFF",
     "CREATE LOGIN l WITH PASSWORD = N'***', CHECK_POLICY = OFF"),
    ("CREATE LOGIN l WITH PASSWORD = 0x0200A1B2C3D4E5F6 HASHED", "CREATE LOGIN l WITH PASSWORD = *** HASHED"),
    ("OPEN SYMMETRIC KEY k DECRYPTION BY PASSWORD = N'Secr3t!'",
     "OPEN SYMMETRIC KEY k DECRYPTION BY PASSWORD = N'***'"),
    ("CREATE MASTER KEY ENCRYPTION BY PASSWORD = N'Secr3t!'", "CREATE MASTER KEY ENCRYPTION BY PASSWORD = N'***'"),
    ("CREATE CERTIFICATE c ENCRYPTION BY PASSWORD = N'Secr3t!' WITH SUBJECT = N'Signing'",
     "CREATE CERTIFICATE c ENCRYPTION BY PASSWORD = N'***' WITH SUBJECT = N'Signing'"),
    ("CREATE DATABASE SCOPED CREDENTIAL c WITH IDENTITY = N'SHARED ACCESS SIGNATURE', SECRET = N'sv=2022&sig=zz'",
     "CREATE DATABASE SCOPED CREDENTIAL c WITH IDENTITY = N'SHARED ACCESS SIGNATURE', SECRET = N'***'"),
    # linked servers, logins, application roles: positional and named passwords
    ("EXEC sp_addlinkedsrvlogin 'srv', 'false', NULL, 'rmtuser', 'Secr3t!'",
     "EXEC sp_addlinkedsrvlogin 'srv', 'false', NULL, 'rmtuser', '***'"),
    ("EXEC master.dbo.sp_addlinkedsrvlogin N'srv', N'false', NULL, N'rmt', N'Secr3t!'",
     "EXEC master.dbo.sp_addlinkedsrvlogin N'srv', N'false', NULL, N'rmt', N'***'"),
    ("EXEC sp_addlinkedsrvlogin @rmtsrvname = N'srv', @useself = N'False', @rmtuser = N'u', @rmtpassword = N'Secr3t!'",
     "EXEC sp_addlinkedsrvlogin @rmtsrvname = N'srv', @useself = N'False', @rmtuser = N'u', @rmtpassword = N'***'"),
    ("EXEC sp_addlogin 'u', 'Secr3t!', 'db'", "EXEC sp_addlogin 'u', '***', 'db'"),
    ("EXEC sp_password 'old1', 'new1', 'u'", "EXEC sp_password '***', '***', 'u'"),
    ("EXEC sp_setapprole 'app', 'Secr3t!'", "EXEC sp_setapprole 'app', '***'"),
    # OPENROWSET's 'server'; 'user'; 'password' (and its connection-string form)
    ("SELECT * FROM OPENROWSET('SQLNCLI', 'srv1'; 'sa'; 'Secr3t!', 'SELECT * FROM db.dbo.t')",
     "SELECT * FROM OPENROWSET('SQLNCLI', 'srv1'; 'sa'; '***', 'SELECT * FROM db.dbo.t')"),
    ("SELECT * FROM OPENROWSET('MSDASQL', 'Driver={SQL Server};Server=s;UID=u;PWD=Secr3t!', 'SELECT 1')",
     "SELECT * FROM OPENROWSET('MSDASQL', 'Driver={SQL Server};Server=s;UID=u;PWD=***', 'SELECT 1')"),
    # command lines run by xp_cmdshell
    ("EXEC xp_cmdshell 'sqlcmd -S srv -U sa -P Secr3t! -Q \"SELECT 1\"'",
     "EXEC xp_cmdshell 'sqlcmd -S srv -U sa -P *** -Q \"SELECT 1\"'"),
    ("EXEC xp_cmdshell 'bcp db.dbo.t out C:\\t.dat -S srv -U sa -PSecr3t! -c'",
     "EXEC xp_cmdshell 'bcp db.dbo.t out C:\\t.dat -S srv -U sa -P*** -c'"),
    ("EXEC xp_cmdshell 'osql -S srv -U sa -P \"Secr3t! x\" -i in.sql'",
     "EXEC xp_cmdshell 'osql -S srv -U sa -P \"***\" -i in.sql'"),
    # ODBC value with a space; key: value; long options
    ("Driver={ODBC Driver 18 for SQL Server};Server=s;UID=u;Password=a b;Database=d",
     "Driver={ODBC Driver 18 for SQL Server};Server=s;UID=u;Password=***;Database=d"),
    ("api_key: Secr3tXYZ", "api_key: ***"),
    # generic names of a key in a URL's query: Azure Functions, Google APIs (not masked elsewhere: `key = 1` is SQL)
    ("https://fn.azurewebsites.net/api/lineage?code=QUERYsecret55==&x=1",
     "https://fn.azurewebsites.net/api/lineage?code=***&x=1"),
    ("api/v1/lineage?a=1&key=AIza-not-prefixed-123", "api/v1/lineage?a=1&key=***"),
    ("SELECT * FROM t WHERE code = 'x' AND key = 1", "SELECT * FROM t WHERE code = 'x' AND key = 1"),
    ("password: correct horse battery staple", "password: ***"),
    ('{"token": 12345678}', '{"token": ***}'),
    ("--password Secr3t! --user bob", "--password *** --user bob"),
    ("--api-key Secr3tXYZ", "--api-key ***"),
    # well-known token prefixes, anywhere (the prefix stays: it says what kind of credential leaked)
    ("git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/o/r.git",
     "git clone https://ghp_***@github.com/o/r.git"),
    ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789 used", "token ghp_*** used"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_pat_***"),
    ("glpat-abcdefghij0123456789", "glpat-***"),
    ("xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "xoxb-***"),
    ("OPENAI=sk-proj-abcdefghijklmnopqrstuvwxyz012345", "OPENAI=sk-proj-***"),
    ("key AIzaSyA1234567890abcdefghijklmnopqrstu", "key AIza***"),
    # item 10: random-looking values after key-, token-, secret-, password-like names, in any syntax
    ("DECLARE @api_key NVARCHAR(100) = N'8f3kd93jf82jdk29dj3kd8'", "DECLARE @api_key NVARCHAR(100) = N'***'"),
    ("apikey 8f3kd93jf82jdk29dj3kd8", "apikey ***"),
    ("SET @token = 'a8F3k2Lq9Zx7Wm4Rt6Yp1'", "SET @token = '***'"),
    ("UPDATE s.users SET password_hash = '5f4dcc3b5aa765d61d8327deb882cf99' WHERE id = 1",
     "UPDATE s.users SET password_hash = '***' WHERE id = 1"),
    ("auth_token(Q2F0c0RvZ3MxMjM0NTY3ODkw)", "auth_token(***)"),
]


@pytest.mark.parametrize(("text", "expected"), MASKED_EXACT)
def test_redact_masks_exactly(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected  # idempotent


UNCHANGED = [
    # harmless strings that must survive: table, column and path names around the secret-like words
    "INSERT INTO dbo.password_reset_log (user_id) SELECT id FROM dbo.users",
    "CREATE TABLE t (id INT PRIMARY KEY, customer_key INT, api_key_hash CHAR(64))",
    "ALTER TABLE t ADD CONSTRAINT pk PRIMARY KEY (order_id_2024_customer_ref)",
    "SELECT v:token::string, v:api_key::string FROM raw.events",
    "INSERT INTO dw.fact_sales (date_key, customer_key) SELECT d.date_key, c.customer_key FROM stg.s",
    "s3://bucket/token/3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c/file.parquet",
    "SELECT * FROM keys.signatures WHERE key_id = 20240101123456789",
    "EXEC xp_cmdshell 'dir C:\\data -p'",
    "harvest sqlserver --password-env DB01_PASSWORD --private-key-file /etc/k.p8",
    "task-runner disk-usage risk-score",
    "SELECT openrowset_count FROM stats",
    "-- password reset job",
    "SELECT high, right, weight FROM ghp",
    "EXEC sp_addlinkedserver @server = N'srv', @srvproduct = N'SQL Server'",
    "INSERT INTO dbo.password_history (user_id, changed_at) SELECT id, GETDATE() FROM dbo.passwords",
    "SELECT secret_santa, token_count FROM t WHERE token_count = 5 AND secret_santa = 'bob'",
    "UPDATE s.users SET password_hash = @h, last_token_at = @now WHERE id = @id",
    "CREATE TABLE t (id INT PRIMARY KEY, key_id INT, api_key_hash VARCHAR(64), tokens INT)",
    "ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (customer_id) REFERENCES sales.customers(id)",
    "SELECT * FROM keys.signatures s JOIN auth.sessions a ON a.key_id = s.key_id",
    "MERGE INTO tgt USING src ON tgt.key = src.key WHEN MATCHED THEN UPDATE SET tgt.v = src.v",
    "bypass=1 maxTokens=3 passes=2",
    "abfss://container@account.dfs.core.windows.net/warehouse/orders",
    "wasbs://raw@acct.blob.core.windows.net/landing",
    "s3://bucket/secret/token/file.parquet",
    "sqlserver://sqlprod01:1433",
    "postgres://db.example.com:5432",
    "file:/tmp/warehouse/passwords",
    "mail to ops@example.com about user:pass@ semantics",
    "https://openlineage.io/spec/facets/1-0-1/SQLJobFacet.json#/$defs/SQLJobFacet",
    "execute_insert_into_hadoop_fs_relation_command",
    "SELECT 'password' AS label, 'token' AS kind",
    "Login failed for user 'etl'. Reason: Password did not match that for the login provided.",
    "CREATE TABLE u (id int, password nvarchar2(100), pwd varchar(64), passphrase char(8))",
    "SELECT password, login FROM dbo.users WHERE password IS NULL",
    "pwd /home/user/project",
    "",
]


@pytest.mark.parametrize("text", UNCHANGED)
def test_redact_leaves_lineage_data_alone(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("text", ["SELECT a FROM b", "postgres://db.example.com:5432", "orders"])
def test_redact_returns_the_same_object_without_triggers(text: str) -> None:
    assert redact(text) is text  # the fast path allocates nothing


RULE_EXAMPLES = {
    "url_query_key": ("POST https://fn.azurewebsites.net/api/lineage?code=abc123XYZ failed",
                      "POST https://fn.azurewebsites.net/api/lineage?code=*** failed"),
    "pem_private_key": ("-----BEGIN RSA PRIVATE KEY-----\nAB\n-----END RSA PRIVATE KEY-----",
                        "-----BEGIN RSA PRIVATE KEY-----***-----END RSA PRIVATE KEY-----"),
    "authorization_header": ("Proxy-Authorization: Basic Zm9v", "Proxy-Authorization: ***"),
    "bearer_token": ("Bearer abc.def", "Bearer ***"),
    "basic_credentials": ('{"echo": "Basic bGluOlVybFB3ZDEyMzQ="}', '{"echo": "Basic ***"}'),
    "url_userinfo": ("ftp://u:p@h/x", "ftp://u:***@h/x"),
    "oracle_userpass": ("jdbc:oracle:oci:u/p@h", "jdbc:oracle:oci:u/***@h"),
    "azure_connection_string": ("AccountKey=k==;x=1", "AccountKey=***;x=1"),
    "azure_hadoop_key": ("fs.azure.account.key.a.blob.core.windows.net = k",
                         "fs.azure.account.key.a.blob.core.windows.net = ***"),
    "key_value": ("PWD={x};UID=u", "PWD={***};UID=u"),
    "password_word": ("bad password hunter2.", "bad password ***"),
    "quoted_key_value": ('{"apiKey": "k"}', '{"apiKey": "***"}'),
    "sql_keyword_literal": ("WITH PASSWORD 'x''y'", "WITH PASSWORD '***'"),
    "sql_identified_by": ("IDENTIFIED BY VALUES 'S:ABC'", "IDENTIFIED BY VALUES '***'"),
    "aws_access_key_id": (f"id={AKIA}.", "id=AKIA***."),
    "cli_option": ("--token t0k --x", "--token *** --x"),
    "tsql_proc_password": ("sp_addlinkedsrvlogin 's', 'false', NULL, 'u', N'p'",
                           "sp_addlinkedsrvlogin 's', 'false', NULL, 'u', N'***'"),
    "openrowset_password": ("OPENROWSET('p','s';'u';'pw','q')", "OPENROWSET('p','s';'u';'***','q')"),
    "command_password_flag": ("sqlcmd -S s -P pw -Q q", "sqlcmd -S s -P *** -Q q"),
    "well_known_token": ("ghp_0123456789abcdefABCDEF", "ghp_***"),
    "secret_shaped_value": ("apikey 8f3kd93jf82jdk29dj3kd8", "apikey ***"),
}


def test_every_rule_has_an_example() -> None:
    assert set(RULE_EXAMPLES) == {rule.name for rule in RULES}
    assert all(rule.comment and rule.triggers for rule in RULES)


@pytest.mark.parametrize(("name", "text", "expected"), [(n, *v) for n, v in RULE_EXAMPLES.items()])
def test_rule_example_exact(name: str, text: str, expected: str) -> None:
    assert redact(text) == expected


SECRET_KEYS = [
    ("spark.hadoop.fs.s3a.secret.key", True),
    ("spark.hadoop.fs.s3a.access.key", True),
    ("spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net", True),
    ("spark.openlineage.transport.auth.apiKey", True),
    ("spark.ssl.trustStorePassword", True),
    ("password", True),
    ("sessionToken", True),
    ("Authorization", True),
    ("sig", True),
    ("spark.app.name", False),
    ("spark.master", False),
    ("spark.openlineage.transport.auth.type", False),
    ("name", False),
    ("query", False),
    ("partitionKey", False),
    ("design", False),
]


@pytest.mark.parametrize(("key", "expected"), SECRET_KEYS)
def test_is_secret_key(key: str, expected: bool) -> None:
    assert is_secret_key(key) is expected


def test_redact_obj_copies_and_masks_values_not_keys() -> None:
    event = {
        "eventType": "COMPLETE",
        "job": {"namespace": "default", "name": "app.execute_save_into_data_source_command.dbo_passwords"},
        "run": {
            "facets": {
                "spark_properties": {
                    "properties": {
                        "spark.master": "local[2]",
                        "spark.hadoop.fs.s3a.secret.key": "plainvalue",
                        "spark.jdbc.url": "jdbc:postgresql://u:pw1@h/db?password=pw2",
                    }
                },
                "sql": {"query": "CREATE USER u PASSWORD = 'pw3'"},
            }
        },
        "inputs": [{"namespace": "postgres://h:5432", "name": "db.public.password_history", "facets": {}}],
        "outputs": [{"namespace": "file", "name": "/tmp/out",
                     "facets": {"columnLineage": {"fields": {"password": {"inputFields": []}}}}}],
        "counts": (1, 2.5, None, True),
    }
    original = repr(event)
    out = redact_obj(event)
    assert repr(event) == original  # input untouched
    props = out["run"]["facets"]["spark_properties"]["properties"]
    assert props == {
        "spark.master": "local[2]",
        "spark.hadoop.fs.s3a.secret.key": MASK,
        "spark.jdbc.url": "jdbc:postgresql://u:***@h/db?password=***",
    }
    assert out["run"]["facets"]["sql"]["query"] == "CREATE USER u PASSWORD = '***'"
    assert out["job"] == event["job"]
    assert out["inputs"] == event["inputs"]
    assert out["outputs"] == event["outputs"]  # a column named "password" is a key holding a dict: kept
    assert out["counts"] == [1, 2.5, None, True]


def test_redacting_filter_masks_message_args_and_traceback(tmp_path) -> None:
    log_file = tmp_path / "log.txt"
    handler = logging.FileHandler(log_file)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("test_redact.filter")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        logger.warning("connecting to %s", "jdbc:sqlserver://h;user=sa;password=argpw1")
        logger.warning("literal password=msgpw2 and %d%%", 5)
        try:
            raise RuntimeError("login failed for postgresql://bob:excpw3@h/db")
        except RuntimeError:
            logger.exception("delivery failed, token=%s", "tokpw4")
        logger.warning("bad args %s %s", "only-one-arg password=argpw5")
    finally:
        logger.removeHandler(handler)
        handler.close()
    text = log_file.read_text()
    for secret in ("argpw1", "msgpw2", "excpw3", "tokpw4", "argpw5"):
        assert secret not in text
    assert "WARNING connecting to jdbc:sqlserver://h;user=sa;password=***" in text
    assert "literal password=*** and 5%" in text
    assert "RuntimeError: login failed for postgresql://bob:***@h/db" in text
    assert "delivery failed, token=***" in text
