"""`python -m hylo.bridges vlaeval ...`: the same as `hylo bridge vlaeval ...`."""

import argparse
import sys

from hylo.bridges.command import add_parser, run

parser = argparse.ArgumentParser(prog="hylo")
add_parser(parser.add_subparsers(dest="command", required=True))
sys.exit(run(parser.parse_args(["bridge", *sys.argv[1:]])))
