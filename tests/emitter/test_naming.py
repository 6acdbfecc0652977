"""Dataset/job naming: the JVM OpenLineage integration's forms (cases ported from its Java tests)."""
from __future__ import annotations

import json
import os

import pytest

from emitter.naming import (
    escape_literal_path,
    jdbc_dataset,
    jdbc_namespace,
    normalize_name,
    path_dataset,
    safe_namespace,
    snowflake_namespace,
    sqlserver_dataset_name,
    sqlserver_namespace,
    trim_partitions,
)
from emitter.naming.sqlserver import split_sqlserver_name

from paths import SHARED

EXPECTED = SHARED / "openlineage-spark-expected" / "container"
CWD = os.getcwd()

PATHS = [
    # local files: absolute path, no trailing "/", file:/// == file:/ == plain path
    ("/tmp/warehouse/target", ("file", "/tmp/warehouse/target")),
    ("/tmp/warehouse/target/", ("file", "/tmp/warehouse/target")),
    ("file:/tmp/warehouse/target", ("file", "/tmp/warehouse/target")),
    ("file:///tmp/warehouse/target/", ("file", "/tmp/warehouse/target")),
    ("file://localhost/tmp/x", ("file", "/tmp/x")),
    ("file:/tmp/a%20b/c", ("file", "/tmp/a b/c")),
    ("file:/", ("file", "/")),
    ("/", ("file", "/")),
    ("rel/dir/", ("file", f"{CWD}/rel/dir")),
    ("/tmp/a/../b", ("file", "/tmp/b")),
    ("file://otherhost/data/x", ("file://otherhost", "/data/x")),
    # hdfs keeps its leading "/" and the port as written
    ("hdfs://namenode:8020", ("hdfs://namenode:8020", "/")),
    ("hdfs://namenode:8020/warehouse/location/", ("hdfs://namenode:8020", "/warehouse/location")),
    ("hdfs://nn/path", ("hdfs://nn", "/path")),
    ("hdfs://user:pw@nn:8020/x?op=OPEN#frag", ("hdfs://nn:8020", "/x")),
    # object stores: s3a/s3n -> s3, key without leading "/"
    ("s3://bucket", ("s3://bucket", "/")),
    ("s3://bucket/warehouse/location/", ("s3://bucket", "warehouse/location")),
    ("s3a://bucket/warehouse/location/", ("s3://bucket", "warehouse/location")),
    ("s3n://bucket/warehouse/location", ("s3://bucket", "warehouse/location")),
    ("s3a://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI@bucket/k", ("s3://bucket", "k")),
    ("s3a://AKIAIOSFODNN7EXAMPLE:wJalr/XUtn+FEMI@bucket/k/", ("s3://bucket", "k")),
    ("s3://bucket/k/file@v2.csv", ("s3://bucket", "k/file@v2.csv")),
    ("s3://bucket/k?versionId=3", ("s3://bucket", "k")),
    ("gs://bucket/warehouse/location/", ("gs://bucket", "warehouse/location")),
    ("gs://user:secret@bucket/k", ("gs://bucket", "k")),
    # Azure: authority kept as written (JVM), abfs -> abfss, wasb -> wasbs
    (
        "abfss://container@account.dfs.core.windows.net/warehouse/location/",
        ("abfss://container@account.dfs.core.windows.net", "warehouse/location"),
    ),
    (
        "abfs://container@account.dfs.core.windows.net/warehouse",
        ("abfss://container@account.dfs.core.windows.net", "warehouse"),
    ),
    ("abfss://container@account.dfs.core.windows.net", ("abfss://container@account.dfs.core.windows.net", "/")),
    ("wasbs://container@acct.blob.core.windows.net/p/q", ("wasbs://container@acct.blob.core.windows.net", "p/q")),
    ("wasb://container@bucket/warehouse", ("wasbs://container@bucket", "warehouse")),
    # other schemes: generic scheme://authority + path
    ("dbfs:/mnt/data/x/", ("dbfs", "/mnt/data/x")),
    ("oss://bucket/path/", ("oss://bucket", "/path")),
]


@pytest.mark.parametrize(("uri", "expected"), PATHS)
def test_path_dataset(uri: str, expected: tuple[str, str]) -> None:
    assert path_dataset(uri) == expected


