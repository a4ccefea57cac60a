"""The environment a rule's job runs in: its log file and its threads."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path


@contextlib.contextmanager
def logging_to(log_file):
    """Log records, warnings, tqdm and everything else written to stderr go to the rule's
    ``log:`` file (``None``: left as they are)."""
    if log_file is None:
        yield
        return
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "w") as stream:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        logging.captureWarnings(True)
        # tqdm and library warnings write to stderr: send them to the rule's log as well.
        old_stderr = sys.stderr
        sys.stderr = stream
        try:
            yield
        finally:
            sys.stderr = old_stderr
            root.removeHandler(handler)


@contextlib.contextmanager
def thread_limit(threads: int):
    """Limit BLAS/OpenMP threads to the rule's ``threads`` so parallel jobs do not oversubscribe.

    torch reads OMP_NUM_THREADS when it is imported (inside the rule's ``main``); it is only
    imported here if a script did so already, so that rules without torch do not pay for it.
    """
    from threadpoolctl import threadpool_limits

    os.environ["OMP_NUM_THREADS"] = str(threads)
    with threadpool_limits(limits=threads):
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads)
        yield
