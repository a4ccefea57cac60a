"""The language model of the text-temperature experiment: a task's chat, per-row temperature
sampling, the per-prompt cache.

The sampler is exercised on a tiny randomly initialised Llama network built here (a test
fixture: no model is shipped); the real SmolLM2 runs in tests/pipeline/test_text_pipeline.py.
"""

import json

import numpy as np
import pytest

from diversity_core import language_model

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


# --- the chat of a prompt -----------------------------------------------------------------------

def test_chat_messages():
    messages = language_model.chat_messages("prompt", "river, carry, bright")
    assert messages == [{"role": "user", "content": "Write one sentence that uses these three "
                                                    "words: river, carry, bright."}]
    story = language_model.chat_messages("story", "Once upon a time.")
    assert [m["role"] for m in story] == ["system", "user"]
    assert story[1]["content"] == "Once upon a time."
    with pytest.raises(ValueError, match="unknown task"):
        language_model.chat_messages("poem", "x")


# --- sampling -----------------------------------------------------------------------------------

def test_row_seeds_depend_on_every_part_of_their_key():
    row_seed = language_model.row_seed
    base = row_seed(1, "resp:3", 0.7, 4)
    assert base == row_seed(1, "resp:3", 0.7000000001, 4)
    others = {row_seed(2, "resp:3", 0.7, 4), row_seed(1, "resp:4", 0.7, 4),
              row_seed(1, "resp:3", 0.8, 4), row_seed(1, "resp:3", 0.7, 5)}
    assert base not in others and len(others) == 4


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_gumbel_processor_samples_the_tempered_softmax(temperature):
    logits = torch.tensor([0.0, 1.0, 2.0, 3.0])
    rows = 6000
    processor = language_model.gumbel_temperature_processor(np.full(rows, temperature), range(rows))
    picks = processor(None, logits.repeat(rows, 1)).argmax(dim=1).numpy()
    frequencies = np.bincount(picks, minlength=4) / rows
    expected = torch.softmax(logits / temperature, dim=0).numpy()
    # Binomial standard error at 6,000 draws is at most 0.0065: 4 of them.
    np.testing.assert_allclose(frequencies, expected, atol=0.026)


class _Tokenizer:
    """What generate_response_sets needs of a tokenizer, over a 32-token vocabulary."""

    eos_token_id = 2

    def apply_chat_template(self, messages, add_generation_prompt=True, return_tensors="pt"):
        text = messages[-1]["content"]
        return torch.tensor([[1] + [3 + (ord(c) % 29) for c in text[:12]]])

    def batch_decode(self, ids, skip_special_tokens=True):
        return [" ".join(f"t{int(i)}" for i in row if int(i) != self.eos_token_id)
                for row in ids]


@pytest.fixture(scope="module")
def tiny_lm():
    config = transformers.LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
        bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # sharper next-token distributions than the tiny initialisation's
        model.lm_head.weight.mul_(40.0)
    return model, _Tokenizer()


def _sample(tiny_lm, temperatures, n=4, seed=0, prompt_id="resp:1"):
    model, tokenizer = tiny_lm
    return language_model.generate_response_sets(
        model, tokenizer, language_model.chat_messages("resp", "Hello there, friend"), temperatures,
        n_responses=n, max_new_tokens=6, seed=seed, prompt_id=prompt_id)


def test_sets_do_not_depend_on_their_batch(tiny_lm):
    together, n_tokens = _sample(tiny_lm, [0.3, 1.0, 2.0])
    assert set(together) == {0.3, 1.0, 2.0}
    assert all(len(v) == 4 for v in together.values())
    assert 0 < n_tokens <= 3 * 4 * 6
    alone, _ = _sample(tiny_lm, [2.0])
    assert alone[2.0] == together[2.0]
    assert _sample(tiny_lm, [0.3, 1.0, 2.0]) == (together, n_tokens)
    assert _sample(tiny_lm, [2.0], seed=1)[0][2.0] != together[2.0]


def test_the_prompt_pass_projects_only_its_last_position(tiny_lm):
    # The prompt pass fills the key/value cache; its logits are not read, so the vocabulary
    # projection sees one position per chat there, not every prompt position (alone and in a
    # padded batch); decoding then sees one position per row and step.
    model, tokenizer = tiny_lm
    positions = []
    hook = model.lm_head.register_forward_hook(
        lambda module, inputs, output: positions.append(inputs[0].shape[:2]))
    try:
        _sample(tiny_lm, [1.0], n=2)
        language_model.generate_sets_batch(
            model, tokenizer, [language_model.chat_messages("resp", e["text"]) for e in _PLAN],
            [e["temperature"] for e in _PLAN], [e["prompt_id"] for e in _PLAN], n_responses=2,
            max_new_tokens=3, seed=3)
    finally:
        hook.remove()
    assert all(length == 1 for _, length in positions), positions
    assert (1, 1) in positions and (len(_PLAN), 1) in positions  # the two prompt passes


