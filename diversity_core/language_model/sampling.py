"""How the language model is prompted and sampled: a task's chat, per-row temperature sampling.

:func:`chat_messages` wraps a prompt in its task's chat. :func:`generate_response_sets` samples
every response of a chat, at every temperature, as one row of a single batch; the prompt's
key/value cache is computed once and shared by the rows. Each row samples with the Gumbel-max
trick (:func:`gumbel_temperature_processor`) from its own random stream, seeded by (seed, prompt,
temperature, response index) (:func:`row_seed`): a response does not depend on which other rows
share its batch, so an enlarged run (more temperatures, more prompts) reproduces the responses it
already had. :func:`generate_sets_batch` samples the decTest design's sets (one temperature per
set, each set its own prompt) of several prompts in one left-padded batch, with the same streams.

>>> sets, n_tokens = generate_response_sets(model, tokenizer, chat_messages("resp", text),
...                                         [0.2, 1.0], n_responses=10, max_new_tokens=32,
...                                         seed=1, prompt_id="resp:17")
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from ..data.text_tasks import TASKS

__all__ = [
    "chat_messages",
    "row_seed",
    "gumbel_temperature_processor",
    "generate_response_sets",
    "generate_sets_batch",
]

# --- the chat of a prompt ----------------------------------------------------------------------

# Each task's chat: a system message (None: the model's default one) and the user's message
# around the prompt's {text}. Chosen on a few samples for on-task answers from a 135M model: a bare
# "continue this story" instruction drew "The next sentence is: ..." echoes at low temperature.
_CHATS = {
    "story": ("You are a storyteller. Continue the user's story with its next sentence only.",
              "{text}"),
    "resp": ("You are chatting with a friend. Reply to their message in one sentence.", "{text}"),
    "prompt": (None, "Write one sentence that uses these three words: {text}."),
}


def chat_messages(task: str, text: str) -> list[dict]:
    """The chat of one prompt: the task's system message (if any) and the user's message."""
    if task not in _CHATS:
        raise ValueError(f"unknown task {task!r}; known: {TASKS}.")
    system, user = _CHATS[task]
    messages = [{"role": "system", "content": system}] if system else []
    return messages + [{"role": "user", "content": user.format(text=text)}]


# --- sampling ----------------------------------------------------------------------------------

# Bumped whenever sampling changes in a way that changes responses: part of every cache key.
SAMPLER_VERSION = 1


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

    The generators and the noise live on the CPU whatever ``device`` the model runs on (the
    noise is moved to the scores' device): CUDA's generators draw other numbers from the same
    seed, so a GPU run would otherwise sample other responses than the CPU run even where its
    logits agree. On the CPU this is the computation it always was (the same tokens).
    """
    import torch
    from transformers import LogitsProcessor

    class GumbelTemperature(LogitsProcessor):
        def __init__(self):
            self.temperatures = torch.as_tensor(np.asarray(temperatures, dtype=np.float32),
                                                device=device)
            if torch.any(self.temperatures <= 0):
                raise ValueError("temperatures must be positive.")
            self.generators = [torch.Generator(device="cpu").manual_seed(int(s)) for s in seeds]

        def __call__(self, input_ids, scores):
            if scores.shape[0] != len(self.generators):
                raise ValueError(f"batch of {scores.shape[0]} rows, {len(self.generators)} "
                                 "random streams.")
            uniform = torch.stack([torch.rand(scores.shape[1], generator=g)
                                   for g in self.generators])
            # The logarithms on the CPU too: the noise then has the same bits on every device.
            gumbel = -torch.log(-torch.log(uniform.clamp_(min=1e-20, max=1.0 - 1e-7)))
            return scores.float() / self.temperatures[:, None] + gumbel.to(scores.device)

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
    temperatures = [float(t) for t in temperatures]
    if not temperatures:
        return {}, 0
    seeds = [row_seed(seed, prompt_id, t, i) for t in temperatures for i in range(n_responses)]
    texts, n_tokens = _sample_rows(model, tokenizer, [messages], len(seeds),
                                   np.repeat(temperatures, n_responses), seeds, max_new_tokens)
    sets = {t: texts[k * n_responses:(k + 1) * n_responses] for k, t in enumerate(temperatures)}
    return sets, n_tokens


