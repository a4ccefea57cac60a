"""Draw the documents of one collection that every embedding model of the experiment embeds.

Documents are cut to ``max_words`` words, short ones and repeats dropped, ``n_documents`` drawn
with the experiment's seed (diversity_core.experiments.model_distinguishing.select_documents).
"""

import json

from _helpers import log, run, write_provenance

from diversity_core.data.text import load_corpus
from diversity_core.experiments.model_distinguishing import select_documents


def main(folder, documents, collection="fortunes", n_documents=2000, min_words=5,
         max_words=64, seed=0, pins=None):
    """Write ``documents`` (JSON: collection, indices into the corpus, texts); ``pins``: the
    configuration's pins of the corpus (text_assets.corpora), None for the package's."""
    if isinstance(pins, str):  # from the command line
        pins = json.loads(pins)
    corpus = load_corpus(collection, folder, pins or None)
    texts, indices = select_documents(corpus, n_documents, min_words=min_words,
                                      max_words=max_words, seed=seed)
    words = [len(t.split()) for t in texts]
    log.info("%s: %d of %d documents drawn, %.1f words on average", collection, len(texts),
             len(corpus), sum(words) / len(words))
    with open(documents, "w") as out:
        json.dump({"collection": collection, "indices": indices.tolist(), "texts": texts}, out,
                  ensure_ascii=False, indent=0)
    write_provenance(documents, config={"collection": collection, "n_documents": n_documents,
                                        "min_words": min_words, "max_words": max_words,
                                        "seed": seed}, corpus_size=len(corpus))


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
