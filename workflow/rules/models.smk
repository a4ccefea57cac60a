# Distinguishing embedding models (paper §4.3, Table 2, Table S.5): experiment
# `model_distinguishing`, files in results/models/.
#
# fetch corpora + models (text_assets.smk) -> draw documents per collection -> embed (one job per
# collection and model, cached per text) -> magnitude functions and scalar scores of the
# subsamples (one job per collection and variant: a preprocessing and the distance of magnitude)
# -> k-NN cross-validation -> tables, figures.

MOD = "models"
MOD_CFG = config[MOD]
MOD_COLLECTIONS = MOD_CFG["collections"]
MOD_MODELS = MOD_CFG["models"]
# One block of Table 2 per variant (a preprocessing and the distance of magnitude), named as
# its interim files: raw_cosine, pca_cosine, presto_euclidean ...
MOD_VARIANTS = {f"{v['preprocessing']}_{v['distance']}": v for v in MOD_CFG["variants"]}
# What the final results depend on: recorded in their provenance files.
MOD_PROVENANCE = {key: config[key] for key in ("seed", "magnitude", "text_assets", MOD)}
# The software environment of every rule of this file (--sdm conda).
MOD_ENV = "../../envs/text.yaml"


# Its cross-key constraints, checked before any job runs (common.smk: check_config).
CONFIG_CHECKS["models"] = "diversity_core.experiments.model_distinguishing"

EXPERIMENT_TARGETS["model_distinguishing"] = [
    results(MOD, "table2.csv"),
    results(MOD, "table_s5.csv"),
    results(MOD, "stability.csv"),
    results(MOD, "table2.md"),
    results(MOD, "magnitude_functions.png"),
    results(MOD, "magnitude_functions.pdf"),
    results(MOD, "confusion_magdiff.png"),
    results(MOD, "confusion_magdiff.pdf"),
]


rule model_distinguishing:
    input:
        EXPERIMENT_TARGETS["model_distinguishing"],


rule models_documents:
    input:
        folder=lambda wildcards: text_corpus_dir(wildcards.collection),
    output:
        documents=interim(MOD, "documents", "{collection}.json"),
    params:
        collection=lambda wildcards: wildcards.collection,
        pins=lambda wildcards: config["text_assets"]["corpora"].get(wildcards.collection),
        choice=MOD_CFG["documents"],
        n_documents=MOD_CFG["n_documents"],
        min_words=MOD_CFG["min_words"],
        max_words=MOD_CFG["max_words"],
        seed=seed_for(MOD),
    conda:
        MOD_ENV
    log:
        logs(MOD, "documents_{collection}"),
    threads: 1
    script:
        "../../scripts/models_documents.py"


rule models_embed:
    input:
        documents=interim(MOD, "documents", "{collection}.json"),
        model_dir=lambda wildcards: text_model_dir(wildcards.model),
    output:
        embeddings=interim(MOD, "embeddings", "{collection}", "{model}.npy"),
    params:
        model=lambda wildcards: wildcards.model,
        pins=lambda wildcards: config["text_assets"]["models"].get(wildcards.model),
        cache=lambda wildcards: str(
            RESOURCES / "text" / "embedding_cache" / wildcards.model / f"{wildcards.collection}.npz"
        ),
        batch_size=MOD_CFG["batch_size"],
        device=MOD_CFG["device"],
    conda:
        MOD_ENV
    log:
        logs(MOD, "embed_{collection}_{model}"),
    benchmark:
        bench(MOD, "embed_{collection}_{model}")
    threads: MOD_CFG["embed_threads"]
    script:
        "../../scripts/models_embed.py"


rule models_scores:
    input:
        embeddings=lambda wildcards: expand(
            interim(MOD, "embeddings", wildcards.collection, "{model}.npy"), model=MOD_MODELS
        ),
    output:
        scores=interim(MOD, "scores", "{collection}_{variant}.npz"),
    params:
        collection=lambda wildcards: wildcards.collection,
        preprocessing=lambda wildcards: MOD_VARIANTS[wildcards.variant]["preprocessing"],
        distance=lambda wildcards: MOD_VARIANTS[wildcards.variant]["distance"],
        models=MOD_MODELS,
        subsample_size=MOD_CFG["subsample_size"],
        n_subsamples=MOD_CFG["n_subsamples"],
        pca_dim=MOD_CFG["pca_dim"],
        pca_rank=MOD_CFG["pca_rank"],
        dcscore_tau=MOD_CFG["dcscore_tau"],
        magnitude=config["magnitude"],
        seed=seed_for(MOD),
    wildcard_constraints:
        variant="|".join(MOD_VARIANTS),
    conda:
        MOD_ENV
    log:
        logs(MOD, "scores_{collection}_{variant}"),
    benchmark:
        bench(MOD, "scores_{collection}_{variant}")
    threads: 1
    script:
        "../../scripts/models_scores.py"


rule models_classify:
    input:
        scores=interim(MOD, "scores", "{collection}_{variant}.npz"),
    output:
        accuracy=interim(MOD, "accuracy", "{collection}_{variant}.csv"),
        confusion=interim(MOD, "confusion", "{collection}_{variant}.csv"),
    params:
        k=MOD_CFG["k"],
        ks=MOD_CFG["ks"],
        cv_folds=MOD_CFG["cv_folds"],
        cv_repeats=MOD_CFG["cv_repeats"],
        seed=seed_for(MOD),
        max_distance_change=MOD_CFG["stability"]["max_distance_change"],
    wildcard_constraints:
        variant="|".join(MOD_VARIANTS),
    conda:
        MOD_ENV
    log:
        logs(MOD, "classify_{collection}_{variant}"),
    benchmark:
        bench(MOD, "classify_{collection}_{variant}")
    threads: 1
    script:
        "../../scripts/models_classify.py"


