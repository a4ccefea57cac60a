"""Every CUDA path of the pipeline run for real, each compared with its CPU path.

    python benchmarks/device_check.py                 # on cuda: about 1-3 minutes on one GPU
    python benchmarks/device_check.py --device cpu --tiny   # the CI smoke run (seconds)

Nothing is downloaded and no model file is read: the networks are the real architectures with
random weights, built from their configurations (copied below from the files the pipeline
loads), so that the script and what it needs fit in a few kilobytes and run on a machine
without network. Each check runs the project's own code on ``--device`` and on the CPU and
compares the two:

* ``lm``: SmolLM2-135M-Instruct-shaped ``LlamaForCausalLM``; the text experiment's batched
  sampler (``generate_sets_batch``: left-padded chats, per-row Gumbel streams) and its cache
  key. The sampling noise is drawn on the CPU whatever the device, so both devices sample the
  same token wherever their logits agree; reported: the largest difference of the prompts'
  logits, the share of tokens (and of whole responses) that agree, and whether the noise
  itself agrees bit for bit (it must).
* ``sentences``: an all-mpnet-base-v2-shaped encoder (transformers' MPNet, mean pooling,
  normalisation) loaded through the project's SentenceTransformer encoder; max |Δ| of the unit
  vectors (tolerance 1e-4).
* ``inception``: the FID Inception V3 architecture (random weights) through
  ``embed.inception.embed_images``; max |Δ| relative to the features' largest magnitude
  (tolerance 1e-2: cuDNN convolutions may run in TF32 on Ampere and later GPUs).
* ``magnitude``: the engine's torch path on the device against the NumPy engine (direct
  solver): t_conv, MagArea (the default rule and hermite_d2) and a 200 × 300 batch, relative
  tolerance 1e-9.

Prints one line per check and a summary; exit status 1 if any check is outside its tolerance.
``--json FILE`` also writes the figures.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# SmolLM2-135M-Instruct: the config.json of the dequantised model
# (resources/text/lm/SmolLM2-135M-Instruct, written by dequantise_language_model).
SMOLLM2 = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
               num_attention_heads=9, num_key_value_heads=3, head_dim=64, hidden_act="silu",
               max_position_embeddings=8192, rms_norm_eps=9.999999747378752e-06,
               rope_parameters={"rope_theta": 100000.0, "rope_type": "default"},
               tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=2,
               attention_bias=False, mlp_bias=False)
SMOLLM2_TINY = dict(SMOLLM2, vocab_size=512, hidden_size=64, intermediate_size=128,
                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    head_dim=16)
# all-mpnet-base-v2 (sentence-transformers): its config.json; mean pooling, then normalisation.
MPNET = dict(vocab_size=30527, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
             intermediate_size=3072, max_position_embeddings=514, layer_norm_eps=1e-05,
             relative_attention_num_buckets=32, pad_token_id=1, bos_token_id=0, eos_token_id=2)
MPNET_TINY = dict(MPNET, vocab_size=600, hidden_size=64, num_hidden_layers=2,
                  num_attention_heads=4, intermediate_size=128)

TOLERANCE = {"sentences": 1e-4, "inception": 1e-2, "magnitude": 1e-9, "lm_tokens": 0.9}


# --- the language model ------------------------------------------------------------------------

class _Tokenizer:
    """What the sampler needs of a tokenizer: a chat's ids (hashed words, deterministic) and a
    decoder that names the ids (so that responses can be compared token by token)."""

    eos_token_id = 2

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def apply_chat_template(self, messages, add_generation_prompt=True, return_tensors="pt"):
        import torch

        words = " ".join(m["content"] for m in messages).split()
        ids = [int.from_bytes(hashlib.sha256(w.encode()).digest()[:4], "little")
               % (self.vocab_size - 3) + 3 for w in words]
        return torch.tensor([[1] + ids])

    def batch_decode(self, ids, skip_special_tokens=True):
        return [" ".join(f"t{int(i)}" for i in row if int(i) != self.eos_token_id)
                for row in ids]


def check_lm(device: str, tiny: bool) -> dict:
    import torch
    import transformers

    from diversity_core.language_model import sampling
    from diversity_core.language_model.cache import cache_settings

    config = transformers.LlamaConfig(**(SMOLLM2_TINY if tiny else SMOLLM2))
    torch.manual_seed(0)
    cpu_model = transformers.LlamaForCausalLM(config).eval()
    dev_model = copy.deepcopy(cpu_model).to(device)
    tokenizer = _Tokenizer(config.vocab_size)
    rng = np.random.default_rng(0)
    n_chats, n_responses, new_tokens = (3, 2, 6) if tiny else (14, 10, 32)
    # Chats of 36 to 81 tokens, as the text experiment's decTest sets (one temperature each).
    chats = [[{"role": "user", "content": " ".join(f"w{rng.integers(10**6)}"
                                                    for _ in range(rng.integers(35, 81)))}]
             for _ in range(n_chats)]
    temperatures = np.linspace(0.2, 1.5, n_chats).round(2).tolist()
    prompt_ids = [f"resp:{k}" for k in range(n_chats)]
    ids = tokenizer.apply_chat_template(chats[0])
    with torch.inference_mode():
        logits_cpu = cpu_model(ids).logits
        logits_dev = dev_model(ids.to(device)).logits.cpu()
    logit_diff = float((logits_cpu - logits_dev).abs().max())
    # The noise: the same bits on both devices (drawn on the CPU, moved).
    seeds = [sampling.row_seed(1, "resp:0", 1.0, i) for i in range(4)]
    scores = torch.randn(4, config.vocab_size, generator=torch.Generator().manual_seed(5))
    noise_cpu = sampling.gumbel_temperature_processor([1.0] * 4, seeds, "cpu")(None, scores)
    noise_dev = sampling.gumbel_temperature_processor([1.0] * 4, seeds, device)(
        None, scores.to(device)).cpu()
    times, sets = {}, {}
    for name, model in (("cpu", cpu_model), (device, dev_model)):
        start = time.perf_counter()
        sets[name], _ = sampling.generate_sets_batch(
            model, tokenizer, chats, temperatures, prompt_ids, n_responses=n_responses,
            max_new_tokens=new_tokens, seed=1)
        times[name] = time.perf_counter() - start
    cpu_rows = [r.split() for s in sets["cpu"] for r in s]
    dev_rows = [r.split() for s in sets[device] for r in s]
    total = agree = 0
    for a, b in zip(cpu_rows, dev_rows, strict=True):
        for k in range(max(len(a), len(b))):
            total += 1
            agree += k < len(a) and k < len(b) and a[k] == b[k]
    keys = {name: cache_settings(model=m, n_responses=n_responses, max_new_tokens=new_tokens,
                                 seed=1)["device"] for name, m in (("cpu", cpu_model),
                                                                  (device, dev_model))}
    token_share = agree / max(total, 1)
    return {"check": "lm", "rows": len(cpu_rows), "max_logit_diff": logit_diff,
            "noise_identical": bool(torch.equal(noise_cpu, noise_dev)),
            "tokens_agree": token_share,
            "responses_identical": sum(a == b for a, b in zip(cpu_rows, dev_rows, strict=True))
            / len(cpu_rows),
            "cache_device_keys": keys, "seconds": times,
            "ok": bool(torch.equal(noise_cpu, noise_dev)) and token_share >= TOLERANCE["lm_tokens"]}


# --- the sentence encoder ---------------------------------------------------------------------

def _mpnet_folder(root: Path, tiny: bool) -> Path:
    """An all-mpnet-base-v2-shaped SentenceTransformer folder with random weights."""
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    config = transformers.MPNetConfig(**(MPNET_TINY if tiny else MPNET))
    torch.manual_seed(0)
    transformers.MPNetModel(config).save_pretrained(root / "hf")
    words = ["<s>", "<pad>", "</s>", "[UNK]", "<mask>"]
    words += [f"w{k}" for k in range(config.vocab_size - len(words))]
    transformers.MPNetTokenizer(vocab={w: i for i, w in enumerate(words)}).save_pretrained(
        root / "hf")
    transformer = Transformer(str(root / "hf"), max_seq_length=384)
    pooling = Pooling(transformer.get_embedding_dimension(), "mean")
    SentenceTransformer(modules=[transformer, pooling, Normalize()],
                        device="cpu").save(str(root / "st"))
    return root / "st"


def check_sentences(device: str, tiny: bool) -> dict:
    from diversity_core.device import parse_device
    from diversity_core.embed import sentences

    n_texts, dim = (48, MPNET_TINY["hidden_size"]) if tiny else (512, MPNET["hidden_size"])
    vocab = (MPNET_TINY if tiny else MPNET)["vocab_size"] - 5
    rng = np.random.default_rng(1)
    texts = [" ".join(f"w{k}" for k in rng.integers(vocab, size=rng.integers(20, 41)))
             for _ in range(n_texts)]
    info = sentences.TextModelInfo("sentence_transformers", dim, True, "random all-mpnet-base-v2",
                                   {})
    with tempfile.TemporaryDirectory() as tmp:
        folder = _mpnet_folder(Path(tmp), tiny)
        out, times = {}, {}
        for name in ("cpu", device):
            encoder = sentences._SentenceTransformerEncoder("all-mpnet-base-v2", info, folder,
                                                            parse_device(name))
            start = time.perf_counter()
            out[name] = encoder.encode(texts, batch_size=64, progress=False)
            times[name] = time.perf_counter() - start
    diff = float(np.abs(out["cpu"] - out[device]).max())
    return {"check": "sentences", "texts": n_texts, "shape": list(out[device].shape),
            "max_abs_diff": diff, "tolerance": TOLERANCE["sentences"], "seconds": times,
            "ok": diff <= TOLERANCE["sentences"]}


# --- Inception V3 -------------------------------------------------------------------------------

def _fid_inception(tiny: bool):
    """The FID Inception V3 (the TF graph's layout: pytorch-fid's FIDInceptionA/C/E), random
    weights, (n, 3, 299, 299) in [-1, 1) -> (n, 2048) pool features. ``tiny`` divides every
    width by 8 (and keeps 2048 outputs by a final 1 x 1 convolution)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    k = 8 if tiny else 1

    def c(n):
        return max(1, n // k)

    class Conv(nn.Sequential):
        def __init__(self, i, o, kernel, stride=1, padding=0):
            super().__init__(nn.Conv2d(i, o, kernel, stride, padding, bias=False),
                             nn.BatchNorm2d(o, eps=0.001), nn.ReLU())

    class A(nn.Module):
        def __init__(self, i, pool):
            super().__init__()
            self.b1 = Conv(i, c(64), 1)
            self.b5 = nn.Sequential(Conv(i, c(48), 1), Conv(c(48), c(64), 5, padding=2))
            self.b3 = nn.Sequential(Conv(i, c(64), 1), Conv(c(64), c(96), 3, padding=1),
                                    Conv(c(96), c(96), 3, padding=1))
            self.bp = Conv(i, pool, 1)

        def forward(self, x):
            p = F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)
            return torch.cat([self.b1(x), self.b5(x), self.b3(x), self.bp(p)], 1)

    class B(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.b3 = Conv(i, c(384), 3, stride=2)
            self.bd = nn.Sequential(Conv(i, c(64), 1), Conv(c(64), c(96), 3, padding=1),
                                    Conv(c(96), c(96), 3, stride=2))

        def forward(self, x):
            return torch.cat([self.b3(x), self.bd(x), F.max_pool2d(x, 3, 2)], 1)

    class C(nn.Module):
        def __init__(self, i, m):
            super().__init__()
            self.b1 = Conv(i, c(192), 1)
            self.b7 = nn.Sequential(Conv(i, m, 1), Conv(m, m, (1, 7), padding=(0, 3)),
                                    Conv(m, c(192), (7, 1), padding=(3, 0)))
            self.bd = nn.Sequential(Conv(i, m, 1), Conv(m, m, (7, 1), padding=(3, 0)),
                                    Conv(m, m, (1, 7), padding=(0, 3)),
                                    Conv(m, m, (7, 1), padding=(3, 0)),
                                    Conv(m, c(192), (1, 7), padding=(0, 3)))
            self.bp = Conv(i, c(192), 1)

        def forward(self, x):
            p = F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)
            return torch.cat([self.b1(x), self.b7(x), self.bd(x), self.bp(p)], 1)

    class D(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.b3 = nn.Sequential(Conv(i, c(192), 1), Conv(c(192), c(320), 3, stride=2))
            self.b7 = nn.Sequential(Conv(i, c(192), 1),
                                    Conv(c(192), c(192), (1, 7), padding=(0, 3)),
                                    Conv(c(192), c(192), (7, 1), padding=(3, 0)),
                                    Conv(c(192), c(192), 3, stride=2))

        def forward(self, x):
            return torch.cat([self.b3(x), self.b7(x), F.max_pool2d(x, 3, 2)], 1)

    class E(nn.Module):
        def __init__(self, i, max_pool):
            super().__init__()
            self.max_pool = max_pool  # FID's last block pools by max, the one before by mean
            self.b1 = Conv(i, c(320), 1)
            self.b3 = Conv(i, c(384), 1)
            self.b3a, self.b3b = (Conv(c(384), c(384), (1, 3), padding=(0, 1)),
                                  Conv(c(384), c(384), (3, 1), padding=(1, 0)))
            self.bd = nn.Sequential(Conv(i, c(448), 1), Conv(c(448), c(384), 3, padding=1))
            self.bda, self.bdb = (Conv(c(384), c(384), (1, 3), padding=(0, 1)),
                                  Conv(c(384), c(384), (3, 1), padding=(1, 0)))
            self.bp = Conv(i, c(192), 1)

        def forward(self, x):
            b3, bd = self.b3(x), self.bd(x)
            p = (F.max_pool2d(x, 3, 1, 1) if self.max_pool
                 else F.avg_pool2d(x, 3, 1, 1, count_include_pad=False))
            return torch.cat([self.b1(x), self.b3a(b3), self.b3b(b3), self.bda(bd), self.bdb(bd),
                              self.bp(p)], 1)

    widths_e = c(320) + 4 * c(384) + c(192)
    layers = [Conv(3, c(32), 3, stride=2), Conv(c(32), c(32), 3), Conv(c(32), c(64), 3, padding=1),
              nn.MaxPool2d(3, 2), Conv(c(64), c(80), 1), Conv(c(80), c(192), 3),
              nn.MaxPool2d(3, 2),
              A(c(192), c(32)), A(c(64) + c(64) + c(96) + c(32), c(64)),
              A(c(64) + c(64) + c(96) + c(64), c(64))]
    width = c(64) + c(64) + c(96) + c(64)
    layers += [B(width)]
    width = c(384) + c(96) + width
    layers += [C(width, c(128)), C(4 * c(192), c(160)), C(4 * c(192), c(160)),
               C(4 * c(192), c(192)), D(4 * c(192))]
    width = c(320) + c(192) + 4 * c(192)
    layers += [E(width, False), E(widths_e, True), nn.AdaptiveAvgPool2d(1)]
    if tiny:
        layers += [nn.Conv2d(widths_e, 2048, 1)]
    layers += [nn.Flatten()]
    torch.manual_seed(0)
    net = nn.Sequential(*layers).eval()
    with torch.no_grad():  # running statistics of a trained network's scale, not 0/1
        for module in net.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 1.5)
    return net


