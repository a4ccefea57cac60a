"""Every diversity measure of every response set of one (task, embedding model).

MagArea uses cosine distances up to t_cut, the median convergence scale of all sets of the task
and model (paper §3.4); Vendi Score, AvgSim, GMStds, IsoScore and DCScore are computed from the
same embeddings. Writes SCORES (.csv): one row per set (task, model, prompt_id, temperature,
n_distinct, t_conv, one column per measure) and the t_cut used.
"""

import numpy as np
import pandas as pd
from _helpers import log, run

from diversity_core.data import generation
from diversity_core.experiments import text_temperature as protocol
from diversity_core.settings import MagnitudeSettings


def main(data, embeddings, scores, task, model_name, measures: list = list(protocol.MEASURES),  # noqa: B006,B008
         dc_tau: float = 1.0, magnitude: dict = {}):  # noqa: B006
    """Score the sets of DATA (.jsonl) embedded in EMBEDDINGS (.npz); write SCORES (.csv)."""
    settings = MagnitudeSettings.from_config(magnitude)
    records = generation.read_sets(data)
    with np.load(embeddings) as stored:
        row = {text: i for i, text in enumerate(stored["texts"].tolist())}
        vectors = stored["embeddings"].astype(np.float64)
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
    table.to_csv(scores, index=False, float_format="%.10g")
    log.info("%s / %s: %d sets, t_cut %.4g, %d sets of identical responses", task, model_name,
             len(table), t_cut, int((table["n_distinct"] == 1).sum()))


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
