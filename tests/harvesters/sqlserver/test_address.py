"""One reader of a SQL Server address for ``--server``, a live harvest's connection string and a linked server's
data source (harvesters.sqlserver.address): each form its clients accept, and the namespace it gives."""
from __future__ import annotations

import pytest

from emitter.naming import sqlserver_namespace
from harvesters.sqlserver.address import parse_server

ADDRESSES = [
    ("sqlprod01", ("sqlprod01", None), "sqlserver://sqlprod01:1433"),
    ("sqlprod01,1450", ("sqlprod01", "1450"), "sqlserver://sqlprod01:1450"),
    ("sqlprod01:1450", ("sqlprod01", "1450"), "sqlserver://sqlprod01:1450"),
    ("tcp:sqlprod01,1450", ("sqlprod01", "1450"), "sqlserver://sqlprod01:1450"),
    (" TCP: sqlprod01 , 1450 ", ("sqlprod01", "1450"), "sqlserver://sqlprod01:1450"),
    ("sqlprod01\\DW", ("sqlprod01\\DW", None), "sqlserver://sqlprod01/DW"),
    # a named instance on a fixed port (read as the instance "DW,1450" before)
    ("sqlprod01\\DW,1450", ("sqlprod01\\DW", "1450"), "sqlserver://sqlprod01:1450/DW"),
    ("tcp:sqlprod01\\DW, 1450", ("sqlprod01\\DW", "1450"), "sqlserver://sqlprod01:1450/DW"),
    # named pipes: the default instance's and a named instance's
    ("np:\\\\sqlprod01\\pipe\\sql\\query", ("sqlprod01", None), "sqlserver://sqlprod01:1433"),
    ("np:\\\\SQLPROD01\\pipe\\MSSQL$DW\\sql\\query", ("SQLPROD01\\DW", None), "sqlserver://sqlprod01/DW"),
    ("lpc:sqlprod01", ("sqlprod01", None), "sqlserver://sqlprod01:1433"),
    ("admin:sqlprod01", ("sqlprod01", None), "sqlserver://sqlprod01:1433"),
    ("[fe80::1]:1450", ("fe80::1", "1450"), "sqlserver://[fe80::1]:1450"),
    ("[fe80::1]", ("fe80::1", None), "sqlserver://[fe80::1]:1433"),
    ("fe80::1,1450", ("fe80::1", "1450"), "sqlserver://[fe80::1]:1450"),
    ("fe80::1", ("fe80::1", None), "sqlserver://[fe80::1]:1433"),
]


@pytest.mark.parametrize("text,address,namespace", ADDRESSES, ids=[a[0].strip() for a in ADDRESSES])
def test_an_address_as_sql_server_clients_write_it(text: str, address: tuple[str, str | None], namespace: str) -> None:
    assert (parse_server(text), sqlserver_namespace(*parse_server(text))) == (address, namespace)
