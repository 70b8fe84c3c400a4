"""iac-code: the A2A 1.0 server kernel of the iac-code Infrastructure-as-Code assistant."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("iac-code")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

__all__ = ["__version__"]
