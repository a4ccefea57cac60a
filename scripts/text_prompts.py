"""The prompts of one task of the text-temperature experiment, drawn by seed from its corpus.

``story``: the first sentence of a document (news articles by default); ``resp``: a document (a
quote by default) as the message to reply to; ``prompt``: three WordNet words (noun, verb,
adjective). Writes a JSON list of ``{"prompt_id", "text"}``.
"""

import json

from _helpers import log, run

from diversity_core.data import generation
from diversity_core.data import text as corpora


def main(corpus, prompts, task, corpus_name, n_prompts: int = 24, seed: int = 0):
    """Draw N_PROMPTS prompts of TASK from the corpus in folder CORPUS; write PROMPTS (.json)."""
    if task == "prompt":
        chosen = generation.word_prompts(corpora.load_wordnet(corpus), n_prompts, seed)
    else:
        documents = corpora.load_corpus(corpus_name, corpus)
        draw = generation.story_prompts if task == "story" else generation.reply_prompts
        chosen = draw(documents, n_prompts, seed)
    with open(prompts, "w", encoding="utf-8") as stream:
        json.dump(chosen, stream, indent=1, ensure_ascii=False)
        stream.write("\n")
    log.info("%s: %d prompts from %s, e.g. %r", task, len(chosen), corpus_name, chosen[0]["text"])


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