@pytest.mark.parametrize(
    "literal, expected",
    [
        # Hadoop's Path.toString(): not percent-encoded; the name is the folder's, `%` and all
        ("file:/data/p%41 x/out", ("file", "/data/p%41 x/out")),
        ("file:/data/k=a%2Fb", ("file", "/data/k=a%2Fb")),
        ("hdfs://nn:8020/w/100%", ("hdfs://nn:8020", "/w/100%")),
        ("s3a://bucket/a%20b", ("s3://bucket", "a%20b")),
        # a plain path is never decoded: as it is
        ("/data/p%41", ("file", "/data/p%41")),
        ("C:/data/p%41", ("file", os.path.abspath("C:/data/p%41"))),
        ("file:/data/plain", ("file", "/data/plain")),
    ],
)
def test_literal_paths_keep_their_percent_signs(literal: str, expected: tuple[str, str]) -> None:
    assert path_dataset(escape_literal_path(literal)) == expected


PARTITIONS = [
    ("/x/20250901", "/x"),
    ("/x/dt=2025-09-01", "/x"),
    ("/x/2025/09/01", "/x"),
    ("/x/2025/09", "/x"),
    ("/x/202509", "/x"),
    ("/x/2025-09", "/x"),
    ("/x/2025-09-01", "/x"),
    ("/x/01.09.2025", "/x"),
    ("/x/20250722T0901Z", "/x"),
    ("/x/year=2025/month=09/day=01", "/x"),
    ("/x/dt=2025-09-01/hour=03", "/x"),
    ("/x/country=PL/20250901", "/x"),
    ("warehouse/tbl/dt=2025-09-01", "warehouse/tbl"),
    ("/x/dt=2025-09-01/", "/x"),
    ("/x/data", "/x/data"),  # not a partition
    ("/x/part-00000.parquet", "/x/part-00000.parquet"),
    ("/x/2025-09-01.csv", "/x/2025-09-01.csv"),  # a file named by date is not a folder partition
    ("/x/v1", "/x/v1"),
    ("/x/19", "/x/19"),
    ("/x/20251340", "/x/20251340"),  # not a valid date
    ("/x/a=b=c", "/x/a=b=c"),  # two "=": not key=value
    ("/20250901", "/20250901"),  # never empties a single-segment name
    ("/dt=2025-09-01", "/dt=2025-09-01"),
    ("/tmp/warehouse/target", "/tmp/warehouse/target"),
]


@pytest.mark.parametrize(("path", "expected"), PARTITIONS)
def test_trim_partitions(path: str, expected: str) -> None:
    assert trim_partitions(path) == expected


