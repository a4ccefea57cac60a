"""Fetch CIFAR-10 (python version) from its official site, MD5-verified, and unpack it.

The paper's data set; it needs a network (the default configuration uses Fashion-MNIST).
"""

import shutil
import tempfile
from pathlib import Path

from _helpers import Output, log, run

from diversity_core.data.fetch import download
from diversity_core.data.images import extract_cifar10

# Named in every download error: what it is, who asked for it, what needs no network.
DOWNLOAD = {
    "asset": "CIFAR-10 (python version, cifar-10-python.tar.gz)",
    "config_key": "images.dataset: cifar10 (images.cifar10.url, images.cifar10.md5)",
    "offline_default": "images.dataset: fashion_mnist (the Debian package dataset-fashion-mnist)",
}


def main(folder: Output, url: str, md5: str):
    """Download the archive (MD5-checked, no partial file on failure); unpack it to ``folder``."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    archive = folder.parent / "cifar-10-python.tar.gz"
    if not archive.exists():
        download(url, archive, checksum=md5, algorithm="md5", **DOWNLOAD)
        log.info("downloaded %s (md5 verified)", archive)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        unpacked = extract_cifar10(archive, tmp)
        shutil.move(str(unpacked), str(folder))


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
