"""SQL Server addresses as its clients write them (``--server``, a connection string's ``Server``, a linked server's
``data_source``) -> (host, port): one reader for all three, so a server is named alike wherever it is written."""
from __future__ import annotations

import re

#: A SQL Server address's protocol prefix (TCP, named pipes, shared memory, the dedicated admin connection).
_PROTOCOL = re.compile(r"(?i)^\s*(?:tcp|np|lpc|admin):")
#: A named pipe, ``\\host\pipe\sql\query`` (the default instance) or ``\\host\pipe\MSSQL$INST\sql\query``.
_PIPE = re.compile(r"(?i)^\\\\([^\\]+)\\pipe\\(?:mssql\$([^\\]+)\\)?")
#: A bracketed IPv6 host, its port after a colon or a comma.
_IPV6 = re.compile(r"^\[([^\]]+)\](?:[:,](\d*))?$")


def without_protocol(text: str) -> str:
    """``text`` without its ``tcp:`` / ``np:`` / ``lpc:`` / ``admin:`` prefix."""
    return _PROTOCOL.sub("", text).strip()


def parse_server(text: str) -> tuple[str, str | None]:
    """A SQL Server address as its clients take it (``--server``, a connection string's ``Server``, a linked
    server's data source) -> (host, port or None): ``host``, ``host,1433`` (SQL Server style) or ``host:1433``,
    ``host\\instance``, ``host\\instance,1450`` (a named instance on a fixed port), ``[fe80::1]:1433``; a protocol
    prefix dropped; a named pipe read as its host (and its instance, ``MSSQL$INST``)."""
    text = without_protocol(text)
    pipe = _PIPE.match(text)
    if pipe:
        host, instance = pipe.groups()
        return (f"{host}\\{instance}" if instance else host), None
    ipv6 = _IPV6.match(text)
    if ipv6:
        return ipv6.group(1), ipv6.group(2) or None
    head, sep, instance = text.partition("\\")
    if sep:
        instance, _, port = instance.partition(",")
        return f"{head.strip()}\\{instance.strip()}", port.strip() or None
    if text.count(":") == 1 or "," in text:
        host, _, port = text.replace(",", ":").rpartition(":")
        return host.strip(), port.strip() or None
    return text, None
