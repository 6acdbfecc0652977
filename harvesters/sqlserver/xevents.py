"""Reading SQL Server Extended Events XML: one ``<event>`` at a time, with bounded memory, never crashing.

Three input shapes are read the same way:

* one ``<event>`` per line: the ``event_data`` column of ``sys.fn_xe_file_target_read_file`` exported as text
  (a statement may still span several lines inside its CDATA);
* a stream of ``<event>`` elements (concatenated documents, any whitespace between them);
* a ``<RingBufferTarget>`` document (``target_data`` of a ring_buffer target), pretty-printed or on one line.

The byte stream is cut at every ``<event`` tag and each event is parsed on its own by the stdlib XML parser
(expat, through ``ElementTree``). A single ``iterparse`` over the whole file cannot be used for this: expat
stops at the first syntax error, so one truncated event or one invalid UTF-8 byte would lose everything
after it. Cutting first means a bad event costs that event only, memory is bounded by the largest event
(``max_event_bytes``), and every item carries the byte offset to resume from, so a harvest can stop and
continue anywhere.

A cut that falls inside a CDATA section (a statement containing the text ``<event``) is detected (an open
``<![CDATA[`` without its ``]]>``) and the pieces are joined again before parsing.

Parsing is about a fifth of a harvest's time: for large files the SQL Server harvester does it in a second
process (:func:`harvesters.sqlserver.reading.read_readings_background`).
"""
from __future__ import annotations

import codecs
import re
import xml.etree.ElementTree as ET
from collections.abc import Generator, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any, BinaryIO

import attrs

from harvesters.core.outcome import Unreadable

#: Largest single event accepted; bigger ones are counted as unreadable and skipped.
DEFAULT_MAX_EVENT_BYTES = 64 * 1024 * 1024
#: Bytes read from the input at a time.
BLOCK_BYTES = 1024 * 1024

_EVENT_START = re.compile(rb"<event[\s>/]")
_EVENT_END = b"</event>"
#: How a real event starts (SQL Server writes name, package, timestamp, then its first field). A cut at an
#: ``<event`` that does not look like this fell inside a statement's text.
_REAL_EVENT_START = re.compile(
    rb'<event\s+name="[^"<>]*"\s+package="[^"<>]*"\s+timestamp="[^"<>]*"\s*>\s*<(?:data|action)\s')
_CDATA_OPEN, _CDATA_CLOSE = b"<![CDATA[", b"]]>"
#: What may follow the last ``</event>`` of a piece without being junk: closing tags of a wrapper document
#: (``</RingBufferTarget>``) and whitespace.
_HARMLESS_TAIL = re.compile(rb"(?:\s|</[A-Za-z_][\w.-]*\s*>)*")
_FRACTION = re.compile(r"(\.\d{6})\d+")
#: Byte-order marks of the UTF-16 exports some tools write (sqlcmd -u, PowerShell Out-File).
_UTF16_BOMS = ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


@attrs.define(slots=True)  # one per event: not frozen, whose __init__ costs several times more; never changed
class XEvent:
    """One Extended Events event: its name, time and the values of its fields and actions."""

    name: str
    timestamp: datetime
    data: Mapping[str, str]  # event fields (<data>): name -> <value> text
    texts: Mapping[str, str]  # map-typed fields: name -> <text> (e.g. result -> "OK" / "Error")
    actions: Mapping[str, str]  # actions (<action>): name -> <value> text


@attrs.define(slots=True)  # one per event: not frozen (see XEvent); never changed
class Item:
    """What the reader yields: an event or an unreadable piece, and the offset to resume after it.

    ``resume_offset`` is where a later read continues so that this item is not read again. For a truncated
    event at the very end of the input it stays at that event's start: the writer may still be appending it.
    """

    value: XEvent | Unreadable | Any  # or what a reader made of the event (harvesters.sqlserver.reading.Reading)
    resume_offset: int


def parse_time(text: str) -> datetime:
    """An XEvents timestamp (``2024-05-14T02:15:07.482Z``, up to 7 fraction digits) as an aware UTC datetime."""
    text = _FRACTION.sub(r"\1", text.strip().replace("Z", "+00:00"))
    instant = datetime.fromisoformat(text)
    return instant if instant.tzinfo else instant.replace(tzinfo=timezone.utc)


