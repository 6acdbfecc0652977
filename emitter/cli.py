"""``lineage-capture replay`` re-sends spooled events; ``lineage-capture config`` shows the resolved
configuration (secrets masked)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emitter.config import EmitterConfig

REPLAY_EXIT_CODES = ("exit codes: 0 the spool is empty; 1 events remain spooled (the backend is still failing, or "
                     "a refused event cannot be set aside: dead letters full), or torn or corrupt records were "
                     "skipped, or events were lost (counted); "
                     "2 usage or configuration error, or a spool recorded for another destination than the "
                     "configured one (without --to-configured); 3 the spool is empty but dead letters remain "
                     "(events the backend refused for good: --dead-letters list|retry|discard)")
REPLAY_DESCRIPTION = ("Re-send events spooled after failed deliveries, oldest first, to the destination each spool "
                      "recorded (the configured transport when it is the same destination, so its credentials "
                      "are used). A spool recorded for another destination than an explicitly configured one is "
                      "not replayed unless --to-configured says to send it there.")
CONFIG_EXIT_CODES = "exit codes: 0 printed; 2 usage or configuration error"


def _parser(prog: str, description: str, epilog: str, replay: bool = False) -> argparse.ArgumentParser:
    from lineage_capture.version import add_version_option

    parser = argparse.ArgumentParser(prog=prog, description=description, epilog=epilog)
    add_version_option(parser)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="configuration override in openlineage-spark form, e.g. transport.type=http "
                             "(repeatable; wins over openlineage.yml and OPENLINEAGE__* variables)")
    if replay:
        parser.add_argument("--to-configured", action="store_true",
                            help="send spooled events to the configured destination even when their spool "
                                 "recorded another one")
        parser.add_argument("--dead-letters", choices=("list", "retry", "discard"),
                            help="instead of replaying: list the events the backend refused for good (with its "
                                 "answer), send them again (those refused again stay), or discard them")
    return parser


def _config(prog: str, description: str, epilog: str, argv: list[str] | None,
            replay: bool = False) -> tuple[EmitterConfig, argparse.Namespace]:
    from emitter.config import load_config, parse_overrides
    from emitter.log import configure_cli_logging

    configure_cli_logging()
    args = _parser(prog, description, epilog, replay).parse_args(argv)
    return load_config(parse_overrides(args.conf)), args


def config_main(argv: list[str] | None = None, prog: str = "lineage-capture config") -> int:
    """Print the resolved configuration with secrets masked; exit 2 on a bad one."""
    from emitter.redact import redact_obj, url_without_credentials

    try:
        config, _ = _config(prog, "Print the resolved OpenLineage configuration, secrets masked.",
                            CONFIG_EXIT_CODES, argv)
    except ValueError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    try:
        _check_transport(config)
    except ValueError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    transport = dict(config.transport or {})
    if isinstance(transport.get("url"), str):
        transport["url"] = url_without_credentials(transport["url"])
    print(json.dumps(redact_obj({"transport": transport,
                                 "source": config.source,
                                 "spool": str(config.spool_dir),
                                 "disabled": config.disabled}), indent=2))
    return 0


def _check_transport(config: EmitterConfig) -> None:
    """Build the configured transport as a producer would (unknown keys warned about, a configuration it cannot be
    built from raised as ValueError), and close it. A kafka transport is not built (its producer would start
    connecting): its settings are checked when a producer starts."""
    from emitter.config import composite_members
    from emitter.transport import create_transport

    if config.disabled or not config.transport:
        return
    members = [member for _name, member in composite_members(config.transport)]
    if any(str(t.get("type")).lower() == "kafka" for t in [config.transport, *members]):
        return
    create_transport(config.transport, announce_file=False).close()


def replay_main(argv: list[str] | None = None, prog: str = "lineage-capture replay") -> int:
    """Re-send every spool under ``spool.dir`` to its recorded destination, or handle the dead letters; the exit
    code is in :data:`REPLAY_EXIT_CODES`."""
    from emitter.fan_out import fan_out_members, split_composite_spool
    from emitter.spool import SpoolError, spools_under

    try:
        config, args = _config(prog, REPLAY_DESCRIPTION, REPLAY_EXIT_CODES, argv, replay=True)
    except ValueError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    if fan_out_members(config.transport) and args.dead_letters is None:
        try:  # (its members replay them, each to its own destination: see emitter.fan_out)
            split_composite_spool(config.spool_dir, config.spool_max_bytes, config.transport or {},
                                  fan_out_members(config.transport) or [])
        except SpoolError as error:
            print(f"{prog}: {error}", file=sys.stderr)
            return 1
    spools = spools_under(config.spool_dir, config.spool_max_bytes)
    if not spools:
        print(f"nothing spooled in {config.spool_dir}")
        return 0
    code = 0
    for spool in spools:
        if args.dead_letters == "list":  # (local: needs no destination, nor its credentials)
            _list_dead_letters(spool)
            continue
        try:
            transport_config = _target(config, spool, args.to_configured)
        except ValueError as error:
            print(f"{prog}: {error}", file=sys.stderr)
            code = 2
            continue
        if args.dead_letters == "discard":
            count = len(spool.dead_letters())
            spool.keep_dead_letters([], replacing=count)  # (not those set aside since it counted)
            print(f"discarded {count} dead letters of {spool.directory}")
            continue
        try:
            code = max(code, _send(prog, spool, transport_config, args.dead_letters == "retry"))
        except ValueError as error:
            print(f"{prog}: {error}", file=sys.stderr)
            code = 2
    return 2 if code == 2 else code


def _where(destination: dict[str, Any] | None) -> str:
    if not destination:
        return "an unrecorded destination"
    detail = destination.get("url") or destination.get("location") or destination.get("topic") or ""
    return f"{destination.get('type')} {detail}".strip()


def _target(config: EmitterConfig, spool: Any, to_configured: bool) -> dict[str, Any]:
    """The transport configuration a spool's events go to: the configured one when it is the recorded
    destination (its credentials are then used), when the spool recorded none (an older version's), or when
    ``--to-configured`` says so; the recorded destination when nothing was configured explicitly. Raises
    ValueError for a recorded destination that differs from an explicitly configured one."""
    from emitter.fan_out import fan_out_members
    from emitter.redact import MASK
    from emitter.spool import CREDENTIALS, describe_destination, same_destination

    configured = dict(config.transport or {})
    recorded = spool.destination
    if spool.destination_unreadable and not to_configured:
        raise ValueError(f"the spool {spool.directory} does not say where its events were going (its "
                         "destination.json is damaged): not replayed; pass --to-configured to send them to the "
                         f"configured transport ({_where(describe_destination(configured))})")
    member = next((m for m in fan_out_members(configured) or () if same_destination(recorded, describe_destination(m))),
                  None)
    if member is not None:  # a member of the configured composite (each spools for itself)
        return member
    if recorded is None or same_destination(recorded, describe_destination(configured)) or to_configured:
        return configured
    if config.source == "embedded default":
        if recorded.get("type") == "http" and (MASK in f"{recorded.get('url')}{recorded.get('endpoint')}"
                                               or recorded.get(CREDENTIALS)):
            raise ValueError(f"the spool {spool.directory} holds events for {_where(recorded)}, whose credentials "
                             "are never recorded: configure that transport with them and replay again (sent "
                             "masked, every event would be refused)")
        if recorded.get("type") == "http":
            return {"type": "http", "url": recorded["url"], "endpoint": recorded.get("endpoint", "api/v1/lineage")}
        if recorded.get("type") == "file":
            return {"type": "file", "log_file_path": recorded["location"], "append": True}
        raise ValueError(f"the spool {spool.directory} holds events for {_where(recorded)}, which cannot be "
                         "rebuilt without its configuration: configure that transport and replay again")
    raise ValueError(f"the spool {spool.directory} holds events for {_where(recorded)}, but the configuration "
                     f"({config.source}) sends to {_where(describe_destination(configured))}: not replayed; "
                     "configure the recorded destination, or pass --to-configured to send them there")


def _list_dead_letters(spool: Any) -> None:
    letters = spool.dead_letters()
    print(f"{len(letters)} dead letters in {spool.dead_letters_path} (for {_where(spool.destination)})")
    for index, letter in enumerate(letters, start=1):
        event = letter["event"]
        job = event.get("job") or {}
        print(f"{index}. {letter.get('at')} HTTP {letter.get('status')}: {event.get('eventType')} "
              f"{job.get('namespace')}/{job.get('name')} run {(event.get('run') or {}).get('runId')}: "
              f"{letter.get('answer')}")


def _send(prog: str, spool: Any, transport_config: dict[str, Any], dead_letters: bool) -> int:
    """Replay one spool (or re-send its dead letters) through the transport; its exit code."""
    from emitter.delivery import Delivery, rejection
    from emitter.spool import describe_destination
    from emitter.transport import create_transport, parallel_plan

    # as the emitter sends (http: requests in flight; async_http as http, see parallel_plan)
    plan, width = parallel_plan(transport_config)
    transport = create_transport(plan)

    def make() -> Any:
        return create_transport(plan, announce=False)

    try:
        if dead_letters:
            return _retry_dead_letters(spool, transport, rejection)
        delivery = Delivery(transport, spool, retry_after=0, width=width, make_transport=make if width > 1 else None,
                            keep_refused=True)
        delivery.replay()
        delivery.close()
    finally:
        transport.close()
    pending, dead = spool.pending_bytes(), len(spool.dead_letters())
    counts = delivery.counts
    sent_to = _where(describe_destination(transport_config))  # (--to-configured: not the recorded one)
    print(f"replayed {counts.replayed} events to {sent_to}; {pending} bytes still "
          f"spooled in {spool.events_path}"
          + (f" ({delivery.failure or delivery.spool_error or 'backend unreachable'})" if pending else "")
          + (f"; {spool.corrupt} torn or corrupt records skipped" if spool.corrupt else "")
          + (f"; {counts.dropped} events LOST (neither delivered nor kept)" if counts.dropped else "")
          + (f"; {dead} dead letters (refused by the backend): `{prog} --dead-letters list`" if dead
             else ""))
    if delivery.spool_error:
        print(f"{prog}: {delivery.spool_error}", file=sys.stderr)
    return 1 if pending or spool.corrupt or counts.dropped else 3 if dead else 0


def _retry_dead_letters(spool: Any, transport: Any, rejection: Any) -> int:
    from emitter.redact import redact

    letters = spool.dead_letters()
    kept, sent, stopped = [], 0, False
    for letter in letters:
        if stopped:
            kept.append(letter)
            continue
        try:
            transport.emit(letter["event"])
        except Exception as error:  # noqa: BLE001 - an outcome, reported below
            refused = rejection(error)
            if refused is None:
                stopped = True  # the backend is failing: keep the rest for later, in order
            else:
                letter = {**letter, "status": refused[0], "answer": redact(refused[1][:2000])}
            kept.append(letter)
        else:
            sent += 1
    spool.keep_dead_letters(kept, replacing=len(letters))  # (a harvest may have set more aside meanwhile)
    remaining = len(spool.dead_letters())
    print(f"re-sent {sent} of {len(letters)} dead letters of {spool.directory}; {remaining} remain"
          + (" (the backend failed: stopped)" if stopped else ""))
    return 3 if remaining else 0
