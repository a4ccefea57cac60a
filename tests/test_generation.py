"""Generated text of the text-temperature experiment: prompts, per-row temperature sampling, the
per-prompt cache, the data files, and the paper's data (Tevet & Berant) from a local server.

The sampler is exercised on a tiny randomly initialised Llama network built here (a test
fixture: no model is shipped); the real SmolLM2 runs in tests/test_text_pipeline.py.
"""

import csv
import io
import json
import zipfile

import numpy as np
import pytest

from diversity_core.data import generation

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


# --- prompts ------------------------------------------------------------------------------------

DOCUMENTS = [
    "The council met on Monday. It voted to close the bridge for repairs.",
    "Short one.",
    "A storm swept across the northern coast overnight, cutting power to thousands of homes. "
    "Crews worked through the night.",
    "Scientists in Melbourne said on Tuesday they had found a new species of frog in the "
    "rainforest. The frog is tiny.",
    "Police are searching for a man who escaped from a prison van near the city centre today.",
]


def test_story_prompts_take_first_sentences_by_seed():
    prompts = generation.story_prompts(DOCUMENTS, 3, seed=1)
    assert len(prompts) == 3 and len({p["prompt_id"] for p in prompts}) == 3
    texts = {p["text"] for p in prompts}
    assert "Short one." not in texts  # fewer than 8 words
    assert texts <= {"The council met on Monday.",  # too short: 5 words
                     "A storm swept across the northern coast overnight, cutting power to "
                     "thousands of homes.",
                     "Scientists in Melbourne said on Tuesday they had found a new species of "
                     "frog in the rainforest.",
                     "Police are searching for a man who escaped from a prison van near the city "
                     "centre today."}
    assert generation.story_prompts(DOCUMENTS, 3, seed=1) == prompts
    with pytest.raises(ValueError, match="only 3 documents qualify"):
        generation.story_prompts(DOCUMENTS, 4, seed=1)


def test_reply_prompts_filter_by_length():
    prompts = generation.reply_prompts(DOCUMENTS, 2, seed=0, max_words=20)
    assert all(5 <= len(p["text"].split()) <= 20 for p in prompts)
    with pytest.raises(ValueError, match="only 1 documents qualify"):
        generation.reply_prompts(DOCUMENTS, 2, seed=0, max_words=16)
    assert all(p["prompt_id"].startswith("resp:") for p in prompts)


def test_word_prompts_are_distinct_triples():
    entries = [(w, pos, "gloss") for pos, words in
               (("n", ["river", "stone", "apple", "cloud", "Paris", "ice cream"]),
                ("v", ["carry", "jump", "sing", "write"]),
                ("a", ["bright", "quiet", "heavy", "x1"])) for w in words]
    prompts = generation.word_prompts(entries, 3, seed=5)
    words = [w for p in prompts for w in p["text"].split(", ")]
    assert len(words) == 9 == len(set(words))
    assert not {"Paris", "ice cream", "x1"} & set(words)
    assert prompts[0]["prompt_id"] == "prompt:" + prompts[0]["text"].replace(", ", ",")
    assert generation.word_prompts(entries, 3, seed=5) == prompts
    assert generation.word_prompts(entries, 3, seed=6) != prompts
    documents = ["The river and the stone.", "Quiet rivers carry stone; carry a quiet river."]
    common = generation.word_prompts(entries, 1, seed=0, common_in=documents, min_count=2)
    assert common[0]["text"] in ("river, carry, quiet", "stone, carry, quiet")
    with pytest.raises(ValueError, match="only 0 WordNet lemmas"):
        generation.word_prompts(entries, 1, seed=0, common_in=["nothing here"])


def test_chat_messages():
    messages = generation.chat_messages("prompt", "river, carry, bright")
    assert messages == [{"role": "user", "content": "Write one sentence that uses these three "
                                                    "words: river, carry, bright."}]
    story = generation.chat_messages("story", "Once upon a time.")
    assert [m["role"] for m in story] == ["system", "user"]
    assert story[1]["content"] == "Once upon a time."
    with pytest.raises(ValueError, match="unknown task"):
        generation.chat_messages("poem", "x")


# --- sampling -----------------------------------------------------------------------------------

