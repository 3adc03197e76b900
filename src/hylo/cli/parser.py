"""`hylo`'s parser on its own: `build_parser()` adds every command of the command table (`hylo.cli.COMMANDS`) and
runs none. Each command's arguments are its module's `add_parser`; those commands share are in
`hylo.cli.arguments`."""

from __future__ import annotations

from hylo.cli import build_parser

__all__ = ["build_parser"]