def generate_sets_batch(model, tokenizer, chats: Sequence[list[dict]],
                        temperatures: Sequence[float], prompt_ids: Sequence[str], *,
                        n_responses: int, max_new_tokens: int,
                        seed: int) -> tuple[list[list[str]], int]:
    """Sample one set of ``n_responses`` responses per chat, each chat at its own temperature,
    all in one batch (the decTest design: one temperature per set, each set its own prompt).

    The chats are left-padded to a common length (masked, positions counted from each chat's
    first token); each chat's key/value cache is computed once and repeated for its
    ``n_responses`` rows. Every row draws from its own stream, seeded as in
    :func:`generate_response_sets` by (seed, prompt, temperature, index), so a set sampled here
    equals the set that prompt gets alone at that temperature up to the floating-point effect of
    padding (measured: 140 of 140 responses identical, 14 chats of 36-81 tokens).

    Returns
    -------
    sets : one list of ``n_responses`` response strings per chat, in order
    n_tokens : tokens generated (end-of-turn tokens included; padding after it excluded)
    """
    temperatures = [float(t) for t in temperatures]
    if not len(chats) == len(temperatures) == len(prompt_ids):
        raise ValueError(f"{len(chats)} chats, {len(temperatures)} temperatures, "
                         f"{len(prompt_ids)} prompt ids: one each per set.")
    if not chats:
        return [], 0
    seeds = [row_seed(seed, prompt_id, t, i)
             for prompt_id, t in zip(prompt_ids, temperatures, strict=True)
             for i in range(n_responses)]
    texts, n_tokens = _sample_rows(model, tokenizer, chats, n_responses,
                                   np.repeat(temperatures, n_responses), seeds, max_new_tokens)
    return [texts[k * n_responses:(k + 1) * n_responses] for k in range(len(chats))], n_tokens


def _sample_rows(model, tokenizer, chats: Sequence[list[dict]], rows_per_chat: int,
                 row_temperatures, seeds: Sequence[int],
                 max_new_tokens: int) -> tuple[list[str], int]:
    """Sample ``rows_per_chat`` rows per chat (chat-major order) with the Gumbel-max processor.

    Each chat's prompt (all but its last token, whose logits start decoding) is run once and its
    cache repeated for its rows. A single chat is run unpadded, without a mask (the path every
    cached grid set was sampled on); several are left-padded with the end-of-turn token and
    masked, with position ids counted from each chat's first real token, as ``generate`` counts
    them from the mask.
    """
    import torch
    from transformers import DynamicCache, GenerationConfig

    device = model.device
    prompts = []
    for messages in chats:
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                            return_tensors="pt")
        if not isinstance(ids, torch.Tensor):  # a BatchEncoding
            ids = ids["input_ids"]
        prompts.append(ids[0])
    eos = tokenizer.eos_token_id
    width = max(len(ids) for ids in prompts)
    ids = torch.full((len(prompts), width), eos, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for k, prompt in enumerate(prompts):
        ids[k, width - len(prompt):] = prompt
        mask[k, width - len(prompt):] = 1
    ids, mask = ids.to(device), mask.to(device)
    rows = len(prompts) * rows_per_chat
    config = GenerationConfig(do_sample=False, max_new_tokens=int(max_new_tokens),
                              eos_token_id=eos, pad_token_id=eos)
    padded = bool((mask == 0).any())
    # The prompt pass only fills the cache: its logits are not read, so only the last
    # position's are formed (logits_to_keep=1; the vocabulary projection of every prompt
    # position was about a quarter of the pass). The cache, so every sampled token, is the same.
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        if padded:
            positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
            model(ids[:, :-1], attention_mask=mask[:, :-1], position_ids=positions[:, :-1],
                  past_key_values=cache, use_cache=True, logits_to_keep=1)
        else:
            model(ids[:, :-1], past_key_values=cache, use_cache=True, logits_to_keep=1)
        cache.batch_repeat_interleave(rows_per_chat)
        out = model.generate(
            ids.repeat_interleave(rows_per_chat, dim=0),
            attention_mask=mask.repeat_interleave(rows_per_chat, dim=0),
            past_key_values=cache, generation_config=config,
            logits_processor=[gumbel_temperature_processor(row_temperatures, seeds, device)],
        )
    if out.shape[0] != rows:
        raise RuntimeError(f"generate returned {out.shape[0]} rows, {rows} expected.")
    new = out[:, width:].cpu()
    finished = (new == eos).cumsum(dim=1)
    # Tokens up to and including the first end-of-turn token.
    n_tokens = int(((finished == 0) | ((finished == 1) & (new == eos))).sum())
    texts = tokenizer.batch_decode(new, skip_special_tokens=True)
    # Runs of whitespace (tabs, newlines of a rambling high-temperature sample) become one space.
    return [" ".join(text.split()) for text in texts], n_tokens
