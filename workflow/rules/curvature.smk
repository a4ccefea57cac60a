# Curvature experiment (paper §4.1, Table 1, Figure 2): MagArea of unit disks of constant
# curvature predicts the curvature.

CURV = config["curvature"]
CURV_CHUNKS = range(CURV["n_chunks"])
# What the curvature results depend on: recorded in their provenance files. The measures besides
# MagArea are the params of the rules that compute them (CURV_OTHER_MEASURES).
CURV_PROVENANCE = {"seed": config["seed"], "magnitude": config["magnitude"],
                   "curvature": {key: value for key, value in CURV.items() if key != "measures"}}
# The software environment of every rule of this file (--sdm conda).
CURV_ENV = "../../envs/pipeline.yaml"

# Its cross-key constraints, checked before any job runs (common.smk: check_config).
CONFIG_CHECKS["curvature"] = "diversity_core.experiments.curvature"
MEASURE_LISTS["curvature"] = "measures"
# Which rules make Table 1 depends on the list completed by the plugins that fit: checked and
# completed now (check_config does it again, alike, for every section).
check_measures(config)
from diversity_core.experiments.curvature import other_measures  # noqa: E402

CURV_OTHER_MEASURES = other_measures(CURV["measures"])
# Table 1: the MagArea table itself, or with other measures, that table and their rows.
CURV_TABLE1 = report(results("curvature", "table1.csv"), caption="../report/curvature_table1.rst",
                     category="Curvature")
CURV_MAGAREA_TABLE = interim("curvature", "table1_magarea.csv") if CURV_OTHER_MEASURES else \
    CURV_TABLE1

EXPERIMENT_TARGETS["curvature"] = [
    results("curvature", "table1.csv"),
    results("curvature", "figure2.png"),
    results("curvature", "figure2.pdf"),
    results("curvature", "scale_sensitivity.csv"),
    results("curvature", "scale_sensitivity.png"),
    results("curvature", "scale_sensitivity.pdf"),
    results("curvature", "fold_spread.csv"),
]


rule curvature:
    """Target: Table 1 and Figure 2 of the curvature experiment, and the scale-sensitivity
    study of Table 1."""
    input:
        EXPERIMENT_TARGETS["curvature"],


rule curvature_generate:
    """Sample every point cloud (geodesic polar coordinates) and its curvature."""
    output:
        clouds=interim("curvature", "clouds.npz"),
    params:
        n_points=CURV["n_points"],
        curvature_min=CURV["curvature_min"],
        curvature_max=CURV["curvature_max"],
        n_train_curvatures=CURV["n_train_curvatures"],
        clouds_per_curvature=CURV["clouds_per_curvature"],
        n_test_clouds=CURV["n_test_clouds"],
        seed=seed_for("curvature"),
    conda:
        CURV_ENV
    log:
        logs("curvature", "generate"),
    benchmark:
        bench("curvature", "generate")
    script:
        "../../scripts/curvature_generate.py"


rule curvature_convergence:
    """Convergence scale and distance quantiles of every cloud in one chunk."""
    input:
        clouds=rules.curvature_generate.output.clouds,
    output:
        scales=interim("curvature", "scales", "chunk{chunk}.npz"),
    params:
        chunk=lambda w: int(w.chunk),
        n_chunks=CURV["n_chunks"],
        magnitude=config["magnitude"],
        n_quantiles=CURV["distance_quantiles"],
        hyperbolic_distance=CURV["hyperbolic_distance"],
    threads: 1
    conda:
        CURV_ENV
    log:
        logs("curvature", "convergence_chunk{chunk}"),
    benchmark:
        bench("curvature", "convergence_chunk{chunk}")
    script:
        "../../scripts/curvature_convergence.py"


rule curvature_t_cut:
    """Reference-free integration limit: the median convergence scale of all clouds."""
    input:
        scales=expand(rules.curvature_convergence.output.scales, chunk=CURV_CHUNKS),
    output:
        t_cut=interim("curvature", "t_cut.json"),
    conda:
        CURV_ENV
    log:
        logs("curvature", "t_cut"),
    benchmark:
        bench("curvature", "t_cut")
    script:
        "../../scripts/curvature_t_cut.py"


rule curvature_magnitude:
    """MagArea up to t_cut and the magnitude function on a grid, for every cloud in one chunk."""
    input:
        clouds=rules.curvature_generate.output.clouds,
        t_cut=rules.curvature_t_cut.output.t_cut,
    output:
        functions=interim("curvature", "magnitude", "chunk{chunk}.npz"),
    params:
        chunk=lambda w: int(w.chunk),
        n_chunks=CURV["n_chunks"],
        magnitude=config["magnitude"],
        hyperbolic_distance=CURV["hyperbolic_distance"],
    threads: 1
    conda:
        CURV_ENV
    log:
        logs("curvature", "magnitude_chunk{chunk}"),
    benchmark:
        bench("curvature", "magnitude_chunk{chunk}")
    script:
        "../../scripts/curvature_magnitude.py"


rule curvature_table:
    """Table 1: cross-validated MSE of curvature regressed on MagArea (and a baseline)."""
    input:
        clouds=rules.curvature_generate.output.clouds,
        scales=expand(rules.curvature_convergence.output.scales, chunk=CURV_CHUNKS),
        functions=expand(rules.curvature_magnitude.output.functions, chunk=CURV_CHUNKS),
    output:
        features=interim("curvature", "features.csv"),
        table=CURV_MAGAREA_TABLE,
    params:
        cv_folds=CURV["cv_folds"],
        piecewise_knots=CURV["piecewise_knots"],
        quantile=CURV["quantile"],
        seed=seed_for("curvature"),
        config=CURV_PROVENANCE,
    conda:
        CURV_ENV
    log:
        logs("curvature", "table"),
    benchmark:
        bench("curvature", "table")
    script:
        "../../scripts/curvature_table.py"


