"""`python -m streaming.cli`: the same as the `kafka-health` command."""

import sys

from streaming.cli import main

sys.exit(main())
