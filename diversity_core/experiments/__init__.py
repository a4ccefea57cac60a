"""Stage 4 of the pipeline: the protocol of each experiment of the paper (§4).

One module per experiment, named after its Snakemake target: how sets are drawn or perturbed,
which measures are computed on them, and how they are summarised. Data come from
:mod:`diversity_core.data`, embeddings from :mod:`diversity_core.embed`, and every measure from
the engine and the measures (:mod:`diversity_core.magnitude`, :mod:`diversity_core.measures`).
:mod:`.chunks` splits an experiment's items among its parallel jobs.
"""
