"""Fetch Fashion-MNIST from Debian's ``dataset-fashion-mnist`` package, checksum-verified.

``apt-get download`` and ``dpkg -x`` need no root. The four idx ``.gz`` files land in ``folder``.
Fashion-MNIST is the offline substitute for the paper's CIFAR-10 (none can be had here).
"""

import os
import tempfile
from pathlib import Path

from _helpers import Output, log, run

from diversity_core.data.fetch import apt_download, extract_deb, verify_checksum

DEB_DATA_DIR = Path("usr/share/datasets/fashion-mnist")


def main(folder: Output, package: str, version: str, deb_sha256: str, file_sha256: dict):
    """Download the .deb, unpack it and copy the idx files into ``folder``."""
    file_sha256 = file_sha256 or {}
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        deb = apt_download(
            package, version or None, tmp, sha256=deb_sha256,
            asset=f"Fashion-MNIST (Debian package {package})",
            config_key="images.dataset: fashion_mnist (images.fashion_mnist.package, .version, "
                       ".deb_sha256)",
            offline_default=f"copy the four idx .gz files into {folder} by hand")
        log.info("downloaded %s (sha256 verified)", deb.name)
        unpacked = extract_deb(deb, Path(tmp) / "root") / DEB_DATA_DIR
        staging = Path(tmp) / "out"
        staging.mkdir()
        for name, digest in sorted(file_sha256.items()):
            verify_checksum(unpacked / name, digest, "sha256")
            os.replace(unpacked / name, staging / name)
            log.info("%s: sha256 verified", name)
        os.replace(staging, folder)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