def test_temperature_controls_diversity(tiny_lm):
    sets, _ = _sample(tiny_lm, [1e-4, 3.0], n=8)
    model, tokenizer = tiny_lm
    ids = tokenizer.apply_chat_template(language_model.chat_messages("resp", "Hello there, friend"))
    greedy = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                            max_new_tokens=6, eos_token_id=2, pad_token_id=2)
    expected = tokenizer.batch_decode(greedy[:, ids.shape[1]:])[0]
    assert sets[1e-4] == [expected] * 8
    assert len(set(sets[3.0])) > 4


def test_generate_task_caches_per_prompt(tiny_lm, tmp_path):
    model, tokenizer = tiny_lm
    prompts = [{"prompt_id": "resp:1", "text": "Hello there"},
               {"prompt_id": "resp:2", "text": "Good morning"}]
    options = dict(n_responses=3, max_new_tokens=5, seed=7, cache_dir=tmp_path, progress=False)
    first, stats = language_model.generate_task("resp", prompts, [0.5, 1.5], model=model,
                                            tokenizer=tokenizer, **options)
    assert stats["sets_generated"] == 4 and stats["tokens"] > 0
    assert [(r["prompt_id"], r["temperature"]) for r in first] == [
        ("resp:1", 0.5), ("resp:1", 1.5), ("resp:2", 0.5), ("resp:2", 1.5)]
    assert len(list((tmp_path / "resp").glob("*.json"))) == 2
    # Enlarged: one more temperature; only it is sampled, the rest comes from the cache.
    second, stats = language_model.generate_task("resp", prompts, [0.5, 1.0, 1.5], model=model,
                                             tokenizer=tokenizer, **options)
    assert stats["sets_generated"] == 2 and stats["prompts_generated"] == 2
    kept = [r for r in second if r["temperature"] != 1.0]
    assert kept == first
    # Complete: no model needed at all.
    third, stats = language_model.generate_task("resp", prompts, [1.5, 0.5, 1.0], **options)
    assert stats["sets_generated"] == 0 and stats["tokens_per_cpu_second"] is None
    assert {(r["prompt_id"], r["temperature"]): r["responses"] for r in third} == \
        {(r["prompt_id"], r["temperature"]): r["responses"] for r in second}
    # Another seed is another cache entry.
    _, stats = language_model.generate_task("resp", prompts[:1], [0.5], model=model,
                                        tokenizer=tokenizer, **{**options, "seed": 8})
    assert stats["sets_generated"] == 1


def test_generate_task_refuses_short_and_corrupt_cached_sets(tiny_lm, tmp_path, caplog):
    """A cached set with fewer responses than configured is sampled again, and a cache file that
    cannot be read is named in the log and rebuilt: neither is ever used."""
    model, tokenizer = tiny_lm
    prompts = [{"prompt_id": "resp:1", "text": "Hello there"}]
    options = dict(n_responses=3, max_new_tokens=5, seed=7, cache_dir=tmp_path, progress=False,
                   model=model, tokenizer=tokenizer)
    first, _ = language_model.generate_task("resp", prompts, [0.5, 1.5], **options)
    settings = language_model.cache_settings(model=model, n_responses=3, max_new_tokens=5, seed=7)
    path = language_model.prompt_cache_file(tmp_path, "resp", prompts[0], settings)
    assert sorted(p.name for p in path.parent.iterdir()) == [f".{path.name}.lock", path.name]
    stored = json.loads(path.read_text())
    stored["sets"]["0.500000"] = stored["sets"]["0.500000"][:2]  # an interrupted or old write
    path.write_text(json.dumps(stored))
    with caplog.at_level("WARNING"):
        again, stats = language_model.generate_task("resp", prompts, [0.5, 1.5], **options)
    assert stats["sets_generated"] == 1 and "has 2 responses, 3 are configured" in caplog.text
    assert again == first  # the same seeds: the same set, now whole
    path.write_text(path.read_text()[:40])  # truncated
    caplog.clear()
    with caplog.at_level("WARNING"):
        again, stats = language_model.generate_task("resp", prompts, [0.5, 1.5], **options)
    assert stats["sets_generated"] == 2 and f"the cache {path} is unreadable" in caplog.text
    assert again == first


def test_generate_task_rejects_bad_settings(tmp_path):
    with pytest.raises(ValueError, match="unknown task"):
        language_model.generate_task("poem", [], [1.0], n_responses=3, max_new_tokens=4, seed=0,
                                 cache_dir=tmp_path)
    with pytest.raises(ValueError, match="repeat"):
        language_model.generate_task("resp", [], [1.0, 1.0], n_responses=3, max_new_tokens=4,
                                 seed=0, cache_dir=tmp_path)


# --- the decTest design: many prompts, one temperature each, one batch ---------------------------

# Prompts of 1 to 12 characters: chats of 2 to 13 tokens, so a batch is left-padded.
_PLAN = [{"prompt_id": f"resp:{k}", "text": text, "temperature": t} for k, (text, t) in
         enumerate([("Hi", 0.4), ("Good morning to", 1.3), ("Yes", 2.0), ("What is this?", 0.9),
                     ("a", 1.6)])]


