"""`kafka-health peek`: a metrics topic sampled and decoded as the job would."""

from __future__ import annotations

import argparse

from streaming.cli.options import CommandFailed, kafka_client, usage_error


def cmd_peek(args: argparse.Namespace) -> int:
    from streaming.config import FORMATS, load_config
    from streaming.decode.records import DecodeContext
    from streaming.peek import PeekError, format_peek, peek, peek_json, sample_records

    if args.format not in FORMATS:
        usage_error(args, f"--format {args.format!r} is not a format the job decodes; "
                    f"choose one of: {', '.join(FORMATS)}")
    config = load_config(args.config)
    client = kafka_client(args, config)
    try:
        records = sample_records(client, args.topic, args.n, args.from_beginning,
                                 args.timeout)
    except PeekError as err:
        raise CommandFailed(f"{err}; check --bootstrap-server and --topic (and "
                            "--command-config, or source.kafka / source.secrets in --config, "
                            "for a secured cluster)") from None
    # auto: the config's format for the topic, as the job reads it (auto when not listed)
    fmt = None if args.format == "auto" else args.format
    result = peek(records, DecodeContext.from_config(config), args.topic, fmt)
    print(peek_json(result) if args.output == "json"
          else format_peek(result, config.identity.default_cluster))
    return 0
