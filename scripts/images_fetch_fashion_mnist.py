"""Fetch Fashion-MNIST from Debian's ``dataset-fashion-mnist`` package, checksum-verified.

``apt-get download`` and ``dpkg-deb`` need no root. The four idx ``.gz`` files land in ``folder``
with its ``.pins.json`` (diversity_core.data.images.fetch_fashion_mnist). Fashion-MNIST is the
offline substitute for the paper's CIFAR-10 (none can be had here).
"""

from _contract import Output
from _job import log, run

from diversity_core.data.images import fetch_fashion_mnist


def main(folder: Output, package: str, version: str, deb_sha256: str, file_sha256: dict):
    """Download the .deb, unpack it and copy the idx files into ``folder``."""
    fetch_fashion_mnist(folder, package=package, version=version, deb_sha256=deb_sha256,
                        file_sha256=file_sha256 or {})
    log.info("Fashion-MNIST verified in %s", folder)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
