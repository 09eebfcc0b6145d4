"""``python -m helmr.runner``: the runner pod's command."""

from helmr.runner.entrypoint import main

raise SystemExit(main())