JDBC = [
    # postgres: 5432 filled, database prefixed, credentials/query stripped, host lower-cased
    ("jdbc:postgresql://test-host.com", "schema.table1", ("postgres://test-host.com:5432", "schema.table1")),
    ("jdbc:postgresql://hostname:5433", "schema.table1", ("postgres://hostname:5433", "schema.table1")),
    ("jdbc:postgresql://hostname/mydb", "schema.table1", ("postgres://hostname:5432", "mydb.schema.table1")),
    ("jdbc:postgresql://hostname?user=fred&password=sec%40ret", "t", ("postgres://hostname:5432", "t")),
    ("jdbc:postgresql://fred:sec%40ret@hostname/db", "t", ("postgres://hostname:5432", "db.t")),
    ("JDBC:POSTGRESQL://TEST.HOST.COM/MYDB", "SCHEMA.TABLE1", ("postgres://test.host.com:5432", "MYDB.SCHEMA.TABLE1")),
    ("jdbc:postgresql://[3ffe:8311::9]", "s.t", ("postgres://[3ffe:8311::9]:5432", "s.t")),
    ("jdbc:postgresql://[3ffe:8311::9]:5433/db", "s.t", ("postgres://[3ffe:8311::9]:5433", "db.s.t")),
    ("jdbc:postgresql://hostname1,hostname2", "s.t", ("postgres://hostname1:5432,hostname2:5432", "s.t")),
    ("jdbc:postgresql://hostname/db?ssl=true&applicationName=MyApp", "t", ("postgres://hostname:5432", "db.t")),
    # mysql: 3306 filled; "db.table" in dbtable wins over the URL's database
    ("jdbc:mysql://test-host.com", "schema.table1", ("mysql://test-host.com:3306", "schema.table1")),
    ("jdbc:mysql://hostname/mydb", "table1", ("mysql://hostname:3306", "mydb.table1")),
    ("jdbc:mysql://hostname/mydb", "other.table1", ("mysql://hostname:3306", "other.table1")),
    ("jdbc:mysql://fred:sec%40ret@hostname:3307/db", "t", ("mysql://hostname:3307", "db.t")),
    ("jdbc:mysql+srv:loadbalance://domain.com", "s.t", ("mysql://domain.com:3306", "s.t")),
    ("jdbc:mysql://u:p@myhost1:1111,u:p@myhost2:2222", "s.t", ("mysql://myhost1:1111,myhost2:2222", "s.t")),
    (
        "jdbc:mysql://address=(host=h1)(port=1111)(user=sandy)(password=sec),address=(host=h2)(port=2222)",
        "s.t",
        ("mysql://address=(host=h1)(port=1111),address=(host=h2)(port=2222)", "s.t"),
    ),
    # sqlserver: 1433 filled (this project), db.schema.table with dbo default, ;properties read
    (
        "jdbc:sqlserver://host:1433;databaseName=db;user=sa;password=S3cret",
        "orders",
        ("sqlserver://host:1433", "db.dbo.orders"),
    ),
    ("jdbc:sqlserver://host;databaseName=db", "sales.orders", ("sqlserver://host:1433", "db.sales.orders")),
    ("jdbc:sqlserver://HOST.corp:14330;DATABASENAME=DB", "[dbo].[T]", ("sqlserver://host.corp:14330", "DB.dbo.T")),
    ("jdbc:sqlserver://hostname;portNumber=1444;database=d", "s.t", ("sqlserver://hostname:1444", "d.s.t")),
    ("jdbc:sqlserver://;serverName=someserver;databaseName=d", "s.t", ("sqlserver://someserver:1433", "d.s.t")),
    ("jdbc:sqlserver://hostname\\someinstance;databaseName=d", "s.t", ("sqlserver://hostname/someinstance", "d.s.t")),
    ("jdbc:sqlserver://hostname;instanceName=inst", "s.t", ("sqlserver://hostname/inst", "s.t")),
    ("jdbc:sqlserver://host;databaseName=db", "otherdb.dbo.t", ("sqlserver://host:1433", "otherdb.dbo.t")),
    ("jdbc:jtds:sqlserver://host:1433/db;user=u;password=p", "t", ("sqlserver://host:1433", "db.dbo.t")),
    # oracle: 1521 filled, service name / SID is the database part
    ("jdbc:oracle:thin:@//test-host.com", "schema.table1", ("oracle://test-host.com:1521", "schema.table1")),
    ("jdbc:oracle:thin:scott/tiger@//hostname:1522/svc", "s.t", ("oracle://hostname:1522", "svc.s.t")),
    ("jdbc:oracle:thin:fred/sec%40ret@hostname", "s.t", ("oracle://hostname:1521", "s.t")),
    ("jdbc:oracle:thin:@hostname:1522:sid", "s.t", ("oracle://hostname:1522", "sid.s.t")),
    ("JDBC:ORACLE:THIN:@TEST.HOST.COM:SID", "S.T", ("oracle://test.host.com:1521", "SID.S.T")),
    ("jdbc:oracle:thin:@tcp://hostname", "s.t", ("oracle://hostname:1521", "s.t")),
    ("jdbc:oracle:thin:@//hostname?connect_timeout=30", "s.t", ("oracle://hostname:1521", "s.t")),
    (
        "jdbc:oracle:thin:@(DESCRIPTION=(ADDRESS_LIST=(ADDRESS=(PROTOCOL=tcp)(HOST=host1))"
        "(ADDRESS=(PROTOCOL=tcp)(HOST=host2)(PORT=1522)))(CONNECT_DATA=(SID=orcl)))",
        "s.t",
        ("oracle://host1:1521,host2:1522", "orcl.s.t"),
    ),
    # derby: embedded -> file:{database directory}, name = table; network -> derby://host:port
    ("jdbc:derby:/tmp/lineage/db;create=true", "APP.ORDERS", ("file:/tmp/lineage/db", "APP.ORDERS")),
    ("jdbc:derby:/tmp/lineage/db;user=a;password=b", "T", ("file:/tmp/lineage/db", "T")),
    ("jdbc:derby:directory:/tmp/lineage/db", "T", ("file:/tmp/lineage/db", "T")),
    ("jdbc:derby:", "schema.table1", (f"file:{CWD}/metastore_db", "schema.table1")),
    ("jdbc:derby:;databaseName=somedb", "schema.table1", (f"file:{CWD}/somedb", "schema.table1")),
    ("jdbc:derby:memory:testdb;create=true", "T", ("derby:memory:testdb", "T")),
    ("jdbc:derby://dbhost:1527/lineage;create=true", "APP.T", ("derby://dbhost:1527", "lineage.APP.T")),
    # generic: scheme://host[:port] as written, database prefixed
    ("jdbc:unknown://TEST.HOST.COM/MYDB", "SCHEMA.TABLE1", ("unknown://test.host.com", "MYDB.SCHEMA.TABLE1")),
    ("jdbc:unknown://fred:sec%40ret@hostname:5432", "s.t", ("unknown://hostname:5432", "s.t")),
    ("jdbc:unknown://hostname1,hostname2", "s.t", ("unknown://hostname1,hostname2", "s.t")),
    ("jdbc:teradata://host/DATABASE=x,DBS_PORT=1025", "t", ("teradata://host", "t")),
    # unparseable: the sanitized URL, like the Java client's fallback
    ("jdbc:weird:opaque;user=u;password=p", "t", ("weird:opaque", "t")),
]


