"""The operator's own code: the import paths a command line names (`--agent mypkg.policies:MyPolicy`), found in the
current directory as under `python -m`."""

from __future__ import annotations

import os
import sys

IMPORT_DIR_ENV = "HYLO_IMPORT_DIR"
"""The directory `hylo serve --allow-import` was started in, which its jobs import from as from their own."""


def import_from_cwd() -> None:
    """Put the current directory on the import path (after the installed packages, so a stray file there never
    shadows a module hylo imports), and the directory of the `hylo serve --allow-import` that started this job.
    Process workers inherit the path; Ray's workers get the driver's directory."""
    for directory in (os.getcwd(), os.environ.get(IMPORT_DIR_ENV)):
        if directory and directory not in sys.path:
            sys.path.append(directory)