rule models_tables:
    input:
        accuracy=expand(
            interim(MOD, "accuracy", "{collection}_{variant}.csv"),
            collection=MOD_COLLECTIONS,
            variant=list(MOD_VARIANTS),
        ),
        confusion=expand(
            interim(MOD, "confusion", "{collection}_{variant}.csv"),
            collection=MOD_COLLECTIONS,
            variant=list(MOD_VARIANTS),
        ),
    output:
        table2=report(
            results(MOD, "table2.csv"),
            caption="../report/models_table2.rst",
            category="Model distinguishing",
        ),
        table_s5=report(
            results(MOD, "table_s5.csv"),
            caption="../report/models_table_s5.rst",
            category="Model distinguishing",
        ),
        confusion_table=report(
            results(MOD, "confusion_magdiff.csv"),
            caption="../report/models_confusion.rst",
            category="Model distinguishing",
        ),
    params:
        k=MOD_CFG["k"],
        config=MOD_PROVENANCE,
    conda:
        MOD_ENV
    log:
        logs(MOD, "tables"),
    threads: 1
    script:
        "../../scripts/models_tables.py"


# The stability check: each block scored and classified again on embeddings moved at
# the level of their round-off, to show which printed digits are a property of the models.
rule models_stability:
    input:
        embeddings=lambda wildcards: expand(
            interim(MOD, "embeddings", wildcards.collection, "{model}.npy"), model=MOD_MODELS
        ),
    output:
        stability=interim(MOD, "stability", "{collection}_{variant}.csv"),
    params:
        collection=lambda wildcards: wildcards.collection,
        preprocessing=lambda wildcards: MOD_VARIANTS[wildcards.variant]["preprocessing"],
        distance=lambda wildcards: MOD_VARIANTS[wildcards.variant]["distance"],
        models=MOD_MODELS,
        subsample_size=MOD_CFG["subsample_size"],
        n_subsamples=MOD_CFG["n_subsamples"],
        pca_dim=MOD_CFG["pca_dim"],
        pca_rank=MOD_CFG["pca_rank"],
        dcscore_tau=MOD_CFG["dcscore_tau"],
        magnitude=config["magnitude"],
        seed=seed_for(MOD),
        k=MOD_CFG["k"],
        ks=MOD_CFG["ks"],
        cv_folds=MOD_CFG["cv_folds"],
        cv_repeats=MOD_CFG["cv_repeats"],
        perturbations=MOD_CFG["stability"]["perturbations"],
        relative_to_column=MOD_CFG["stability"]["relative_to_column"],
        common_to_column=MOD_CFG["stability"]["common_to_column"],
    wildcard_constraints:
        variant="|".join(MOD_VARIANTS),
    conda:
        MOD_ENV
    log:
        logs(MOD, "stability_{collection}_{variant}"),
    benchmark:
        bench(MOD, "stability_{collection}_{variant}")
    threads: 1
    script:
        "../../scripts/models_stability.py"


rule models_stability_table:
    input:
        accuracy=expand(
            interim(MOD, "accuracy", "{collection}_{variant}.csv"),
            collection=MOD_COLLECTIONS,
            variant=list(MOD_VARIANTS),
        ),
        stability=expand(
            interim(MOD, "stability", "{collection}_{variant}.csv"),
            collection=MOD_COLLECTIONS,
            variant=list(MOD_VARIANTS),
        ),
        table2=results(MOD, "table2.csv"),
    output:
        stability_table=report(
            results(MOD, "stability.csv"),
            caption="../report/models_stability.rst",
            category="Model distinguishing",
        ),
        table2_markdown=report(
            results(MOD, "table2.md"),
            caption="../report/models_stability.rst",
            category="Model distinguishing",
        ),
    params:
        k=MOD_CFG["k"],
        relative_to_column=MOD_CFG["stability"]["relative_to_column"],
        common_to_column=MOD_CFG["stability"]["common_to_column"],
        max_distance_change=MOD_CFG["stability"]["max_distance_change"],
        config=MOD_PROVENANCE,
    conda:
        MOD_ENV
    log:
        logs(MOD, "stability_table"),
    threads: 1
    script:
        "../../scripts/models_stability_table.py"


rule models_figures:
    input:
        scores=expand(
            interim(MOD, "scores", "{collection}_{variant}.npz"),
            collection=MOD_CFG["figure_collection"],
            variant=list(MOD_VARIANTS),
        ),
        confusion=results(MOD, "confusion_magdiff.csv"),
    output:
        functions=report(
            results(MOD, "magnitude_functions.png"),
            caption="../report/models_magnitude_functions.rst",
            category="Model distinguishing",
        ),
        functions_pdf=report(
            results(MOD, "magnitude_functions.pdf"),
            caption="../report/models_magnitude_functions.rst",
            category="Model distinguishing",
        ),
        confusion_figure=report(
            results(MOD, "confusion_magdiff.png"),
            caption="../report/models_confusion.rst",
            category="Model distinguishing",
        ),
        confusion_figure_pdf=report(
            results(MOD, "confusion_magdiff.pdf"),
            caption="../report/models_confusion.rst",
            category="Model distinguishing",
        ),
    params:
        collection=MOD_CFG["figure_collection"],
        variants=list(MOD_VARIANTS),
        k=MOD_CFG["k"],
        config=MOD_PROVENANCE,
    conda:
        MOD_ENV
    log:
        logs(MOD, "figures"),
    threads: 1
    script:
        "../../scripts/models_figures.py"
