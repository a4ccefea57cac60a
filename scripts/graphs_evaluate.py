"""Every measure at every perturbation step of one dataset, for each random GIN architecture."""

import numpy as np
import pandas as pd
from _contract import Input, Output
from _job import log, run
from tqdm import tqdm

from diversity_core import MagnitudeSettings
from diversity_core.atomic import atomic_path
from diversity_core.data.graphs import graphs_from_arrays
from diversity_core.embed.gin import draw_architectures
from diversity_core.experiments.graph_mode_collapse import EXPERIMENTS, evaluate_architecture


def main(setup: Input, measures: Output, dataset: str, seed: int, magnitude: dict,
         n_architectures: int, layers: list, hidden: list, mlp_layers: int, k: int):
    """Embed, standardise on the reference half, and score both sweeps; a long table of values.
    MAGNITUDE: the configuration's ``magnitude`` section (JSON)."""
    settings = MagnitudeSettings.from_config(magnitude)
    data = np.load(setup)
    graphs = graphs_from_arrays(data["n_nodes"], data["edge_ptr"], data["edges"])
    sweeps = {e: (data[f"{e}_p"], list(data[f"{e}_sets"])) for e in EXPERIMENTS}
    # The same architectures for every dataset: they depend on the experiment seed only.
    archs = draw_architectures(n_architectures, layers, hidden, seed)
    rows = []
    for arch in tqdm(archs, desc=f"{dataset}: architectures", mininterval=5):
        rows += evaluate_architecture(
            graphs, data["reference_idx"], data["perturbed_idx"], sweeps, arch,
            mlp_layers=mlp_layers, k=k, settings=settings)
    table = pd.DataFrame(rows)
    table.insert(0, "dataset", dataset)
    table["n_clusters"] = len(data["exemplars"])
    with atomic_path(measures) as tmp:
        table.to_csv(tmp, index=False, float_format="%.10g")
    log.info("%s: %d values", dataset, len(table))


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
