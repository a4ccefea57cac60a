"""Every diversity measure of every response set of one (task, embedding model).

MagArea uses cosine distances up to t_cut, the median convergence scale of all sets of the task
and model (paper §3.4); Vendi Score, AvgSim, GMStds (of the model's vectors and of the
L2-normalised ones), IsoScore and DCScore are computed from the same embeddings. Writes SCORES
(.csv): one row per set (task, model, prompt_id, temperature, n_distinct, t_conv, one column per
measure) and the t_cut used.
"""

import numpy as np
import pandas as pd
from _contract import Input, Output
from _job import log, run

from diversity_core.atomic import atomic_path
from diversity_core.data import text_tasks
from diversity_core.experiments import stability
from diversity_core.experiments import text_temperature as protocol
from diversity_core.magnitude.settings import MagnitudeSettings


def main(data: Input, embeddings: Input, scores: Output, task: str, model_name: str,
         measures: list, dc_tau: float, magnitude: dict, perturbation: dict | None):
    """Score the sets of DATA (.jsonl) embedded in EMBEDDINGS (.npz); write SCORES (.csv).
    PERTURBATION: None, or (the stability check, rule text_stability_scores) ``index``,
    ``relative_to_column``, ``common_to_column`` and ``seed`` of one perturbed run (every
    embedding value moved by the first fraction of its dimension's root mean square, every
    dimension shifted by the second, ``stability.perturb``)."""
    settings = MagnitudeSettings.from_config(magnitude)
    records = text_tasks.read_sets(data)
    # The distinct responses in the order text_embed.py stored them. They are matched by
    # position, not looked up by the stored strings: NumPy's fixed-width strings drop trailing
    # NUL characters, which SmolLM2 does generate now and then.
    texts = list(dict.fromkeys(r for record in records for r in record["responses"]))
    with np.load(embeddings) as stored:
        if len(texts) != len(stored["texts"]) or not np.array_equal(np.asarray(texts),
                                                                       stored["texts"]):
            raise ValueError(f"{embeddings} does not hold the responses of {data}: rerun its "
                             "embedding rule.")
        vectors = stored["embeddings"]
    if perturbation is not None:
        rng = stability.perturbation_rng(perturbation["seed"], task, model_name,
                                         perturbation["index"])
        vectors = stability.perturb(vectors, perturbation["relative_to_column"], rng,
                                    common_to_column=perturbation["common_to_column"])
    vectors = vectors.astype(np.float64)
    row = {text: i for i, text in enumerate(texts)}
    sets = [vectors[[row[r] for r in record["responses"]]] for record in records]
    values, t_cut = protocol.score_sets(sets, settings, measures=measures, dc_tau=dc_tau)
    table = pd.DataFrame({
        "task": task,
        "model": model_name,
        "prompt_id": [r["prompt_id"] for r in records],
        "temperature": [float(r["temperature"]) for r in records],
        "n_distinct": [len(set(r["responses"])) for r in records],
        "t_conv": values["t_conv"],
        **{m: values[m] for m in measures},
    })
    table["t_cut"] = t_cut
    with atomic_path(scores) as tmp:
        table.to_csv(tmp, index=False, float_format="%.10g")
    log.info("%s / %s: %d sets, t_cut %.4g, %d sets of identical responses", task, model_name,
             len(table), t_cut, int((table["n_distinct"] == 1).sum()))


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