def parse_event(xml: bytes | str) -> XEvent:
    """Parse one ``<event>`` element. Raises ValueError (ParseError is one) when it is not a readable event."""
    root = ET.fromstring(xml)
    if root.tag != "event":
        raise ValueError(f"expected <event>, found <{root.tag}>")
    name, stamp = root.get("name"), root.get("timestamp")
    if not name or not stamp:
        raise ValueError("event without name or timestamp")
    data: dict[str, str] = {}
    texts: dict[str, str] = {}
    actions: dict[str, str] = {}
    for child in root:
        field = child.get("name")
        tag = child.tag
        target = data if tag == "data" else actions if tag == "action" else None
        if target is None or not field:
            continue
        if len(child) == 1 and child[0].tag == "value":  # most fields: one <value>
            target[field] = child[0].text or ""
            continue
        target[field] = ""
        for part in child:  # <value>, and <text> for map fields (<type> in ring buffer output)
            if part.tag == "value":
                target[field] = part.text or ""
            elif part.tag == "text":
                texts[field] = part.text or ""
    return XEvent(name=name, timestamp=parse_time(stamp), data=data, texts=texts, actions=actions)


class _Utf16Reader:
    """Presents a UTF-16 stream as UTF-8 bytes (offsets are then counted in the UTF-8 form)."""

    def __init__(self, raw: BinaryIO, encoding: str) -> None:
        self._raw = raw
        self._decoder = codecs.getincrementaldecoder(encoding)(errors="replace")

    def read(self, size: int) -> bytes:
        block = self._raw.read(size)
        return self._decoder.decode(block, final=not block).encode("utf-8")


def _open_cdata(piece: bytes) -> bool:
    """True when ``piece`` ends inside a CDATA section (the cut fell inside a statement's text)."""
    return piece.rfind(_CDATA_OPEN) > piece.rfind(_CDATA_CLOSE)


def _pieces(stream: BinaryIO, max_event_bytes: int) -> Iterator[tuple[int, bytes | None, bool]]:
    """Cut the stream at every ``<event`` tag: yields (start offset, bytes or None when oversized, at end).

    Memory holds one piece plus one block. Text before the first ``<event`` (an XML declaration, the
    ``<RingBufferTarget>`` start tag) is skipped.
    """
    tag_len = 7  # len(b"<event ") : bytes a tag may be split across two blocks
    buffer = b""
    base = 0  # stream offset of buffer[0]
    piece_at: int | None = None  # stream offset of the current piece's start
    oversized = False  # the current piece outgrew max_event_bytes: its bytes are being dropped
    scan = 0
    eof = False
    while True:
        match = _EVENT_START.search(buffer, scan)
        if match is not None:
            if piece_at is not None:
                yield piece_at, (None if oversized else buffer[piece_at - base:match.start()]), False
            piece_at, oversized, scan = base + match.start(), False, match.start() + 1
            continue
        if eof:
            if piece_at is not None:
                yield piece_at, (None if oversized else buffer[piece_at - base:]), True
            return
        keep_from = max(0, len(buffer) - tag_len)
        if piece_at is not None and not oversized:
            if len(buffer) - (piece_at - base) > max_event_bytes:
                oversized = True
            else:
                keep_from = piece_at - base
        buffer, base = buffer[keep_from:], base + keep_from
        scan = max(0, len(buffer) - tag_len)
        if piece_at is not None and not oversized:
            scan = max(scan, piece_at - base + 1)
        block = stream.read(BLOCK_BYTES)
        if block:
            buffer += block
        else:
            eof = True


def _event_body(piece: bytes) -> tuple[bytes | None, bool]:
    """Split a piece into the ``<event>...</event>`` part and whether anything but closing tags follows it."""
    end = piece.rfind(_EVENT_END)
    if end < 0:
        return None, False
    end += len(_EVENT_END)
    tail_ok = _HARMLESS_TAIL.fullmatch(piece, end) is not None
    return piece[:end], not tail_ok


def _try_parse(body: bytes) -> XEvent | None:
    try:
        return parse_event(body)
    except (ValueError, SyntaxError):  # ET.ParseError is a SyntaxError; bad timestamps raise ValueError
        return None


