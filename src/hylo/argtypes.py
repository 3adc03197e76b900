"""argparse value types shared by the `hylo` commands: each refuses a bad value with `expected ..., got '<text>'`."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def int_in(minimum: int, maximum: int | None, expected: str) -> Callable[[str], int]:
    """An argparse type: an integer in [`minimum`, `maximum`] (no upper bound when None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


positive_int = int_in(1, None, "a positive integer")
non_negative_int = int_in(0, None, "an integer >= 0")
port = int_in(0, 65535, "a port number (0-65535)")
