# Axioms of diversity (paper §3.1 and Appendix C): which measures satisfy effective size,
# monotonicity in observations, the twin property and multi-scale, with the counterexamples found.

AXIOMS_CFG = config["axioms"]
# What the axiom table depends on: recorded in its provenance file.
AXIOMS_PROVENANCE = {"seed": config["seed"], "magnitude": config["magnitude"], "axioms": AXIOMS_CFG}

EXPERIMENT_TARGETS["axioms"] = [
    results("axioms", "axioms.csv"),
    results("axioms", "axioms_summary.md"),
]


rule axioms:
    """Target: the measure x axiom table (holds / fails, with counterexamples)."""
    input:
        EXPERIMENT_TARGETS["axioms"],


rule axioms_check:
    """Evaluate every measure on the seeded counterexample point sets of each axiom."""
    output:
        table=report(
            results("axioms", "axioms.csv"),
            caption="../report/axioms_table.rst",
            category="Axioms",
        ),
        summary=report(
            results("axioms", "axioms_summary.md"),
            caption="../report/axioms_summary.rst",
            category="Axioms",
        ),
    params:
        seed=seed_for("axioms"),
        config=AXIOMS_PROVENANCE,
    conda:
        "../../envs/pipeline.yaml"
    threads: 1
    log:
        logs("axioms", "check"),
    benchmark:
        bench("axioms", "check")
    script:
        "../../scripts/axioms.py"