@pytest.mark.parametrize(("url", "table", "expected"), JDBC)
def test_jdbc_dataset(url: str, table: str, expected: tuple[str, str]) -> None:
    assert jdbc_dataset(url, table) == expected
    assert jdbc_namespace(url) == expected[0]


DERBY_HOME = [
    ("jdbc:derby:;databaseName=nested/path", "/some/path", "file:/some/path/nested/path"),
    ("jdbc:derby:;databaseName=../parent/path", "/some/path", "file:/some/parent/path"),
    ("jdbc:derby:", "/some/path", "file:/some/path/metastore_db"),
    ("jdbc:derby:relative/db;create=true", "/some/path", "file:/some/path/relative/db"),
    ("jdbc:derby:/abs/db", "/some/path", "file:/abs/db"),
]


@pytest.mark.parametrize(("url", "home", "expected"), DERBY_HOME)
def test_jdbc_namespace_derby_home(url: str, home: str, expected: str) -> None:
    assert jdbc_namespace(url, derby_home=home) == expected


SQLSERVER_NAMESPACES = [
    (("sqlprod01",), "sqlserver://sqlprod01:1433"),
    (("SQLPROD01.corp.example.com", 1433), "sqlserver://sqlprod01.corp.example.com:1433"),
    (("host", "14330"), "sqlserver://host:14330"),
    (("host", None), "sqlserver://host:1433"),
    (("HOST\\INST",), "sqlserver://host/INST"),
    (("host\\inst", 50123), "sqlserver://host:50123/inst"),
    (("3ffe:8311::9",), "sqlserver://[3ffe:8311::9]:1433"),
]


@pytest.mark.parametrize(("args", "expected"), SQLSERVER_NAMESPACES)
def test_sqlserver_namespace(args: tuple, expected: str) -> None:
    assert sqlserver_namespace(*args) == expected


SQLSERVER_NAMES = [
    (("sales", "dbo", "orders"), "sales.dbo.orders"),
    (("sales", None, "orders"), "sales.dbo.orders"),
    (("sales", "stg", "orders"), "sales.stg.orders"),
    (("sales", None, "stg.orders"), "sales.stg.orders"),
    (("sales", None, "[stg].[order details]"), "sales.stg.order details"),
    (("sales", None, "other.stg.orders"), "other.stg.orders"),
    (("[Sales]", "[dbo]", "[Orders]"), "Sales.dbo.Orders"),
    ((None, None, "orders"), "dbo.orders"),
    # a part holding a dot, bracketed as the SQL engine reports it; `]]` is a `]` inside brackets
    (("sales", None, "dbo.[t.2024]"), "sales.dbo.t.2024"),
    ((None, None, "[a]]b.c]"), "dbo.a]b.c"),
]


