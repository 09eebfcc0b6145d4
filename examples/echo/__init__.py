"""The echo example: ``echo.echo:echo`` with ``examples/`` on ``PYTHONPATH``."""
