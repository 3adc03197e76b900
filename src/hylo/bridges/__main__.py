"""`python -m hylo.bridges vlaeval ...`: the same as `hylo bridge vlaeval ...`."""

import sys

from hylo.cli.bridge import OneLineParser, add_parser, run

parser = OneLineParser(prog="hylo")
add_parser(parser.add_subparsers(dest="command", required=True))
sys.exit(run(parser.parse_args(["bridge", *sys.argv[1:]])))
