"""Whether a job's input files are whole: what a full disk or a killed writer leaves behind.

:func:`check_intact` reads what can be checked without knowing a file's meaning: every member
of an ``.npz`` against its CRC, an ``.npy``'s header against its size, a ``.json`` file's
syntax. The rule scripts check every input so before hashing it for its provenance record
(``scripts/_job.py: run``), so that a truncated file is named, with what to do, instead of
failing the job later in a library call that names no file.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

__all__ = ["check_intact"]


def check_intact(paths) -> None:
    """Raise ``ValueError`` naming the file if a ``.npz``, ``.npy`` or ``.json`` input is
    truncated or corrupt (say, by a full disk or a job killed while another wrote it); other
    files and folders pass."""
    import numpy as np

    for path in map(Path, paths):
        if not path.is_file() or path.suffix not in (".npz", ".npy", ".json"):
            continue
        try:
            if path.suffix == ".npz":
                with zipfile.ZipFile(path) as archive:
                    broken = archive.testzip()  # reads every member, checks its CRC
                if broken is not None:
                    raise ValueError(f"member {broken} fails its CRC check")
            elif path.suffix == ".npy":
                np.load(path, mmap_mode="r", allow_pickle=False)  # header and size
            else:
                json.loads(path.read_text())
        except Exception as err:
            raise ValueError(
                f"input {path} is truncated or corrupt ({type(err).__name__}: {err}). Delete "
                "it so that Snakemake makes it again, or rerun with --forcerun on the rule "
                "that writes it."
            ) from err
