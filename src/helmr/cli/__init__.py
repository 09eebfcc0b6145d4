"""The ``helmr`` command line (click), over ``helmr.client``: HTTP only."""

from helmr.cli.main import main

__all__ = ["main"]
