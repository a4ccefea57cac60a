"""One task's response sets, generated and cached on disk per prompt.

:func:`generate_task` samples the grid design (every prompt at every temperature, one batch per
prompt), :func:`generate_plan` the decTest design (each set its own prompt and temperature,
several prompts per batch); both read and write the same per-prompt cache.

:func:`generate_task` samples (:mod:`.sampling`) only the sets a prompt's cache file lacks, so an
interrupted or enlarged run never regenerates what exists. A file's name
(:func:`prompt_cache_file`) is a hash of everything that changes its sets: the prompt, its chat,
the sampler's version and :func:`cache_settings` (the model's fingerprint and chat template, the
device kind, the number of responses, their length, the seed).

>>> records, stats = generate_task("resp", prompts, [0.2, 1.0], model_folder=folder,
...                                n_responses=10, max_new_tokens=32, seed=1,
...                                cache_dir="interim/generation_cache")
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

from ..assets.cache import read_cache, update_cache
from ..data.text_tasks import TASKS
from ..device import Device, parse_device
from .model import chat_template_digest, load_language_model, model_fingerprint
from .sampling import SAMPLER_VERSION, chat_messages, generate_response_sets, generate_sets_batch

log = logging.getLogger(__name__)

__all__ = [
    "generate_task",
    "generate_plan",
    "cache_settings",
    "prompt_cache_file",
]


def cache_settings(*, model_folder=None, model=None, device: Device | str = "auto",
                   n_responses: int,
                   max_new_tokens: int, seed: int) -> dict:
    """What every prompt's generation cache is keyed by besides the prompt and its chat
    (:func:`prompt_cache_file`): ``n_responses``, ``max_new_tokens``, ``seed``, the kind of
    device the random streams are drawn on ("cpu" or "cuda": their generators differ; a given
    ``model``'s own, else ``device`` resolved), and for a model loaded from ``model_folder`` its
    fingerprint (the GGUF file's SHA-256) and the digest of its chat template; a model passed in
    is "given-model" (the caller vouches for it)."""
    if model is not None:
        device_kind = model.device.type
    else:
        device_kind = parse_device(device).kind
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
                      "chat": chat_messages(task, prompt["text"]), "sampler": SAMPLER_VERSION,
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
                  max_new_tokens: int, seed: int, cache_dir, device: Device | str = "auto",
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

    _check_task(task, n_responses)
    temperatures = [float(t) for t in temperatures]
    if len(set(map(_temperature_key, temperatures))) != len(temperatures):
        raise ValueError(f"temperatures repeat: {temperatures}.")
    device = parse_device(device)  # this edge's one parse: cache key and model share it
    settings = cache_settings(model_folder=model_folder, model=model, device=device,
                              n_responses=n_responses, max_new_tokens=max_new_tokens, seed=seed)
    cache_dir = Path(cache_dir)
    stats = _GenerationStats()
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
            with stats.timed(prompts=1, sets=len(missing)) as counted:
                sets, counted.tokens = generate_response_sets(
                    model, tokenizer, chat, missing,
                    n_responses=n_responses, max_new_tokens=max_new_tokens, seed=seed,
                    prompt_id=prompt["prompt_id"])
            cached.update({_temperature_key(t): responses for t, responses in sets.items()})
            cached = _update_prompt_cache(path, task, prompt, settings, n_responses, cached)
        for t in temperatures:
            records.append({"task": task, "prompt_id": prompt["prompt_id"],
                            "prompt": prompt["text"], "temperature": t,
                            "responses": cached[_temperature_key(t)], "seed": int(seed)})
    return records, stats.as_dict()


def generate_plan(task: str, plan: Sequence[Mapping], *, batch_sets: int, model=None,
                  tokenizer=None, model_folder=None, n_responses: int, max_new_tokens: int,
                  seed: int, cache_dir, device: Device | str = "auto",
                  progress: bool = True) -> tuple[list[dict], dict]:
    """Response sets of the decTest design: one set per entry of ``plan`` (``prompt_id``,
    ``text``, ``temperature``), each prompt at its own temperature.

    Sets are looked up in the same per-prompt cache as :func:`generate_task` (a set is keyed by
    its prompt, its temperature and the settings, whatever its batch); the missing ones are
    sampled ``batch_sets`` prompts at a time in one left-padded batch
    (:func:`~.sampling.generate_sets_batch`), and each batch's sets are written to their
    prompts' cache files before the next batch starts. Returns ``records`` (in plan order, the
    keys of :func:`generate_task`'s) and ``stats`` as :func:`generate_task` does.
    """
    from tqdm.auto import tqdm

    _check_task(task, n_responses)
    if batch_sets < 1:
        raise ValueError(f"batch_sets must be >= 1; got {batch_sets}.")
    ids = [entry["prompt_id"] for entry in plan]
    if len(set(ids)) != len(ids):
        raise ValueError(f"task {task!r}: a prompt appears twice in the plan; the decTest "
                         "design gives every set its own prompt.")
    device = parse_device(device)  # this edge's one parse: cache key and model share it
    settings = cache_settings(model_folder=model_folder, model=model, device=device,
                              n_responses=n_responses, max_new_tokens=max_new_tokens, seed=seed)
    cache_dir = Path(cache_dir)
    stats = _GenerationStats()
    prompts = [{"prompt_id": entry["prompt_id"], "text": entry["text"]} for entry in plan]
    keys = [_temperature_key(entry["temperature"]) for entry in plan]
    paths = [prompt_cache_file(cache_dir, task, prompt, settings) for prompt in prompts]
    found = [_read_prompt_cache(path, prompt, settings, n_responses).get(key)
             for path, prompt, key in zip(paths, prompts, keys, strict=True)]
    missing = [i for i, responses in enumerate(found) if responses is None]
    batches = [missing[start:start + batch_sets] for start in range(0, len(missing), batch_sets)]
    bar = tqdm(batches, desc=f"generate {task}", unit="batch", file=sys.stderr,
               disable=not progress, mininterval=10.0)
    for batch in bar:
        if model is None:
            model, tokenizer = load_language_model(model_folder, device)
        with stats.timed(prompts=len(batch), sets=len(batch)) as counted:
            sets, counted.tokens = generate_sets_batch(
                model, tokenizer, [chat_messages(task, prompts[i]["text"]) for i in batch],
                [float(plan[i]["temperature"]) for i in batch], [ids[i] for i in batch],
                n_responses=n_responses, max_new_tokens=max_new_tokens, seed=seed)
        for i, responses in zip(batch, sets, strict=True):
            _update_prompt_cache(paths[i], task, prompts[i], settings, n_responses,
                                 {keys[i]: responses})
            found[i] = responses
    records = [{"task": task, "prompt_id": entry["prompt_id"], "prompt": entry["text"],
                "temperature": float(entry["temperature"]), "responses": responses,
                "seed": int(seed)} for entry, responses in zip(plan, found, strict=True)]
    return records, stats.as_dict()


def _check_task(task: str, n_responses: int) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {TASKS}.")
    if n_responses < 2:
        raise ValueError(f"n_responses must be >= 2; got {n_responses}.")


class _GenerationStats:
    """What a generation call sampled now: prompts, sets, tokens, CPU and wall seconds."""

    def __init__(self):
        self.numbers = {"prompts_generated": 0, "sets_generated": 0, "tokens": 0,
                        "cpu_seconds": 0.0, "wall_seconds": 0.0}

    @contextmanager
    def timed(self, *, prompts: int, sets: int):
        """Count one sampling call; the caller sets ``.tokens`` on what it yields."""
        counted = SimpleNamespace(tokens=0)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        yield counted
        self.numbers["cpu_seconds"] += time.process_time() - cpu0
        self.numbers["wall_seconds"] += time.perf_counter() - wall0
        self.numbers["tokens"] += int(counted.tokens)
        self.numbers["prompts_generated"] += prompts
        self.numbers["sets_generated"] += sets

    def as_dict(self) -> dict:
        cpu = self.numbers["cpu_seconds"]
        return {**self.numbers,
                "tokens_per_cpu_second": self.numbers["tokens"] / cpu if cpu > 0 else None}


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
