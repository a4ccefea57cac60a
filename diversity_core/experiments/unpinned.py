"""The assets a pipeline configuration selects that are not pinned (strict mode's list).

Which configuration section selects which asset is the pipeline's knowledge: the image dataset
and network, the graph data sets that are fetched, the text experiment's data, language model,
corpora and sentence models, the model experiment's collections and models. Each asset's pins
are judged by :mod:`diversity_core.assets.pins`; this module only walks the configuration (it
sits above :mod:`diversity_core.data` and :mod:`diversity_core.embed`, whose tables hold the
packaged pins, so that the asset room below them imports neither). The workflow calls it before
any job runs when ``strict_assets: true`` (``workflow/rules/common.smk``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..assets.pins import (
    corpus_pin_problems,
    download_problems,
    requirement_problems,
    text_model_pin_problems,
)
from ..data.text import corpus_pins
from ..embed.sentences import text_model_pins

__all__ = ["unpinned_assets"]


def unpinned_assets(config: Mapping) -> list[tuple[str, str, str]]:
    """(asset, configuration key, what is not pinned) for every asset that a pipeline
    configuration selects and that is not pinned; empty when every one is.

    Every section is looked at, whichever experiments run: strict mode refuses a configuration
    that names an unpinned asset anywhere.
    """
    found = []

    def add(asset, key, problems):
        found.extend((asset, key, problem) for problem in problems)

    images = config["images"]
    if images["dataset"] == "fashion_mnist":
        section = images["fashion_mnist"]
        add("Fashion-MNIST", "images.fashion_mnist",
            [f"{key} is empty" for key in ("version", "deb_sha256", "file_sha256")
             if not section.get(key)])
    else:
        add("CIFAR-10", "images.cifar10", download_problems(images["cifar10"], ("sha256", "md5")))
    inception = images["inception"]
    add("the FID Inception V3 weights", "images.inception",
        requirement_problems(inception["requirement"], inception.get("wheel_sha256"),
                             "images.inception.requirement")
        + ([] if inception.get("sha256") else ["sha256 is empty"]))

    graphs = config["graphs"]
    for name, asset in (("proteins", "TU DD"), ("ego", "the Planetoid Citeseer graph")):
        if name in graphs["datasets"]:
            add(asset, f"graphs.{name}", download_problems(graphs[name], ("sha256",)))
    if "zinc" in graphs["datasets"]:
        zinc = graphs["zinc"]
        add("the ZINC molecules of MOSES", "graphs.zinc",
            requirement_problems(zinc["requirement"], zinc.get("wheel_sha256"),
                                 "graphs.zinc.requirement"))

    text = config["text"]
    corpora = set(config["models"]["collections"])
    if text["data"] == "generated":
        generation = text["generation"]
        model = generation["language_model"]
        add("SmolLM2-135M-Instruct", "text.generation.language_model",
            requirement_problems(model["requirement"], model.get("wheel_sha256"),
                                 "text.generation.language_model.requirement")
            + ([] if model.get("sha256") else ["sha256 is empty"]))
        corpora |= set(generation["corpora"].values()) | {generation["common_words"]["corpus"]}
        if text["design"] == "dectest":
            corpora.add(generation["dectest"]["dictionary"])
    else:
        add("Tevet & Berant's release", "text.tevet_berant",
            download_problems(text["tevet_berant"], ("sha256",)))
    overrides = config.get("text_assets", {})
    for name in sorted(corpora):
        pins = corpus_pins(name, overrides.get("corpora", {}).get(name))
        add(f"corpus {name}", f"text_assets.corpora.{name}", corpus_pin_problems(pins))
    for name in sorted(set(text["models"]) | set(config["models"]["models"])):
        pins = text_model_pins(name, overrides.get("models", {}).get(name))
        add(f"text model {name}", f"text_assets.models.{name}", text_model_pin_problems(pins))
    return found