def read_events(stream: BinaryIO, start_offset: int = 0,
                max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> Generator[Item, None, None]:
    """Yield every event (and every unreadable piece) of ``stream`` from ``start_offset`` on.

    ``stream`` is a binary file positioned at ``start_offset`` (a seekable file is seeked there). UTF-8 is
    expected; a UTF-16 byte-order mark at offset 0 switches to transcoding (then ``start_offset`` counts
    UTF-8 bytes and is reached by reading, not seeking).
    """
    source: BinaryIO = stream
    skip = 0
    head = stream.read(2)
    encoding = next((enc for bom, enc in _UTF16_BOMS if head == bom), None)
    if encoding:
        source = _Utf16Reader(stream, encoding)  # type: ignore[assignment]
        skip = start_offset
    else:
        try:
            stream.seek(start_offset)
        except (OSError, AttributeError, ValueError):
            skip = start_offset - 2 if start_offset >= 2 else 0
            source = _Prefixed(head[start_offset:], stream)  # type: ignore[assignment]
    if skip:
        source = _Skipping(source, skip)  # type: ignore[assignment]
    base = start_offset
    pending: list[tuple[int, bytes]] = []  # pieces cut inside a CDATA section, waiting for the rest
    pending_bytes = 0
    for start, piece, at_end in _pieces(source, max_event_bytes):
        start += base
        real_start = piece is not None and _REAL_EVENT_START.match(piece) is not None
        if pending and (piece is None or real_start or pending_bytes + len(piece) > max_event_bytes):
            # the pending piece never closed its CDATA before the next real event: it was cut short
            yield from _flush_pending(pending, "truncated event")
            pending, pending_bytes = [], 0
        if piece is None:
            yield Item(Unreadable(f"event larger than {max_event_bytes} bytes", start), start)
            continue
        if _open_cdata(piece) and not at_end:
            pending.append((start, piece))
            pending_bytes += len(piece)
            continue
        first = pending[0][0] if pending else start
        whole = b"".join([p for _, p in pending] + [piece]) if pending else piece
        pending, pending_bytes = [], 0
        next_offset = start + len(piece)
        body, junk = _event_body(whole)
        event = _try_parse(body) if body is not None else None
        if event is not None and body is not None and junk and at_end and _tag_begun(whole, len(body)):
            # the input ends with the first bytes of the next event's tag (`<`..`<event`): the writer is still
            # appending it; resume right after this event, or the next read would start inside that tag
            yield Item(event, first + len(body))
        elif event is not None:
            yield Item(event, next_offset)
            if junk:
                yield Item(Unreadable("text between events", first), next_offset)
        elif at_end and body is None:
            # the writer may still be appending this event: report it, but resume before it
            yield Item(Unreadable("truncated event at end of input", first), first)
        else:
            yield Item(Unreadable(_malformed(body) if body is not None else "truncated event", first), next_offset)


def _malformed(body: bytes) -> str:
    """Why an event that does not parse is unreadable: its bytes are no UTF-8 (an export in a Windows code page:
    `sqlcmd -f 65001` writes UTF-8), or it is malformed."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return "invalid UTF-8"
    return "malformed event"


def _tag_begun(piece: bytes, end: int) -> bool:
    """Whether what follows ``piece[:end]`` (an event) is whitespace then the start of an ``<event`` tag cut short."""
    tail = piece[end:].lstrip()
    return 0 < len(tail) < len(b"<event ") and b"<event "[:len(tail)] == tail


def _flush_pending(pending: list[tuple[int, bytes]], reason: str) -> Iterator[Item]:
    if pending:
        start, piece = pending[-1]
        yield Item(Unreadable(reason, pending[0][0]), start + len(piece))


class _Prefixed:
    """A non-seekable stream with bytes already read put back in front."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head, self._rest = head, rest

    def read(self, size: int) -> bytes:
        if self._head:
            head, self._head = self._head[:size], self._head[size:]
            return head
        return self._rest.read(size)


class _Skipping:
    """Discards the first ``skip`` bytes of a stream that cannot seek."""

    def __init__(self, source: BinaryIO, skip: int) -> None:
        self._source, self._skip = source, skip

    def read(self, size: int) -> bytes:
        while self._skip:
            dropped = self._source.read(min(self._skip, BLOCK_BYTES))
            if not dropped:
                self._skip = 0
                break
            self._skip -= len(dropped)
        return self._source.read(size)


def looks_binary(head: bytes) -> bool:
    """True when the first bytes of an input are not text: a NUL byte outside a UTF-16 export (one with its
    byte-order mark). SQL Server's own ``.xel`` files are such binary files; the harvester reads their XML
    export, so it says so instead of reading "0 events"."""
    if any(head.startswith(bom) for bom, _ in _UTF16_BOMS):
        return False
    return b"\x00" in head


def read_file(path: str, start_offset: int = 0,
              max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> Generator[Item, None, None]:
    """:func:`read_events` over a file path."""
    with open(path, "rb") as stream:
        yield from read_events(stream, start_offset, max_event_bytes)


def file_head(path: str, size: int = 4096) -> bytes:
    """The first bytes of a file: saved with a position to notice a file replaced by another."""
    with open(path, "rb") as stream:
        return stream.read(size)
