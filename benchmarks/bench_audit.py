"""How long the audit takes on a full default run, and what the provenance records cost each rule.

    .venv/bin/python benchmarks/bench_audit.py [--no-manifests] [--keep DIR]

Builds, in a temporary folder, the tree a full run of the default configuration (config.yaml)
leaves: the committed final results as they are, and every interim file and asset at the size
the default configuration gives it (random bytes: SHA-256 costs the same on any content; the
sizes are estimates from the configuration, the model files' from their wheels), job by job in
the workflow's order. Each job's records are written by the real writer, as
``scripts/_job.py: run`` does (inputs hashed before, outputs after, assets by their
``.pins.json`` manifest), and timed: the provenance cost of each rule, set beside each
experiment's CPU time in results/timings.md. Then the tree is audited (``audit``, two hashing
threads, as ``python -m diversity_core audit`` does), and so is the fresh-clone case (the
committed files only).

``--no-manifests``: the assets carry no ``.pins.json`` (before every fetch writes one), so every
job hashes the model folders it reads. The tree takes 2 GB of disk while it runs. The load
average is printed beside the times: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

from diversity_core.provenance import Hasher, Roots, audit, write_records
from diversity_core.provenance.records import entries

REPO = Path(__file__).resolve().parents[1]
KB, MB = 1_000, 1_000_000
BLOCK = os.urandom(1 << 20)

# Assets of the default configuration (resources/): files and sizes in bytes, as fetched.
ASSETS = {
    "fashion_mnist": {"train-images-idx3-ubyte.gz": 26_421_880, "train-labels-idx1-ubyte.gz":
                      29_515, "t10k-images-idx3-ubyte.gz": 4_422_102,
                      "t10k-labels-idx1-ubyte.gz": 5_148},
    "inception": {"fid_inception_v3.pt": 95_628_359},
    "text/lm/gguf": {"SmolLM2-135M-Instruct.Q4_1.gguf": 98 * MB},
    "text/lm/SmolLM2-135M-Instruct": {"model.safetensors": 538 * MB, "config.json": 1 * KB,
                                      "tokenizer.json": 2 * MB},
    **{f"text/models/{name}": {"model.bin": size, "tokenizer.json": 700 * KB,
                               "config.json": 1 * KB}
       for name, size in (("all-mpnet-base-v2", 438 * MB), ("all-MiniLM-L6-v2", 91 * MB),
                          ("paraphrase-MiniLM-L3-v2-onnx", 70 * MB),
                          ("multilingual-e5-small-q4", 70 * MB), ("sre-MiniLM", 91 * MB),
                          ("glove-6B-50d-mean", 80 * MB))},
    **{f"text/corpora/{name}": {"corpus.txt": size}
       for name, size in (("gensim_lee", 100 * KB), ("fortunes", 2 * MB),
                          ("wordnet_glosses", 15 * MB), ("foldoc", 5 * MB),
                          ("jargon", 2 * MB))},
}
SINGLE_FILE_ASSETS = {"inception": "fid_inception_v3.pt"}


def jobs(cfg: dict):
    """(experiment, rule, script, inputs, outputs) of every job of a default run, in order;
    paths are 'results:...', 'resources:...' or 'workdir:...', outputs with their size (None:
    a committed file, copied)."""
    out = []

    def job(experiment, rule, script, inputs, outputs):
        out.append((experiment, rule, script, inputs, outputs))

    r = "results:"
    curv = cfg["curvature"]
    n_clouds = curv["n_train_curvatures"] * curv["clouds_per_curvature"] + curv["n_test_clouds"]
    chunks = range(curv["n_chunks"])
    per_chunk = n_clouds // curv["n_chunks"] + 1
    c = r + "curvature/"
    job("curvature", "curvature_generate", "curvature_generate", {},
        {"clouds": {c + "interim/clouds.npz": n_clouds * curv["n_points"] * 16}})
    for k in chunks:
        job("curvature", "curvature_convergence", "curvature_convergence",
            {"clouds": [c + "interim/clouds.npz"]},
            {"scales": {c + f"interim/scales/chunk{k}.npz": per_chunk * 51 * 8}})
        job("curvature", "curvature_scale_grid", "curvature_scale_grid",
            {"clouds": [c + "interim/clouds.npz"]},
            {"grid": {c + f"interim/scale_grid/chunk{k}.npz": per_chunk * 82 * 8}})
    scales = [c + f"interim/scales/chunk{k}.npz" for k in chunks]
    job("curvature", "curvature_t_cut", "curvature_t_cut", {"scales": scales},
        {"t_cut": {c + "interim/t_cut.json": 200}})
    for k in chunks:
        job("curvature", "curvature_magnitude", "curvature_magnitude",
            {"clouds": [c + "interim/clouds.npz"], "t_cut": [c + "interim/t_cut.json"]},
            {"functions": {c + f"interim/magnitude/chunk{k}.npz": per_chunk * 33 * 8}})
    functions = [c + f"interim/magnitude/chunk{k}.npz" for k in chunks]
    job("curvature", "curvature_table", "curvature_table",
        {"clouds": [c + "interim/clouds.npz"], "scales": scales, "functions": functions},
        {"features": {c + "interim/features.csv": n_clouds * 60}, "table": {c + "table1.csv":
                                                                            None}})
    job("curvature", "curvature_figure", "curvature_figure",
        {"features": [c + "interim/features.csv"], "functions": functions},
        {"figure": {c + "figure2.png": None}, "figure_pdf": {c + "figure2.pdf": None}})
    job("curvature", "curvature_sensitivity", "curvature_sensitivity",
        {"clouds": [c + "interim/clouds.npz"],
         "grid": [c + f"interim/scale_grid/chunk{k}.npz" for k in chunks],
         "t_cut": [c + "interim/t_cut.json"], "features": [c + "interim/features.csv"]},
        {"sensitivity": {c + "scale_sensitivity.csv": None},
         "spread": {c + "fold_spread.csv": None}})
    job("curvature", "curvature_sensitivity_figure", "curvature_sensitivity_figure",
        {"sensitivity": [c + "scale_sensitivity.csv"]},
        {"figure": {c + "scale_sensitivity.png": None},
         "figure_pdf": {c + "scale_sensitivity.pdf": None}})
    job("axioms", "axioms_check", "axioms", {},
        {"table": {r + "axioms/axioms.csv": None},
         "summary": {r + "axioms/axioms_summary.md": None}})

    img = cfg["images"]
    i = r + "images/"
    d = i + f"interim/{img['dataset']}/"
    fashion, model = "resources:fashion_mnist", "resources:inception/fid_inception_v3.pt"
    job("image_mode_dropping", "images_fetch_fashion_mnist", "images_fetch_fashion_mnist", {},
        {"folder": {fashion: "asset"}})
    job("image_mode_dropping", "images_fetch_inception", "images_fetch_inception", {},
        {"model": {model: "asset"}})
    n_img = img["n_reference_per_class"] + img["n_pool_per_class"]
    job("image_mode_dropping", "images_select", "images_select", {"folder": [fashion]},
        {"selection": {d + "selection.npz": 10 * n_img * 8}})
    for k in range(10):
        job("image_mode_dropping", "images_embed", "images_embed",
            {"folder": [fashion], "selection": [d + "selection.npz"], "model": [model]},
            {"embeddings": {d + f"embeddings/class_{k}.npz": n_img * 2048 * 4}})
    embeddings = [d + f"embeddings/class_{k}.npz" for k in range(10)]
    for s in ("sequential", "simultaneous"):
        job("image_mode_dropping", "images_scores", "images_scores", {"embeddings": embeddings},
            {"scores": {d + f"scores_{s}.csv": 120 * KB}, "info": {d + f"reference_{s}.json":
                                                                  300}})
    job("image_mode_dropping", "images_table", "images_table",
        {"scores": [d + f"scores_{s}.csv" for s in ("sequential", "simultaneous")],
         "info": [d + "reference_sequential.json"]},
        {"table": {i + "mode_dropping.csv": None},
         "agreement": {i + "scenario_agreement.csv": None}})
    job("image_mode_dropping", "images_figure", "images_figure",
        {"table": [i + "mode_dropping.csv"], "info": [d + "reference_sequential.json"]},
        {"figure": {i + "figure5.png": None}, "figure_pdf": {i + "figure5.pdf": None}})

    g = r + "graphs/"
    datasets = cfg["graphs"]["datasets"]
    for name in datasets:
        job("graph_mode_collapse", "graphs_prepare", "graphs_prepare", {"downloads": []},
            {"setup": {g + f"interim/{name}/setup.npz": 2 * MB},
             "clusters": {g + f"interim/{name}/clusters.json": 2 * KB}})
        job("graph_mode_collapse", "graphs_evaluate", "graphs_evaluate",
            {"setup": [g + f"interim/{name}/setup.npz"]},
            {"measures": {g + f"interim/{name}/measures.csv": 1800 * KB}})
    measures = [g + f"interim/{name}/measures.csv" for name in datasets]
    job("graph_mode_collapse", "graphs_spearman", "graphs_spearman",
        {"measures": measures, "clusters": [g + f"interim/{n}/clusters.json" for n in datasets]},
        {"spearman": {g + "spearman.csv": None}, "summary": {g + "summary.csv": None}})
    job("graph_mode_collapse", "graphs_figures", "graphs_figures",
        {"spearman": [g + "spearman.csv"], "measures": measures},
        {name: {g + f"{stem}{suffix}": None} for name, stem, suffix in (
            ("figure6", "figure6", ".png"), ("figure6_pdf", "figure6", ".pdf"),
            ("figure_all", "figure_all_datasets", ".png"),
            ("figure_all_pdf", "figure_all_datasets", ".pdf"))})

    text = cfg["text"]
    gen = text["generation"]
    t = r + "text/"
    lm = "resources:text/lm/SmolLM2-135M-Instruct"
    corpora = sorted({*gen["corpora"].values(), gen["common_words"]["corpus"],
                      *cfg["models"]["collections"]})
    for name in corpora:
        job("text_temperature", "text_fetch_corpus", "text_fetch_corpus", {},
            {"folder": {f"resources:text/corpora/{name}": "asset"}})
    for name in sorted({*text["models"], *cfg["models"]["models"]}):
        job("text_temperature", "text_fetch_model", "text_fetch_model", {},
            {"folder": {f"resources:text/models/{name}": "asset"}})
    job("text_temperature", "text_fetch_language_model", "text_fetch_language_model", {},
        {"folder": {lm: "asset"}})
    n_sets = gen["n_prompts"] * len(gen["temperatures"])
    for task in text["tasks"]:
        common = ([f"resources:text/corpora/{gen['common_words']['corpus']}"]
                  if task == "prompt" else [])
        job("text_temperature", "text_prompts", "text_prompts",
            {"corpus": [f"resources:text/corpora/{gen['corpora'][task]}"],
             "common_words": common},
            {"prompts": {t + f"interim/prompts/{task}.json": 5 * KB}})
        for k in range(gen["n_chunks"]):
            job("text_temperature", "text_generate", "text_generate",
                {"prompts": [t + f"interim/prompts/{task}.json"], "model": [lm]},
                {"sets": {t + f"interim/generation/{task}/chunk{k}.jsonl":
                          n_sets // gen["n_chunks"] * gen["responses_per_set"] * 150},
                 "stats": {t + f"interim/generation/{task}/chunk{k}.stats.json": 300}})
        job("text_temperature", "text_data", "text_data",
            {"sets": [t + f"interim/generation/{task}/chunk{k}.jsonl"
                      for k in range(gen["n_chunks"])],
             "stats": [t + f"interim/generation/{task}/chunk{k}.stats.json"
                       for k in range(gen["n_chunks"])]},
            {"data": {t + f"data/{task}.jsonl": None}})
    dims = {"all-mpnet-base-v2": 768, "glove-6B-50d-mean": 50}
    for model in text["models"]:
        for task in text["tasks"]:
            job("text_temperature", "text_embed", "text_embed",
                {"data": [t + f"data/{task}.jsonl"], "model": [f"resources:text/models/{model}"]},
                {"embeddings": {t + f"interim/embeddings/{model}/{task}.npz":
                                n_sets * gen["responses_per_set"] * (dims.get(model, 384) * 4
                                                                     + 150)}})
            job("text_temperature", "text_scores", "text_scores",
                {"data": [t + f"data/{task}.jsonl"],
                 "embeddings": [t + f"interim/embeddings/{model}/{task}.npz"]},
                {"scores": {t + f"interim/scores/{model}/{task}.csv": n_sets * 150}})
    scores = [t + f"interim/scores/{m}/{task}.csv" for m in text["models"]
              for task in text["tasks"]]
    job("text_temperature", "text_r2", "text_r2", {"scores": scores},
        {**{name: {t + f"{name if name != 'r2' else 'r2_scores'}.csv": None}
            for name in ("r2", "ranking", "gains", "spearman")},
         "folds": {t + "interim/r2_folds.csv": 1500 * KB}})
    job("text_temperature", "text_figures", "text_figures",
        {"r2": [t + "r2_scores.csv"], "spearman": [t + "spearman.csv"],
         "scores": [t + f"interim/scores/{text['figure_model']}/{text['figure_task']}.csv"]},
        {f"figure{n}{s}": {t + f"figure{n}.{ext}": None} for n in (3, 4)
         for s, ext in (("", "png"), ("_pdf", "pdf"))})

    mod = cfg["models"]
    m = r + "models/"
    for col in mod["collections"]:
        job("model_distinguishing", "models_documents", "models_documents",
            {"folder": [f"resources:text/corpora/{col}"]},
            {"documents": {m + f"interim/documents/{col}.json": 300 * KB}})
        for model in mod["models"]:
            job("model_distinguishing", "models_embed", "models_embed",
                {"documents": [m + f"interim/documents/{col}.json"],
                 "model_dir": [f"resources:text/models/{model}"]},
                {"embeddings": {m + f"interim/embeddings/{col}/{model}.npy":
                                mod["n_documents"] * dims.get(model, 384) * 4}})
        for variant in mod["variants"]:
            job("model_distinguishing", "models_scores", "models_scores",
                {"embeddings": [m + f"interim/embeddings/{col}/{x}.npy" for x in mod["models"]]},
                {"scores": {m + f"interim/scores/{col}_{variant}.npz": 3500 * KB}})
    all_scores = [m + f"interim/scores/{c}_{v}.npz" for c in mod["collections"]
                  for v in mod["variants"]]
    job("model_distinguishing", "models_classify", "models_classify", {"scores": all_scores},
        {"table2": {m + "table2.csv": None}, "table_s5": {m + "table_s5.csv": None},
         "confusion": {m + "confusion_magdiff.csv": None}})
    job("model_distinguishing", "models_figures", "models_figures",
        {"scores": [m + f"interim/scores/{mod['figure_collection']}_{v}.npz"
                    for v in mod["variants"]], "confusion": [m + "confusion_magdiff.csv"]},
        {"functions": {m + "magnitude_functions.png": None},
         "functions_pdf": {m + "magnitude_functions.pdf": None},
         "confusion_figure": {m + "confusion_magdiff.png": None},
         "confusion_figure_pdf": {m + "confusion_magdiff.pdf": None}})
    finals = [p for *_, outputs in out for files in outputs.values() for p, size in files.items()
              if size is None]
    job("summary", "summary", "summary",
        {"claims": ["workdir:workflow/paper_claims.yaml"], "results": finals},
        {"summary": {r + "summary.md": None}})
    job("summary", "timings", "timings", {"results": finals},
        {"timings": {r + "timings.md": None}})
    return out


def _write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as stream:
        for _ in range(size // len(BLOCK)):
            stream.write(BLOCK)
        stream.write(os.urandom(size % len(BLOCK)))


def _asset(folder: Path, name: str, manifests: bool, hasher: Hasher) -> None:
    files = ASSETS[name]
    for file, size in files.items():
        _write(folder / file, size)
    if manifests:
        pins = {file: {"sha256": hasher.file(folder / file)[0], "pinned": True}
                for file in files}
        (folder / ".pins.json").write_text(json.dumps(
            {"asset": name, "config_key": name, "source": "benchmark", "files": pins}))


def _cpu_seconds() -> dict[str, float]:
    """CPU time per experiment of the committed run (results/timings.md)."""
    out = {}
    for line in (REPO / "results" / "timings.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 7 and cells[1].isdigit():
            out[cells[0]] = sum(float(n) * {"h": 3600, "min": 60, "s": 1}[unit]
                                for n, unit in re.findall(r"([\d.]+) (h|min|s)\b", cells[4]))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-manifests", action="store_true")
    parser.add_argument("--keep", metavar="DIR", help="build the tree here and keep it")
    args = parser.parse_args()
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_audit_"))
    roots = Roots.of(base / "results", base / "resources", REPO)
    prefix = {"results": roots.results, "resources": roots.resources, "workdir": REPO}

    def where(spec: str) -> Path:
        root, _, path = spec.partition(":")
        return prefix[root] / path

    cost = defaultdict(lambda: [0, 0.0, 0])  # experiment -> jobs, seconds, bytes hashed
    worst = (0.0, "")
    try:
        for experiment, rule, script, inputs, outputs in jobs(cfg):
            for files in outputs.values():
                for spec, size in files.items():
                    path = where(spec)
                    if size == "asset":
                        name = spec.partition(":")[2]
                        name = next((a for a in SINGLE_FILE_ASSETS if name.startswith(a)), name)
                        _asset(prefix["resources"] / name, name, not args.no_manifests,
                               Hasher())
                    elif size is None:
                        path.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(REPO / "results" / spec.partition(":")[2], path)
                    else:
                        _write(path, size)
            named_in = {k: [where(s) for s in v] for k, v in inputs.items()}
            named_out = {k: [where(s) for s in v] for k, v in outputs.items()}
            start = time.perf_counter()
            hasher = Hasher()  # one per job, as scripts/_job.py: run
            before = entries(named_in, roots, hasher, pinned_digest=True)
            write_records(named_out, named_in, roots=roots, hasher=hasher, rule=rule,
                          script=REPO / "scripts" / f"{script}.py", input_entries=before)
            seconds = time.perf_counter() - start
            entry = cost[experiment]
            entry[0] += 1
            entry[1] += seconds
            entry[2] += hasher.bytes
            worst = max(worst, (seconds, rule))

        load = os.getloadavg()
        cpu = _cpu_seconds()
        manifests = "without" if args.no_manifests else "with"
        print(f"tree: {base} (assets {manifests} .pins.json manifests)")
        print(f"load average before the audit: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
              f"({os.cpu_count()} cores)\n")
        print("provenance records per experiment (hashing, git state, versions, writing):")
        print(f"  {'experiment':<22} {'jobs':>5} {'hashed':>10} {'records':>9} "
              f"{'CPU of the run':>15} {'share':>7}")
        for experiment, (n, seconds, hashed) in cost.items():
            run_cpu = cpu.get(experiment)
            share = f"{100 * seconds / run_cpu:.2f}%" if run_cpu else "-"
            print(f"  {experiment:<22} {n:>5} {hashed / MB:>8.0f}MB {seconds:>8.2f}s "
                  f"{run_cpu or 0:>14.0f}s {share:>7}")
        total = sum(c[1] for c in cost.values())
        print(f"  {'all':<22} {sum(c[0] for c in cost.values()):>5} "
              f"{sum(c[2] for c in cost.values()) / MB:>8.0f}MB {total:>8.2f}s "
              f"{cpu.get('all', 0):>14.0f}s {100 * total / cpu['all']:>6.2f}%")
        print(f"  the slowest job's records: {worst[1]}, {worst[0]:.2f} s\n")

        size = sum(p.stat().st_size for p in base.rglob("*") if p.is_file())
        start = time.perf_counter()
        report = audit(roots.results, roots.resources, REPO, workers=2)
        seconds = time.perf_counter() - start
        print(f"audit of the whole run: {seconds:.1f} s for {len(report.files)} files "
              f"({report.hashed_bytes / MB:.0f} MB hashed of {size / MB:.0f} MB on disk), "
              f"{len(report.findings)} finding(s); target 30 s")
        clone = base / "clone"
        tracked = subprocess.run(["git", "ls-files", "results"], cwd=REPO, capture_output=True,
                                 text=True, check=True).stdout.split()
        for name in tracked:
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(base / name, clone / name)
            record = Path(str(base / name) + ".provenance.json")
            if record.exists() and not name.endswith(".provenance.json"):
                shutil.copyfile(record, Path(str(clone / name) + ".provenance.json"))
        start = time.perf_counter()
        report = audit(clone / "results", clone / "resources", REPO, workers=2)
        print(f"audit of a fresh clone (the {len(report.files)} committed files): "
              f"{time.perf_counter() - start:.2f} s, {len(report.findings)} finding(s), "
              f"{len(report.not_on_disk)} input(s) not on disk")
        load = os.getloadavg()
        print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
