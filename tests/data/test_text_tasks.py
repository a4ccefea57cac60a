"""The tasks of the text-temperature experiment: prompts drawn by seed, the response-set files,
and the paper's data (Tevet & Berant) from a local server."""

import csv
import io
import zipfile

import numpy as np
import pytest

from diversity_core.data import text_tasks

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
    prompts = text_tasks.story_prompts(DOCUMENTS, 3, seed=1)
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
    assert text_tasks.story_prompts(DOCUMENTS, 3, seed=1) == prompts
    with pytest.raises(ValueError, match="only 3 documents qualify"):
        text_tasks.story_prompts(DOCUMENTS, 4, seed=1)


def test_story_prompts_from_any_sentence():
    """sentences="any" (the decTest design: a prompt per set) takes every sentence of 8 to 40
    words, each named by its document and position."""
    prompts = text_tasks.story_prompts(DOCUMENTS, 4, seed=1, sentences="any")
    assert sorted(p["prompt_id"] for p in prompts) == ["story:0.1", "story:2.0", "story:3.0",
                                                      "story:4.0"]
    assert {p["text"] for p in prompts if p["prompt_id"] == "story:0.1"} == {
        "It voted to close the bridge for repairs."}
    with pytest.raises(ValueError, match="only 4 documents qualify"):
        text_tasks.story_prompts(DOCUMENTS, 5, seed=1, sentences="any")
    with pytest.raises(ValueError, match="'first' or 'any'"):
        text_tasks.story_prompts(DOCUMENTS, 1, seed=1, sentences="all")


def test_decoding_temperatures_are_stratified_and_seeded():
    t = text_tasks.decoding_temperatures(200, 0.2, 1.0, seed=3, task="resp", stage="sets")
    assert t.shape == (200,) and t.min() >= 0.2 and t.max() <= 1.0
    # One temperature per stratum of width 0.004 (rounded to 4 decimals).
    strata = np.floor((np.sort(t) - 0.2) / 0.004 + 1e-6).clip(max=199)
    assert np.abs(strata - np.arange(200)).max() <= 1
    assert not np.all(np.diff(t) > 0)  # shuffled over the sets
    assert np.array_equal(t, text_tasks.decoding_temperatures(200, 0.2, 1.0, 3, "resp", "sets"))
    for other in [(4, "resp", "sets"), (3, "story", "sets"), (3, "resp", "pilot")]:
        assert not np.array_equal(t, text_tasks.decoding_temperatures(200, 0.2, 1.0, *other))
    with pytest.raises(ValueError, match="low < high"):
        text_tasks.decoding_temperatures(5, 1.0, 1.0, 3, "resp", "sets")


def test_dectest_plan_gives_each_set_its_own_prompt():
    prompts = [{"prompt_id": "resp:1", "text": "a"}, {"prompt_id": "resp:2", "text": "b"}]
    assert text_tasks.dectest_plan(prompts, [0.5, 0.7]) == [
        {"prompt_id": "resp:1", "text": "a", "temperature": 0.5},
        {"prompt_id": "resp:2", "text": "b", "temperature": 0.7}]
    with pytest.raises(ValueError, match="2 prompts for 3 temperatures"):
        text_tasks.dectest_plan(prompts, [0.5, 0.7, 0.9])
    with pytest.raises(ValueError, match="appears twice"):
        text_tasks.dectest_plan(prompts[:1] * 2, [0.5, 0.7])


def test_dectest_plan_refuses_malformed_prompts():
    with pytest.raises(ValueError, match="prompt 1: needs a string prompt_id and a non-empty"):
        text_tasks.dectest_plan([{"prompt_id": "resp:1", "text": "a"},
                                 {"prompt_id": "resp:2", "text": "  "}], [0.5, 0.7])
    with pytest.raises(ValueError, match="prompt 0"):
        text_tasks.dectest_plan([{"text": "a"}], [0.5])


def test_reply_prompts_filter_by_length():
    prompts = text_tasks.reply_prompts(DOCUMENTS, 2, seed=0, max_words=20)
    assert all(5 <= len(p["text"].split()) <= 20 for p in prompts)
    with pytest.raises(ValueError, match="only 1 documents qualify"):
        text_tasks.reply_prompts(DOCUMENTS, 2, seed=0, max_words=16)
    assert all(p["prompt_id"].startswith("resp:") for p in prompts)