def check_inception(device: str, tiny: bool) -> dict:
    from diversity_core.embed.inception import embed_images

    n = 8 if tiny else 64
    images = np.random.default_rng(2).integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    net = _fid_inception(tiny)
    out, times = {}, {}
    for name, model in (("cpu", net), (device, copy.deepcopy(net).to(device))):
        start = time.perf_counter()
        out[name] = embed_images(images, model, batch_size=16 if tiny else 32, device=name,
                                 progress=False)
        times[name] = time.perf_counter() - start
    scale = float(np.abs(out["cpu"]).max()) or 1.0
    diff = float(np.abs(out["cpu"] - out[device]).max()) / scale
    return {"check": "inception", "images": n, "shape": list(out[device].shape),
            "max_rel_diff": diff, "tolerance": TOLERANCE["inception"], "seconds": times,
            "ok": diff <= TOLERANCE["inception"]}


# --- magnitude ---------------------------------------------------------------------------------

def check_magnitude(device: str, tiny: bool) -> dict:
    from diversity_core.magnitude import (
        MagnitudeSpace,
        TorchMagnitudeBatch,
        TorchMagnitudeSpace,
        convergence_scales,
        mag_areas,
        torch_convergence_scales,
        torch_mag_areas,
    )
    from diversity_core.measures.distances import pairwise_distances

    rng = np.random.default_rng(3)
    n, (m, k) = (150, (12, 30)) if tiny else (2000, (200, 300))
    X = rng.normal(size=(n, 16))
    ref = MagnitudeSpace(pairwise_distances(X), solver="direct")
    t_ref = ref.convergence_scale()
    a_ref = ref.mag_area(t_ref)
    start = time.perf_counter()
    space = TorchMagnitudeSpace.from_points(X, device=device)
    t_dev = space.convergence_scale()
    a_dev = space.mag_area(t_dev)
    single = time.perf_counter() - start
    matrices = [pairwise_distances(rng.normal(size=(k, 8))) for _ in range(m)]
    tb_ref = convergence_scales(matrices)
    ab_ref = mag_areas(matrices, float(np.median(tb_ref)))
    start = time.perf_counter()
    batch = TorchMagnitudeBatch(matrices, device=device)
    tb_dev = torch_convergence_scales(batch)
    ab_dev = torch_mag_areas(batch, float(np.median(tb_dev)))
    batched = time.perf_counter() - start
    errors = {"t_conv": abs(t_dev / t_ref - 1), "mag_area": abs(a_dev / a_ref - 1),
              "batch_t_conv": float(np.abs(tb_dev / tb_ref - 1).max()),
              "batch_mag_area": float(np.abs(ab_dev / ab_ref - 1).max())}
    # The second-derivative rule (one more triangular solve per scale on the device).
    errors["mag_area_hermite_d2"] = abs(space.mag_area(t_dev, method="hermite_d2")
                                        / ref.mag_area(t_ref, method="hermite_d2") - 1)
    errors["batch_mag_area_hermite_d2"] = float(np.abs(
        torch_mag_areas(batch, float(np.median(tb_dev)), method="hermite_d2")
        / mag_areas(matrices, float(np.median(tb_ref)), method="hermite_d2") - 1).max())
    return {"check": "magnitude", "points": n, "batch": [m, k], "rel_errors": errors,
            "tolerance": TOLERANCE["magnitude"],
            "seconds": {device: {"single": single, "batch": batched}},
            "ok": max(errors.values()) <= TOLERANCE["magnitude"]}


