"""``python -m diversity_core score ...``: see :mod:`diversity_core.cli`."""

from .cli.main import main

raise SystemExit(main())