@pytest.mark.parametrize(("args", "expected"), SQLSERVER_NAMES)
def test_sqlserver_dataset_name(args: tuple, expected: str) -> None:
    assert sqlserver_dataset_name(*args) == expected


SQLSERVER_SPLITS = [
    ("db.dbo.t", ["db", "dbo", "t"]),
    ("[10.0.0.5].db.dbo.t", ["10.0.0.5", "db", "dbo", "t"]),
    ("srv..dbo.t", ["srv", "", "dbo", "t"]),
    ("[srv.corp]...t", ["srv.corp", "", "", "t"]),
    ("DW.dbo.[t.2024]", ["DW", "dbo", "t.2024"]),
    ("DW.dbo.[a]]b.c]", ["DW", "dbo", "a]b.c"]),
    ("[a.b]", ["a.b"]),
    ("t.", ["t", ""]),
]


@pytest.mark.parametrize(("name", "parts"), SQLSERVER_SPLITS)
def test_split_sqlserver_name(name: str, parts: list[str]) -> None:
    assert split_sqlserver_name(name) == parts


SNOWFLAKE = [
    # the Java client's SnowflakeUtilsTest cases, plus lower-casing
    ("https://myorg-myaccount.snowflakecomputing.com", "snowflake://myorg-myaccount"),
    ("http://myorg-myaccount.snowflakecomputing.com", "snowflake://myorg-myaccount"),
    ("myorg-myaccount", "snowflake://myorg-myaccount"),
    ("https://my-org-name-my-account.snowflakecomputing.com", "snowflake://my-org-name-my-account"),
    ("ORG-ACCT", "snowflake://org-acct"),
    ("MYORG-MY_ACCOUNT", "snowflake://myorg-my_account"),
    (
        "https://acctlocator-withahyphen.us-west-2.aws.snowflakecomputing.com",
        "snowflake://acctlocator-withahyphen.us-west-2.aws",
    ),
    ("https://xy12345.snowflakecomputing.com", "snowflake://xy12345.us-west-1.aws"),
    ("https://xy12345.us-west-2.snowflakecomputing.com", "snowflake://xy12345.us-west-2.aws"),
    ("https://xy12345.east-us-2.azure.snowflakecomputing.com", "snowflake://xy12345.east-us-2.azure"),
    ("https://abc123.us-central1.gcp.snowflakecomputing.com/", "snowflake://abc123.us-central1.gcp"),
    ("accountlocator", "snowflake://accountlocator.us-west-1.aws"),
    ("xy12345.us-east-1", "snowflake://xy12345.us-east-1.aws"),
    ("XY12345.US-EAST-1.GCP", "snowflake://xy12345.us-east-1.gcp"),
    ("xy12345.us-east-1.snowflakecomputing.com:443", "snowflake://xy12345.us-east-1.aws"),
]


@pytest.mark.parametrize(("account", "expected"), SNOWFLAKE)
def test_snowflake_namespace(account: str, expected: str) -> None:
    assert snowflake_namespace(account) == expected


