"""The prompts of one task of the text-temperature experiment, drawn by seed from its corpus.

``story``: the first sentence of a document (news articles by default), or with STORY_SENTENCES
"any" any sentence of one (the decTest design needs a prompt per set); ``resp``: a document (a
quote by default) as the message to reply to; ``prompt``: three WordNet words (noun, verb,
adjective) common enough to occur MIN_COUNT times in a second corpus. Writes a JSON list of
``{"prompt_id", "text"}``.
"""

import json

from _contract import Input, Inputs, Output
from _job import log, run

from diversity_core.atomic import atomic_write
from diversity_core.data import text as corpora
from diversity_core.data import text_tasks
from diversity_core.data.corpus_formats import load_wordnet


def main(corpus: Input, common_words: Inputs, prompts: Output, task: str, corpus_name: str,
         common_words_corpus: str, min_count: int, n_prompts: int, seed: int,
         story_sentences: str):
    """Draw N_PROMPTS prompts of TASK from the corpus in folder CORPUS (for TASK prompt: WordNet
    words occurring MIN_COUNT times in corpus COMMON_WORDS_CORPUS, folder COMMON_WORDS; none for
    the other tasks); write PROMPTS (.json)."""
    if task == "prompt":
        if len(common_words) != 1:
            raise ValueError(f"task prompt needs one COMMON_WORDS folder; got {common_words}.")
        corpora.check_corpus(corpus_name, corpus)  # against its .pins.json, before reading
        chosen = text_tasks.word_prompts(
            load_wordnet(corpus), n_prompts, seed, min_count=min_count,
            common_in=corpora.load_corpus(common_words_corpus, common_words[0]))
    else:
        documents = corpora.load_corpus(corpus_name, corpus)
        if task == "story":
            chosen = text_tasks.story_prompts(documents, n_prompts, seed,
                                              sentences=story_sentences)
        else:
            chosen = text_tasks.reply_prompts(documents, n_prompts, seed)
    with atomic_write(prompts, encoding="utf-8") as stream:
        json.dump(chosen, stream, indent=1, ensure_ascii=False)
        stream.write("\n")
    log.info("%s: %d prompts from %s, e.g. %r", task, len(chosen), corpus_name, chosen[0]["text"])


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
