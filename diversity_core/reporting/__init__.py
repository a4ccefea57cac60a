"""What a reader sees at the end of the pipeline (after stage 4): the paper's claims set beside our
results with a verdict for each (:mod:`.claims`), and the run time of each experiment from
Snakemake's benchmark files (:mod:`.timings`).

Both read result files and return plain data (rows, Markdown text); the rule scripts
``scripts/summary.py`` and ``scripts/timings.py`` write them. The figures' one style is
:mod:`.figure_style`; :mod:`.graph_figures` draws the graph experiment's figures from its tables
(``scripts/graphs_figures.py`` writes them). :mod:`.leaderboard` ranks every measure the
experiments' tables name, test by test (``scripts/leaderboard.py`` writes it).
"""