CHECKS = {"magnitude": check_magnitude, "lm": check_lm, "sentences": check_sentences,
          "inception": check_inception}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument("--tiny", action="store_true",
                        help="small networks and sizes (the CI smoke run, seconds on a CPU)")
    parser.add_argument("--only", nargs="+", choices=sorted(CHECKS), default=list(CHECKS))
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args(argv)
    import torch

    from diversity_core.atomic import atomic_write
    from diversity_core.device import parse_device

    try:
        # The torch device of the name (auto: CUDA when torch sees one): what both sides
        # of every comparison are moved to.
        device = parse_device(args.device, key="--device").torch
    except ValueError as exc:
        print(f"device_check: {exc}", file=sys.stderr)
        return 2
    import transformers

    transformers.logging.disable_progress_bar()  # the random models' saving and loading
    where = torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU"
    print(f"device_check on {device} ({where}), torch {torch.__version__}, "
          f"{'tiny' if args.tiny else 'full'} sizes")
    results = []
    for name in args.only:
        start = time.perf_counter()
        result = CHECKS[name](device, args.tiny)
        result["wall_s"] = round(time.perf_counter() - start, 2)
        results.append(result)
        shown = {k: v for k, v in result.items() if k not in ("check", "ok")}
        print(f"{'ok  ' if result['ok'] else 'FAIL'} {name}: {json.dumps(shown, default=str)}",
              flush=True)
    failed = [r["check"] for r in results if not r["ok"]]
    print("all checks within tolerance" if not failed else f"outside tolerance: {failed}")
    if args.json:
        with atomic_write(args.json) as out:
            out.write(json.dumps({"device": device, "name": where, "tiny": args.tiny,
                                  "results": results}, indent=2, default=str) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
