"""``python -m prove.tlc [--quick] [--only TEXT] [--results-dir DIR]`` (see prove/tlc/cli.py)."""

import sys

from prove.tlc.cli import main

sys.exit(main(sys.argv[1:]))