if CURV_OTHER_MEASURES:

    rule curvature_measures:
        """Every measure of curvature.measures besides MagArea, for every cloud in one chunk."""
        input:
            clouds=rules.curvature_generate.output.clouds,
            t_cut=rules.curvature_t_cut.output.t_cut,
            functions=rules.curvature_magnitude.output.functions,
        output:
            values=interim("curvature", "measures", "chunk{chunk}.npz"),
        params:
            measures=CURV_OTHER_MEASURES,
            chunk=lambda w: int(w.chunk),
            n_chunks=CURV["n_chunks"],
            config=CURV_PROVENANCE,
        threads: 1
        conda:
            CURV_ENV
        log:
            logs("curvature", "measures_chunk{chunk}"),
        benchmark:
            bench("curvature", "measures_chunk{chunk}")
        script:
            "../../scripts/curvature_measures.py"

    rule curvature_measures_table:
        """Table 1: the MagArea table with a row per other measure (the piecewise-linear fit,
        cross-validated alike), before the distance baseline."""
        input:
            clouds=rules.curvature_generate.output.clouds,
            magarea_table=rules.curvature_table.output.table,
            values=expand(rules.curvature_measures.output.values, chunk=CURV_CHUNKS),
        output:
            table=CURV_TABLE1,
        params:
            cv_folds=CURV["cv_folds"],
            piecewise_knots=CURV["piecewise_knots"],
            seed=seed_for("curvature"),
            config=CURV_PROVENANCE,
        conda:
            CURV_ENV
        log:
            logs("curvature", "measures_table"),
        benchmark:
            bench("curvature", "measures_table")
        script:
            "../../scripts/curvature_measures_table.py"


rule curvature_figure:
    """Figure 2: magnitude functions coloured by curvature; MagArea against curvature."""
    input:
        features=rules.curvature_table.output.features,
        functions=expand(rules.curvature_magnitude.output.functions, chunk=CURV_CHUNKS),
    output:
        figure=report(
            results("curvature", "figure2.png"),
            caption="../report/curvature_figure2.rst",
            category="Curvature",
        ),
        figure_pdf=report(
            results("curvature", "figure2.pdf"),
            caption="../report/curvature_figure2.rst",
            category="Curvature",
        ),
    params:
        config=CURV_PROVENANCE,
    conda:
        CURV_ENV
    log:
        logs("curvature", "figure"),
    benchmark:
        bench("curvature", "figure")
    script:
        "../../scripts/curvature_figure.py"


rule curvature_scale_grid:
    """Magnitude of every cloud in one chunk at the scales of the sensitivity study's grid
    (once per cloud: every integration limit of the study is served by these values)."""
    input:
        clouds=rules.curvature_generate.output.clouds,
    output:
        grid=interim("curvature", "scale_grid", "chunk{chunk}.npz"),
    params:
        chunk=lambda w: int(w.chunk),
        n_chunks=CURV["n_chunks"],
        scale_grid=CURV["sensitivity"]["grid"],
    threads: 1
    conda:
        CURV_ENV
    log:
        logs("curvature", "scale_grid_chunk{chunk}"),
    benchmark:
        bench("curvature", "scale_grid_chunk{chunk}")
    script:
        "../../scripts/curvature_scale_grid.py"


rule curvature_sensitivity:
    """Cross-validated MSE of both regressions against the integration limit (fixed t_cut,
    convergence targets, MagArea in t and in log t) for each hyperbolic distance; fold spread
    against the design."""
    input:
        clouds=rules.curvature_generate.output.clouds,
        grid=expand(rules.curvature_scale_grid.output.grid, chunk=CURV_CHUNKS),
        t_cut=rules.curvature_t_cut.output.t_cut,
        features=rules.curvature_table.output.features,
    output:
        sensitivity=report(
            results("curvature", "scale_sensitivity.csv"),
            caption="../report/curvature_sensitivity.rst",
            category="Curvature",
        ),
        spread=report(
            results("curvature", "fold_spread.csv"),
            caption="../report/curvature_fold_spread.rst",
            category="Curvature",
        ),
    params:
        settings_section=CURV["sensitivity"],
        magnitude=config["magnitude"],
        hyperbolic_distance=CURV["hyperbolic_distance"],
        cv_folds=CURV["cv_folds"],
        piecewise_knots=CURV["piecewise_knots"],
        quantile=CURV["quantile"],
        seed=seed_for("curvature"),
        config=CURV_PROVENANCE,
    conda:
        CURV_ENV
    log:
        logs("curvature", "sensitivity"),
    benchmark:
        bench("curvature", "sensitivity")
    script:
        "../../scripts/curvature_sensitivity.py"


rule curvature_sensitivity_figure:
    """MSE against the integration limit, the paper's values as bands, today's default marked."""
    input:
        sensitivity=rules.curvature_sensitivity.output.sensitivity,
    output:
        figure=report(
            results("curvature", "scale_sensitivity.png"),
            caption="../report/curvature_sensitivity.rst",
            category="Curvature",
        ),
        figure_pdf=report(
            results("curvature", "scale_sensitivity.pdf"),
            caption="../report/curvature_sensitivity.rst",
            category="Curvature",
        ),
    params:
        config=CURV_PROVENANCE,
    conda:
        CURV_ENV
    log:
        logs("curvature", "sensitivity_figure"),
    benchmark:
        bench("curvature", "sensitivity_figure")
    script:
        "../../scripts/curvature_sensitivity_figure.py"
