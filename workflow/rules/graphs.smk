# Graph mode collapse and mode dropping (paper §4.5, Figure 6): experiment `graph_mode_collapse`,
# files in results/graphs/.
#
# (fetch ZINC's SMILES from the molsets wheel / download DD, Citeseer) -> prepare one dataset
# (graphs, halves, clusters, perturbed index sets) -> evaluate every measure for every GIN
# architecture -> Spearman table with bootstrap intervals -> figures.

GRAPH = "graphs"
GRAPH_CFG = config[GRAPH]
GRAPH_DATASETS = list(GRAPH_CFG["datasets"])
GRAPH_RESOURCES = RESOURCES / "graphs"
# The files each fetched dataset's rule brings into resources/graphs/ (with its .pins.json).
GRAPH_DOWNLOADS = {
    "proteins": [str(GRAPH_RESOURCES / "DD" / "DD_A.txt"),
                 str(GRAPH_RESOURCES / "DD" / "DD_graph_indicator.txt")],
    "ego": [str(GRAPH_RESOURCES / "citeseer" / "ind.citeseer.graph")],
    "zinc": [str(GRAPH_RESOURCES / "zinc" / Path(GRAPH_CFG["zinc"]["member"]).name)],
}
GRAPH_PROVENANCE = {key: config[key] for key in ("seed", "magnitude", GRAPH)}
# The software environment of every rule of this file (--sdm conda).
GRAPH_ENV = "../../envs/torch.yaml"

# Its cross-key constraints, checked before any job runs (common.smk: check_config).
CONFIG_CHECKS["graphs"] = "diversity_core.experiments.graph_mode_collapse"

EXPERIMENT_TARGETS["graph_mode_collapse"] = [
    results(GRAPH, "spearman.csv"),
    results(GRAPH, "summary.csv"),
    results(GRAPH, "figure6.png"),
    results(GRAPH, "figure6.pdf"),
    results(GRAPH, "figure_all_datasets.png"),
    results(GRAPH, "figure_all_datasets.pdf"),
    results(GRAPH, "figure_intervals.png"),
    results(GRAPH, "figure_intervals.pdf"),
]


rule graph_mode_collapse:
    input:
        EXPERIMENT_TARGETS["graph_mode_collapse"],


rule graphs_fetch_zinc:
    """ZINC molecules: MOSES' test SMILES out of the molsets wheel (pinned wheel and file)."""
    output:
        files=GRAPH_DOWNLOADS["zinc"],
    params:
        source="zinc",
        pins=GRAPH_CFG["zinc"],
        # resources/graphs: the folder above the dataset's own (from the output, for the linter)
        resources_dir=lambda wildcards, output: str(Path(output.files[0]).parent.parent),
    conda:
        GRAPH_ENV
    log:
        logs(GRAPH, "fetch_zinc"),
    benchmark:
        bench(GRAPH, "fetch_zinc")
    threads: 1
    script:
        "../../scripts/graphs_download.py"


rule graphs_download_proteins:
    """TU DD ("Proteins"), downloaded and unpacked; checksummed if graphs.proteins.sha256 is set."""
    output:
        files=GRAPH_DOWNLOADS["proteins"],
    params:
        source="proteins",
        pins=GRAPH_CFG["proteins"],
        resources_dir=lambda wildcards, output: str(Path(output.files[0]).parent.parent),
    conda:
        GRAPH_ENV
    log:
        logs(GRAPH, "download_proteins"),
    benchmark:
        bench(GRAPH, "download_proteins")
    threads: 1
    script:
        "../../scripts/graphs_download.py"


rule graphs_download_ego:
    """Planetoid's Citeseer adjacency (for "Ego"), SHA-256 verified."""
    output:
        files=GRAPH_DOWNLOADS["ego"],
    params:
        source="ego",
        pins=GRAPH_CFG["ego"],
        resources_dir=lambda wildcards, output: str(Path(output.files[0]).parent.parent),
    conda:
        GRAPH_ENV
    log:
        logs(GRAPH, "download_ego"),
    benchmark:
        bench(GRAPH, "download_ego")
    threads: 1
    script:
        "../../scripts/graphs_download.py"