def test_row_seeds_depend_on_every_part_of_their_key():
    base = generation.row_seed(1, "resp:3", 0.7, 4)
    assert base == generation.row_seed(1, "resp:3", 0.7000000001, 4)
    others = {generation.row_seed(2, "resp:3", 0.7, 4), generation.row_seed(1, "resp:4", 0.7, 4),
              generation.row_seed(1, "resp:3", 0.8, 4), generation.row_seed(1, "resp:3", 0.7, 5)}
    assert base not in others and len(others) == 4


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_gumbel_processor_samples_the_tempered_softmax(temperature):
    logits = torch.tensor([0.0, 1.0, 2.0, 3.0])
    rows = 6000
    processor = generation.gumbel_temperature_processor(np.full(rows, temperature), range(rows))
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
    return generation.generate_response_sets(
        model, tokenizer, generation.chat_messages("resp", "Hello there, friend"), temperatures,
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


def test_temperature_controls_diversity(tiny_lm):
    sets, _ = _sample(tiny_lm, [1e-4, 3.0], n=8)
    model, tokenizer = tiny_lm
    ids = tokenizer.apply_chat_template(generation.chat_messages("resp", "Hello there, friend"))
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
    first, stats = generation.generate_task("resp", prompts, [0.5, 1.5], model=model,
                                            tokenizer=tokenizer, **options)
    assert stats["sets_generated"] == 4 and stats["tokens"] > 0
    assert [(r["prompt_id"], r["temperature"]) for r in first] == [
        ("resp:1", 0.5), ("resp:1", 1.5), ("resp:2", 0.5), ("resp:2", 1.5)]
    assert len(list((tmp_path / "resp").glob("*.json"))) == 2
    # Enlarged: one more temperature; only it is sampled, the rest comes from the cache.
    second, stats = generation.generate_task("resp", prompts, [0.5, 1.0, 1.5], model=model,
                                             tokenizer=tokenizer, **options)
    assert stats["sets_generated"] == 2 and stats["prompts_generated"] == 2
    kept = [r for r in second if r["temperature"] != 1.0]
    assert kept == first
    # Complete: no model needed at all.
    third, stats = generation.generate_task("resp", prompts, [1.5, 0.5, 1.0], **options)
    assert stats["sets_generated"] == 0 and stats["tokens_per_cpu_second"] is None
    assert {(r["prompt_id"], r["temperature"]): r["responses"] for r in third} == \
        {(r["prompt_id"], r["temperature"]): r["responses"] for r in second}
    # Another seed is another cache entry.
    _, stats = generation.generate_task("resp", prompts[:1], [0.5], model=model,
                                        tokenizer=tokenizer, **{**options, "seed": 8})
    assert stats["sets_generated"] == 1


def test_generate_task_refuses_short_and_corrupt_cached_sets(tiny_lm, tmp_path, caplog):
    """A cached set with fewer responses than configured is sampled again, and a cache file that
    cannot be read is named in the log and rebuilt: neither is ever used."""
    model, tokenizer = tiny_lm
    prompts = [{"prompt_id": "resp:1", "text": "Hello there"}]
    options = dict(n_responses=3, max_new_tokens=5, seed=7, cache_dir=tmp_path, progress=False,
                   model=model, tokenizer=tokenizer)
    first, _ = generation.generate_task("resp", prompts, [0.5, 1.5], **options)
    settings = generation.cache_settings(model=model, n_responses=3, max_new_tokens=5, seed=7)
    path = generation.prompt_cache_file(tmp_path, "resp", prompts[0], settings)
    assert sorted(p.name for p in path.parent.iterdir()) == [f".{path.name}.lock", path.name]
    stored = json.loads(path.read_text())
    stored["sets"]["0.500000"] = stored["sets"]["0.500000"][:2]  # an interrupted or old write
    path.write_text(json.dumps(stored))
    with caplog.at_level("WARNING"):
        again, stats = generation.generate_task("resp", prompts, [0.5, 1.5], **options)
    assert stats["sets_generated"] == 1 and "has 2 responses, 3 are configured" in caplog.text
    assert again == first  # the same seeds: the same set, now whole
    path.write_text(path.read_text()[:40])  # truncated
    caplog.clear()
    with caplog.at_level("WARNING"):
        again, stats = generation.generate_task("resp", prompts, [0.5, 1.5], **options)
    assert stats["sets_generated"] == 2 and f"the cache {path} is unreadable" in caplog.text
    assert again == first


def test_generate_task_rejects_bad_settings(tmp_path):
    with pytest.raises(ValueError, match="unknown task"):
        generation.generate_task("poem", [], [1.0], n_responses=3, max_new_tokens=4, seed=0,
                                 cache_dir=tmp_path)
    with pytest.raises(ValueError, match="repeat"):
        generation.generate_task("resp", [], [1.0, 1.0], n_responses=3, max_new_tokens=4,
                                 seed=0, cache_dir=tmp_path)


# --- data files ---------------------------------------------------------------------------------

def test_sets_round_trip_and_bad_files(tmp_path):
    records = [{"task": "resp", "prompt_id": "resp:1", "prompt": "Hi — there", "temperature": 0.5,
                "responses": ["a", "b"], "seed": 1}]
    path = generation.write_sets(tmp_path / "resp.jsonl", records)
    assert generation.read_sets(path) == records
    assert not list(tmp_path.glob("*.tmp"))
    (tmp_path / "bad.jsonl").write_text('{"task": "resp", "prompt_id": "x", "prompt": "", '
                                        '"temperature": 0.5, "responses": ["a"]}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1: a set needs at least 2"):
        generation.read_sets(tmp_path / "bad.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="no response sets"):
        generation.read_sets(tmp_path / "empty.jsonl")


# --- the paper's data ---------------------------------------------------------------------------

def _csv(rows):
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _release(path, extra_story=False):
    """A zip laid out like Tevet & Berant's release (CSV rows: one set, resp_i, label_*)."""
    def rows(task, n):
        return [{"sample_id": i, "context": f"{task} context {i}",
                 **{f"resp_{k}": f"{task} response {i}.{k}" for k in range(3)},
                 "label_name": "temp", "label_value": 0.2 + 0.1 * i} for i in range(n)]

    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data/raw/dec_test/storyGen_temp.csv", _csv(rows("story", 4)))
        archive.writestr("data/raw/dec_test/respGen_temp.csv", _csv(rows("resp", 5)))
        archive.writestr("data/raw/dec_test/promptGen_temp.csv", _csv(rows("prompt", 6)))
        archive.writestr("data/raw/McDiv/story_nuggets.csv", _csv(
            [{"sample_id": 0, "resp_0": "a", "label_name": "content", "label_value": 1}]))
        if extra_story:
            archive.writestr("data/raw/dec_test/storyGen_temp_gpt2.csv", _csv(rows("story", 2)))
    return path


def test_tevet_berant_download_and_read(http_root, tmp_path):
    root, base = http_root
    _release(root / "data.zip")
    from diversity_core.assets import file_digest

    digest = file_digest(root / "data.zip")
    dest = tmp_path / "resources" / "data.zip"
    generation.fetch_tevet_berant(f"{base}/data.zip", dest, sha256=digest)
    members = generation.tevet_berant_members(dest)
    assert (dest.parent / ".pins.json").is_file()  # the download vouches for the release
    assert members == {"story": "data/raw/dec_test/storyGen_temp.csv",
                       "resp": "data/raw/dec_test/respGen_temp.csv",
                       "prompt": "data/raw/dec_test/promptGen_temp.csv"}
    records = generation.load_tevet_berant(dest, "resp", members["resp"])
    assert len(records) == 5
    assert records[1] == {"task": "resp", "prompt_id": "resp:1", "prompt": "resp context 1",
                          "temperature": pytest.approx(0.3),
                          "responses": ["resp response 1.0", "resp response 1.1",
                                        "resp response 1.2"]}


def test_tevet_berant_bad_checksum_leaves_nothing(http_root, tmp_path):
    root, base = http_root
    _release(root / "data.zip")
    dest = tmp_path / "resources" / "data.zip"
    with pytest.raises(ValueError, match="checksum mismatch"):
        generation.fetch_tevet_berant(f"{base}/data.zip", dest, sha256="0" * 64)
    assert not list(dest.parent.iterdir())


def test_tevet_berant_ambiguous_members_need_the_config(tmp_path):
    archive = _release(tmp_path / "data.zip", extra_story=True)
    with pytest.raises(ValueError, match="text.tevet_berant.members.story"):
        generation.tevet_berant_members(archive, verify=False)
    chosen = generation.tevet_berant_members(
        archive, {"story": "data/raw/dec_test/storyGen_temp_gpt2.csv"}, verify=False)
    assert chosen["story"].endswith("gpt2.csv")
    with pytest.raises(ValueError, match="no member"):
        generation.tevet_berant_members(archive, {"story": "nope.csv"}, verify=False)
    # Verified (the default), a release no download vouched for is not read.
    with pytest.raises(ValueError, match=r"Tevet & Berant's release.*no \.pins\.json"):
        generation.tevet_berant_members(archive)
