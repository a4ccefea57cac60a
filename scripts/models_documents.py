"""Choose the documents of one collection that every embedding model of the experiment embeds.

``documents: drawn``: documents cut to ``max_words`` words, short ones and repeats dropped,
``n_documents`` drawn with the experiment's seed; ``presto``: the first ``n_documents`` as they
are (diversity_core.experiments.model_distinguishing.choose_documents).
"""

import json

from _contract import Input, Output
from _job import log, run

from diversity_core.atomic import atomic_write
from diversity_core.data.text import load_corpus
from diversity_core.experiments.model_distinguishing import choose_documents


def main(folder: Input, documents: Output, collection: str, choice: str, n_documents: int,
         min_words: int, max_words: int, seed: int, pins: dict | None):
    """Write ``documents`` (JSON: collection, indices into the corpus, texts); ``pins``: the
    configuration's pins of the corpus (text_assets.corpora), None for the package's."""
    # presto: the rows exactly as stored (Presto's data["train"][column][:n]); drawn: normalised.
    corpus = load_corpus(collection, folder, pins or None, as_stored=choice == "presto")
    texts, indices = choose_documents(corpus, choice, n_documents, min_words=min_words,
                                      max_words=max_words, seed=seed)
    words = [len(t.split()) for t in texts]
    log.info("%s: %d of %d documents (%s), %.1f words on average", collection, len(texts),
             len(corpus), choice, sum(words) / len(words))
    with atomic_write(documents) as out:
        json.dump({"collection": collection, "indices": indices.tolist(), "texts": texts}, out,
                  ensure_ascii=False, indent=0)
    return {"corpus_size": len(corpus)}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