rule graphs_prepare:
    """Graphs of one dataset, its halves, clusters and the perturbed index sets of both sweeps."""
    input:
        downloads=lambda wildcards: GRAPH_DOWNLOADS.get(wildcards.dataset, []),
    output:
        setup=interim(GRAPH, "{dataset}", "setup.npz"),
        clusters=interim(GRAPH, "{dataset}", "clusters.json"),
    params:
        dataset=lambda wildcards: wildcards.dataset,
        options=lambda wildcards: GRAPH_CFG[wildcards.dataset],
        seed=seed_for(GRAPH),
        sweep=GRAPH_CFG["sweep"],
        p_step=GRAPH_CFG["p_step"],
        wl_iterations=GRAPH_CFG["wl_iterations"],
        ap_damping=GRAPH_CFG["ap_damping"],
        ap_max_iter=GRAPH_CFG["ap_max_iter"],
        resources_dir=str(GRAPH_RESOURCES),
    wildcard_constraints:
        dataset="|".join(GRAPH_DATASETS),
    conda:
        GRAPH_ENV
    log:
        logs(GRAPH, "prepare_{dataset}"),
    benchmark:
        bench(GRAPH, "prepare_{dataset}")
    threads: 1
    script:
        "../../scripts/graphs_prepare.py"


rule graphs_evaluate:
    """Every measure at every perturbation step, for every random GIN architecture."""
    input:
        setup=interim(GRAPH, "{dataset}", "setup.npz"),
    output:
        measures=interim(GRAPH, "{dataset}", "measures.csv"),
    params:
        dataset=lambda wildcards: wildcards.dataset,
        seed=seed_for(GRAPH),
        n_architectures=GRAPH_CFG["n_architectures"],
        layers=GRAPH_CFG["layers"],
        hidden=GRAPH_CFG["hidden"],
        mlp_layers=GRAPH_CFG["mlp_layers"],
        k=GRAPH_CFG["k"],
        magnitude=config["magnitude"],
    wildcard_constraints:
        dataset="|".join(GRAPH_DATASETS),
    conda:
        GRAPH_ENV
    log:
        logs(GRAPH, "evaluate_{dataset}"),
    benchmark:
        bench(GRAPH, "evaluate_{dataset}")
    threads: 1
    script:
        "../../scripts/graphs_evaluate.py"


rule graphs_spearman:
    """Spearman's rho of each measure with p, per architecture; summary per dataset with bootstrap
    intervals of the mean rho and of each measure's gap to MagDiff."""
    input:
        measures=expand(interim(GRAPH, "{dataset}", "measures.csv"), dataset=GRAPH_DATASETS),
        clusters=expand(interim(GRAPH, "{dataset}", "clusters.json"), dataset=GRAPH_DATASETS),
    output:
        spearman=report(
            results(GRAPH, "spearman.csv"),
            caption="../report/graphs_spearman.rst",
            category="Graph mode collapse",
        ),
        summary=report(
            results(GRAPH, "summary.csv"),
            caption="../report/graphs_summary.rst",
            category="Graph mode collapse",
        ),
    params:
        seed=seed_for(GRAPH),
        n_bootstrap=GRAPH_CFG["n_bootstrap"],
        ci_level=GRAPH_CFG["ci_level"],
        config=GRAPH_PROVENANCE,
    conda:
        GRAPH_ENV
    log:
        logs(GRAPH, "spearman"),
    benchmark:
        bench(GRAPH, "spearman")
    threads: 1
    script:
        "../../scripts/graphs_spearman.py"


rule graphs_figures:
    """Figure 6 (one dataset), the same over all datasets, the leading measures' intervals."""
    input:
        spearman=results(GRAPH, "spearman.csv"),
        summary=results(GRAPH, "summary.csv"),
        measures=expand(interim(GRAPH, "{dataset}", "measures.csv"), dataset=GRAPH_DATASETS),
    output:
        figure6=report(
            results(GRAPH, "figure6.png"),
            caption="../report/graphs_figure6.rst",
            category="Graph mode collapse",
        ),
        figure6_pdf=report(
            results(GRAPH, "figure6.pdf"),
            caption="../report/graphs_figure6.rst",
            category="Graph mode collapse",
        ),
        figure_all=report(
            results(GRAPH, "figure_all_datasets.png"),
            caption="../report/graphs_figure_all_datasets.rst",
            category="Graph mode collapse",
        ),
        figure_all_pdf=report(
            results(GRAPH, "figure_all_datasets.pdf"),
            caption="../report/graphs_figure_all_datasets.rst",
            category="Graph mode collapse",
        ),
        figure_intervals=report(
            results(GRAPH, "figure_intervals.png"),
            caption="../report/graphs_figure_intervals.rst",
            category="Graph mode collapse",
        ),
        figure_intervals_pdf=report(
            results(GRAPH, "figure_intervals.pdf"),
            caption="../report/graphs_figure_intervals.rst",
            category="Graph mode collapse",
        ),
    params:
        figure_dataset=GRAPH_CFG["figure_dataset"],
        ci_level=GRAPH_CFG["ci_level"],
        config=GRAPH_PROVENANCE,
    conda:
        GRAPH_ENV
    log:
        logs(GRAPH, "figures"),
    benchmark:
        bench(GRAPH, "figures")
    threads: 1
    script:
        "../../scripts/graphs_figures.py"
