"""hylo: truthful, fast, reproducible evaluation of embodied agents in simulation."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hylo")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