NORMALIZE = [
    # the Spark integration's NameNormalizerTest, every case
    (None, ""),
    ("", ""),
    ("word", "word"),
    ("@ more than one     words !", "more_than_one_words"),
    ("with some Capitalized WORDS", "with_some_capitalized_words"),
    ("this (includes some) parenthesis", "this_includes_some_parenthesis"),
    ("this - on the other hand -- has hyphens", "this_on_the_other_hand_has_hyphens"),
    ("now we have (a complex) name - with hyphens too", "now_we_have_a_complex_name_with_hyphens_too"),
    ("in glue/aws we can have slashes", "in_glue_aws_we_can_have_slashes"),
    ("theNamesLikeThisShouldBeSeparated - are they?", "the_names_like_this_should_be_separated_are_they"),
    ("testXMLTest", "test_xml_test"),
    ("testXMLtest", "test_xm_ltest"),
    ("test XML test", "test_xml_test"),
    ("foreignLetters ąśé•¶€ are supported", "foreign_letters_ase_are_supported"),
    ("but to a degree 这是一个例子", "but_to_a_degree"),
    ("323digits123Should45BE_ALSO34 fine89", "323digits123_should45_be_also34_fine89"),
    ("A Test Application", "a_test_application"),
    ("MyTestApplication", "my_test_application"),
    ("MyXMLBasedApplication", "my_xml_based_application"),
    ("JDBCRelationApplication", "jdbc_relation_application"),
    ("Test With a Single LetterBetweenWords", "test_with_a_single_letter_between_words"),
    ("c9acd38e_71d4_4a61_89d5_fd4ff842bf79_0", "c9acd38e_71d4_4a61_89d5_fd4ff842bf79_0"),
    # reference.md examples (app names and plan node names)
    ("Open Lineage Integration CTAS Load", "open_lineage_integration_ctas_load"),
    ("Execute InsertIntoHadoopFsRelationCommand", "execute_insert_into_hadoop_fs_relation_command"),
    ("AtomicCreateTableAsSelect", "atomic_create_table_as_select"),
    ("AppendData", "append_data"),
]


@pytest.mark.parametrize(("name", "expected"), NORMALIZE)
def test_normalize_name(name: str | None, expected: str) -> None:
    assert normalize_name(name) == expected


SAFE_NAMESPACES = [
    ("postgres://h:5432", "postgres://h:5432"),
    ("abfss://c@acct.dfs.core.windows.net", "abfss://c@acct.dfs.core.windows.net"),
    ("snowflake://xy12345.us-east-1.aws", "snowflake://xy12345.us-east-1.aws"),
    ("file:/tmp/x;a=b+c", "file:/tmp/x;a=b+c"),
    ("postgres://h1:5432,h2:5432", "postgres://h1:5432_h2:5432"),
    ("postgres://[::1]:5432", "postgres://_::1_:5432"),
    ("sqlserver://host\\inst", "sqlserver://host_inst"),
    ("my namespace%", "my_namespace_"),
    ("dépôt", "d_p_t"),
]


@pytest.mark.parametrize(("namespace", "expected"), SAFE_NAMESPACES)
def test_safe_namespace(namespace: str, expected: str) -> None:
    assert safe_namespace(namespace) == expected


def _fixture_datasets() -> list[tuple[str, str, str]]:
    """(fixture file, namespace, name) of every file dataset in the JVM integration's expected events."""
    found = set()
    for path in sorted(EXPECTED.glob("*.json")):
        event = json.loads(path.read_text())
        for ds in event.get("inputs", []) + event.get("outputs", []):
            if ds.get("namespace") == "file" and ds.get("name", "").startswith("/"):
                found.add((path.name, ds["namespace"], ds["name"]))
    return sorted(found)


FIXTURE_DATASETS = _fixture_datasets()


def test_fixtures_have_file_datasets() -> None:
    assert len(FIXTURE_DATASETS) >= 40  # the check below must not pass vacuously


@pytest.mark.parametrize(("fixture", "namespace", "name"), FIXTURE_DATASETS)
def test_path_dataset_matches_jvm_fixture(fixture: str, namespace: str, name: str) -> None:
    # Spark hands the JVM integration qualified "file:/..." locations, often with a trailing "/"
    assert path_dataset(f"file:{name}/") == (namespace, name)
    assert path_dataset(f"file://{name}") == (namespace, name)
    assert trim_partitions(name) == name  # none of them is a partition folder


def test_jdbc_name_matches_jvm_fixture() -> None:
    # columnLineageJDBC*: ColumnLineageIntegrationTest reads jdbc:postgresql://localhost:{port}/test
    event = json.loads((EXPECTED / "columnLineageJDBCComplete.json").read_text())
    names = sorted(ds["name"] for ds in event["inputs"] if ds["name"].startswith("test."))
    assert names == ["test.jdbc_source1", "test.jdbc_source2"]
    url = "jdbc:postgresql://localhost:49153/test"
    assert [jdbc_dataset(url, t)[1] for t in ("jdbc_source1", "jdbc_source2")] == names
    assert jdbc_namespace(url) == "postgres://localhost:49153"
