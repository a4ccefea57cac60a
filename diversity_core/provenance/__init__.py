"""Chain of custody: provenance records with digests, their audit, and an RO-Crate export.

* :mod:`.digests`: SHA-256 of files and folders, the pinned digests of assets (``.pins.json``);
* :mod:`.records`: the record written beside every output of every rule (by
  ``scripts/_job.py: run``);
* :mod:`.intact`: whether a job's ``.npz``, ``.npy`` and ``.json`` inputs are whole, checked
  before they are hashed;
* :mod:`.audit`: ``python -m diversity_core audit``: every file against its record, every input
  against the digest its consumer recorded, each final result's chain back to the assets;
* :mod:`.audit_report`: what the audit found (a status per file, the chains), as text or JSON;
* :mod:`.crate`: the records as a Workflow Run RO-Crate (``audit --ro-crate DIR``);
* :mod:`.paths`: names the pipeline writes, links that leave a root, and reads that cannot be
  redirected out of it (the audit's and the crate's).

``docs/auditing.md`` walks through a real example.
"""

from .audit import audit
from .audit_report import STATUSES, AuditReport
from .digests import Hasher, file_sha256, read_manifest, tree_sha256
from .records import FORMAT, Roots, write_records

__all__ = ["FORMAT", "STATUSES", "AuditReport", "Hasher", "Roots", "audit", "file_sha256",
           "read_manifest", "tree_sha256", "write_records"]
