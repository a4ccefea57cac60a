"""Fetch CIFAR-10 (python version) from its official site, verified, and unpack it.

The paper's data set; it needs a network (the default configuration uses Fashion-MNIST). An
archive placed by hand at ``<folder>/../cifar-10-python.tar.gz`` is verified against the same
pins before anything is extracted (diversity_core.data.images.fetch_cifar10).
"""

from _contract import Output
from _job import log, run

from diversity_core.data.images import fetch_cifar10


def main(folder: Output, url: str, md5: str | None, sha256: str | None):
    """Download the archive (or take the one placed by hand), verify it against SHA256 and MD5,
    and unpack it to ``folder``."""
    fetch_cifar10(folder, url=url, md5=md5, sha256=sha256)
    log.info("CIFAR-10 verified and unpacked in %s", folder)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
