"""The workbench example: a tool-using agent working in its Computer (``/computer``).

``workbench.agent:workbench`` with ``examples/`` on ``PYTHONPATH`` (the runner
image has it under ``/app``). See examples/workbench/README.md.
"""
