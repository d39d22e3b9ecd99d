"""`kafka-health check-config`: a config file checked as the job would load it."""

from __future__ import annotations

import argparse
import json


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate the config and, unless --skip-secrets, read every secret it references (a
    missing one is exit 2 naming its key); one line when it passes, or with --print the
    config masked by the redaction rule (streaming/redact.py)."""
    import os

    from streaming import paging
    from streaming.cli.options import require_config_file
    from streaming.config import load_config, redacted
    from streaming.config.loading import config_file

    require_config_file(args, os.environ)
    config = load_config(args.config)
    if not args.skip_secrets:
        config.check_secrets()
    paging.check(config.alert_push)
    if args.print:
        print(json.dumps(redacted(config), indent=2, default=str))
    else:
        secrets = ("not read (--skip-secrets)" if args.skip_secrets
                   else f"{len(config.secret_refs())} read")
        named = args.config or config_file(None, os.environ)[1]
        print(f"OK {named}: valid; secrets {secrets}")
    return 0