def test_word_prompts_are_distinct_triples():
    entries = [(w, pos, "gloss") for pos, words in
               (("n", ["river", "stone", "apple", "cloud", "Paris", "ice cream"]),
                ("v", ["carry", "jump", "sing", "write"]),
                ("a", ["bright", "quiet", "heavy", "x1"])) for w in words]
    prompts = text_tasks.word_prompts(entries, 3, seed=5)
    words = [w for p in prompts for w in p["text"].split(", ")]
    assert len(words) == 9 == len(set(words))
    assert not {"Paris", "ice cream", "x1"} & set(words)
    assert prompts[0]["prompt_id"] == "prompt:" + prompts[0]["text"].replace(", ", ",")
    assert text_tasks.word_prompts(entries, 3, seed=5) == prompts
    assert text_tasks.word_prompts(entries, 3, seed=6) != prompts
    documents = ["The river and the stone.", "Quiet rivers carry stone; carry a quiet river."]
    common = text_tasks.word_prompts(entries, 1, seed=0, common_in=documents, min_count=2)
    assert common[0]["text"] in ("river, carry, quiet", "stone, carry, quiet")
    with pytest.raises(ValueError, match="only 0 WordNet lemmas"):
        text_tasks.word_prompts(entries, 1, seed=0, common_in=["nothing here"])
    # More triples than verbs: a part of speech's words come again once all are used, in
    # triples that never repeat; the first triples are those of a smaller draw.
    many = text_tasks.word_prompts(entries, 10, seed=5)
    assert len({p["prompt_id"] for p in many}) == 10
    assert many[:3] == prompts
    with pytest.raises(ValueError, match="make fewer distinct triples"):
        text_tasks.word_prompts(entries, 49, seed=5)  # 4 nouns x 4 verbs x 3 adjectives = 48


# --- data files ---------------------------------------------------------------------------------

def test_sets_round_trip_and_bad_files(tmp_path):
    records = [{"task": "resp", "prompt_id": "resp:1", "prompt": "Hi — there", "temperature": 0.5,
                "responses": ["a", "b"], "seed": 1}]
    path = text_tasks.write_sets(tmp_path / "resp.jsonl", records)
    assert text_tasks.read_sets(path) == records
    assert not list(tmp_path.glob("*.tmp"))
    (tmp_path / "bad.jsonl").write_text('{"task": "resp", "prompt_id": "x", "prompt": "", '
                                        '"temperature": 0.5, "responses": ["a"]}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1: a set needs at least 2"):
        text_tasks.read_sets(tmp_path / "bad.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="no response sets"):
        text_tasks.read_sets(tmp_path / "empty.jsonl")


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
    text_tasks.fetch_tevet_berant(f"{base}/data.zip", dest, sha256=digest)
    members = text_tasks.tevet_berant_members(dest)
    assert (dest.parent / ".pins.json").is_file()  # the download vouches for the release
    assert members == {"story": "data/raw/dec_test/storyGen_temp.csv",
                       "resp": "data/raw/dec_test/respGen_temp.csv",
                       "prompt": "data/raw/dec_test/promptGen_temp.csv"}
    records = text_tasks.load_tevet_berant(dest, "resp", members["resp"])
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
        text_tasks.fetch_tevet_berant(f"{base}/data.zip", dest, sha256="0" * 64)
    assert not list(dest.parent.iterdir())


def test_tevet_berant_ambiguous_members_need_the_config(tmp_path):
    archive = _release(tmp_path / "data.zip", extra_story=True)
    with pytest.raises(ValueError, match="text.tevet_berant.members.story"):
        text_tasks.tevet_berant_members(archive, verify=False)
    chosen = text_tasks.tevet_berant_members(
        archive, {"story": "data/raw/dec_test/storyGen_temp_gpt2.csv"}, verify=False)
    assert chosen["story"].endswith("gpt2.csv")
    with pytest.raises(ValueError, match="no member"):
        text_tasks.tevet_berant_members(archive, {"story": "nope.csv"}, verify=False)
    # Verified (the default), a release no download vouched for is not read.
    with pytest.raises(ValueError, match=r"Tevet & Berant's release.*no \.pins\.json"):
        text_tasks.tevet_berant_members(archive)


def test_tevet_berant_release_as_published_picks_the_papers_files(tmp_path):
    """The release holds, per task, the 1,000-set and the 200-set decTest files, raw and with
    metric columns (4 temperature-labelled candidates): the paper's raw 1,000-set file is
    chosen; a user's members still come first; two copies of the paper's file are refused."""
    from paper_mirror import tevet_berant_release

    archive = tevet_berant_release(tmp_path / "data.zip", n_sets=5)
    chosen = text_tasks.tevet_berant_members(archive, verify=False)
    assert chosen == {task: f"data/raw/decTest/dec_test_1000_no_hds_{task}_gen.csv"
                      for task in ("story", "resp", "prompt")}
    assert len(text_tasks.load_tevet_berant(archive, "story", chosen["story"],
                                            verify=False)) == 5
    mine = "data/with_metrics/decTest/dec_test_200_with_hds_story_gen.csv"
    assert text_tasks.tevet_berant_members(archive, {"story": mine}, verify=False)["story"] == mine
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(tmp_path / "twice.zip", "w") as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
        dst.writestr("backup/raw/decTest/dec_test_1000_no_hds_story_gen.csv",
                     src.read(chosen["story"]))
    with pytest.raises(ValueError, match=r"not exactly one is the paper's raw/decTest/"
                                         r"dec_test_1000_no_hds_story_gen\.csv"):
        text_tasks.tevet_berant_members(tmp_path / "twice.zip", verify=False)