def test_a_padded_batch_samples_what_each_prompt_samples_alone(tiny_lm):
    """Each set of a left-padded batch of prompts (one temperature each) equals the set the same
    prompt gets alone at that temperature: same streams, masked padding, positions counted from
    each prompt's first token."""
    model, tokenizer = tiny_lm
    chats = [language_model.chat_messages("resp", entry["text"]) for entry in _PLAN]
    sets, n_tokens = language_model.generate_sets_batch(
        model, tokenizer, chats, [e["temperature"] for e in _PLAN],
        [e["prompt_id"] for e in _PLAN], n_responses=4, max_new_tokens=6, seed=3)
    assert len(sets) == len(_PLAN) and all(len(s) == 4 for s in sets)
    assert 0 < n_tokens <= len(_PLAN) * 4 * 6
    for entry, chat, together in zip(_PLAN, chats, sets, strict=True):
        alone, _ = language_model.generate_response_sets(
            model, tokenizer, chat, [entry["temperature"]], n_responses=4, max_new_tokens=6,
            seed=3, prompt_id=entry["prompt_id"])
        assert together == alone[entry["temperature"]], entry
    with pytest.raises(ValueError, match="one each per set"):
        language_model.generate_sets_batch(model, tokenizer, chats, [1.0], ["resp:0"],
                                           n_responses=4, max_new_tokens=6, seed=3)


def test_generate_plan_batches_and_caches_per_prompt(tiny_lm, tmp_path):
    model, tokenizer = tiny_lm
    options = dict(n_responses=3, max_new_tokens=5, seed=7, cache_dir=tmp_path, progress=False)
    first, stats = language_model.generate_plan("resp", _PLAN, batch_sets=2, model=model,
                                                tokenizer=tokenizer, **options)
    assert stats["sets_generated"] == 5 and stats["prompts_generated"] == 5
    assert [(r["prompt_id"], r["temperature"]) for r in first] == [
        (e["prompt_id"], e["temperature"]) for e in _PLAN]
    assert all(len(r["responses"]) == 3 and r["seed"] == 7 for r in first)
    # Another batching of the same plan: every set from the cache, no model needed.
    again, stats = language_model.generate_plan("resp", _PLAN, batch_sets=4, **options)
    assert stats["sets_generated"] == 0 and again == first
    # The grid design reads the same cache: resp:0 at its decTest temperature is there.
    grid, stats = language_model.generate_task(
        "resp", [{"prompt_id": "resp:0", "text": "Hi"}], [0.4], **options)
    assert stats["sets_generated"] == 0 and grid[0]["responses"] == first[0]["responses"]
    # One batch of all five gives the same sets as batches of two.
    fresh, _ = language_model.generate_plan("resp", _PLAN, batch_sets=5, model=model,
                                            tokenizer=tokenizer,
                                            **{**options, "cache_dir": tmp_path / "other"})
    assert fresh == first
    with pytest.raises(ValueError, match="appears twice"):
        language_model.generate_plan("resp", _PLAN + _PLAN[:1], batch_sets=2, **options)
    with pytest.raises(ValueError, match="batch_sets"):
        language_model.generate_plan("resp", _PLAN, batch_sets=0, **options)


def _former_processor(temperatures, seeds, device="cpu"):
    """A processor with its generators and noise on the model's device, kept here to show that
    drawing the noise on the CPU (the package's way) changes no CPU-sampled token."""
    from transformers import LogitsProcessor

    class Former(LogitsProcessor):
        def __init__(self):
            self.temperatures = torch.as_tensor(np.asarray(temperatures, dtype=np.float32),
                                                device=device)
            self.generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]

        def __call__(self, input_ids, scores):
            uniform = torch.stack([torch.rand(scores.shape[1], generator=g, device=scores.device)
                                   for g in self.generators])
            gumbel = -torch.log(-torch.log(uniform.clamp_(min=1e-20, max=1.0 - 1e-7)))
            return scores.float() / self.temperatures[:, None] + gumbel

    return Former()


def test_cpu_noise_samples_the_tokens_it_always_sampled(tiny_lm, monkeypatch):
    scores = torch.randn(5, 32, generator=torch.Generator().manual_seed(3))
    seeds = [language_model.row_seed(0, "resp:1", 0.7, i) for i in range(5)]
    new = language_model.gumbel_temperature_processor([0.7] * 5, seeds)
    old = _former_processor([0.7] * 5, seeds)
    for _ in range(3):  # successive steps of the streams, bit for bit
        assert torch.equal(new(None, scores), old(None, scores))
    now = _sample(tiny_lm, [0.3, 1.0, 2.0], n=5)
    from diversity_core.language_model import sampling

    monkeypatch.setattr(sampling, "gumbel_temperature_processor", _former_processor)
    assert _sample(tiny_lm, [0.3, 1.0, 2.0], n=5) == now
    assert len(set(now[0][2.0])) > 1  # sampled, not greedy: the streams mattered
