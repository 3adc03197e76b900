"""argparse value types shared by the `hylo` commands: each refuses a bad value with `expected ..., got '<text>'`."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from typing import Any


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


def float_in(minimum: float, maximum: float, expected: str) -> Callable[[str], float]:
    """An argparse type: a finite number in [`minimum`, `maximum`] (`math.inf`: no upper bound)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not (math.isfinite(value) and minimum <= value <= maximum):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


positive_int = int_in(1, None, "a positive integer")
non_negative_int = int_in(0, None, "an integer >= 0")
port = int_in(0, 65535, "a port number (0-65535)")


def parse_json_pairs(pairs: Sequence[str], flag: str) -> dict[str, Any]:
    """`["k=v", ...]` (the values of a repeatable `flag` such as `-A` or `-E`) → `{k: v}`, each value a JSON literal
    when it parses as one, else the string. Raises `ValueError` naming the flag and the bad pair."""
    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ValueError(f"bad {flag} value {pair!r}: expected key=value with a Python identifier as key")
        try:
            parsed[key] = json.loads(text)
        except ValueError:
            parsed[key] = text
    return parsed
