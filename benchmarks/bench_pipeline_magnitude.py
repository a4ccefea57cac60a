"""The magnitude stages of the text-temperature and model-distinguishing experiments: batched, as
the pipeline runs them, against one set at a time, on the pipeline's own interim files.

Run from the repository root after the two experiments (``snakemake text_temperature
model_distinguishing``), on a quiet machine::

    nice -n 10 .venv/bin/python benchmarks/bench_pipeline_magnitude.py
    #   --collections fortunes,foldoc  --variants raw_cosine,pca_euclidean  --json out.json

For each (task, model) of the text experiment: ``text_temperature.score_sets(sets, settings,
measures=["mag_area"])``, i.e. cosine distances, convergence scales, t_cut and MagAreas of its
sets. For each (collection, variant) of the model experiment: ``summarise_sets`` with the scalar
baselines left out (they are the same either way), i.e. distances, convergence scales, t_cut and
the stored magnitude functions of its 1,200 sets. "One at a time" is the same code with the batch
methods of :class:`~diversity_core.magnitude.settings.MagnitudeSettings` replaced by loops over the
single-space functions (:class:`OneAtATime`). Every file read is first checked against its
provenance record by the project's audit (``diversity_core.provenance.audit``). Both are timed in
CPU seconds (all threads, ``time.process_time``) and wall seconds, with as many BLAS threads as the
rules use (1, the default of ``--threads``), and compared with each other and with what the
pipeline stored (the text scores as their CSV writes them, ``%.10g``; the model functions and
convergence scales bit for bit).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from threadpoolctl import threadpool_limits

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from diversity_core import magnitude as mg  # noqa: E402
from diversity_core.data import text_tasks  # noqa: E402
from diversity_core.experiments import model_distinguishing as md  # noqa: E402
from diversity_core.experiments import text_temperature as tt  # noqa: E402
from diversity_core.magnitude.settings import MagnitudeSettings  # noqa: E402  # noqa: E402
from diversity_core.provenance import audit  # noqa: E402


class OneAtATime(MagnitudeSettings):
    """The settings' batch methods as loops over the single-space functions (the path the two
    experiments took before the batch functions existed)."""

    def convergence_scales(self, spaces, *, errors: str = "raise"):
        return np.array([self.convergence_scale(D) for D in spaces])

    def mag_areas(self, spaces, t_cut, *, errors: str = "raise"):
        return np.array([self.mag_area(D, t_cut) for D in spaces])

    def magnitude_functions(self, spaces, t_cut: float, *, errors: str = "raise"):
        ts = np.linspace(0.0, t_cut, self.n_ts)
        return np.array([mg.magnitude_function(D, ts) for D in spaces]), ts


def _timed(fn, *args, **kwargs):
    mg.clear_cache()
    cpu, wall = time.process_time(), time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.process_time() - cpu, time.perf_counter() - wall


class _AuditedFiles:
    """The results folder's files as the audit found them: a file is read only if its record
    vouches for it (status ``ok``)."""

    def __init__(self, results: Path):
        self.report = audit(results)

    def __call__(self, path: Path) -> Path:
        found = self.report.files.get(self.report.roots.locate(path))
        if found is None or found.status != "ok":
            why = "not on disk or without a record" if found is None else (
                f"{found.status}: {'; '.join(found.reasons)}")
            raise SystemExit(f"{path}: {why}. Rerun the experiment that makes it.")
        return path


def _max_rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    both = np.isfinite(a) & np.isfinite(b)
    scale = np.maximum(np.abs(b[both]), np.finfo(float).tiny)
    return float(np.max(np.abs(a[both] - b[both]) / scale, initial=0.0))


def _as_written(values) -> list[str]:
    return ["" if not np.isfinite(v) else f"{v:.10g}" for v in values]


# --------------------------------------------------------------------------------------------
# Text temperature
# --------------------------------------------------------------------------------------------


def text_sets(checked, results: Path, task: str, model: str) -> list[np.ndarray]:
    """The sets of one (task, model) as scripts/text_scores.py assembles them (its checks too)."""
    records = text_tasks.read_sets(checked(results / "text" / "data" / f"{task}.jsonl"))
    texts = list(dict.fromkeys(r for record in records for r in record["responses"]))
    path = checked(results / "text" / "interim" / "embeddings" / model / f"{task}.npz")
    with np.load(path) as stored:
        if len(texts) != len(stored["texts"]) or not np.array_equal(np.asarray(texts),
                                                                       stored["texts"]):
            raise SystemExit(f"{path} does not hold the responses of the {task} data: rerun the "
                             "text experiment.")
        vectors = stored["embeddings"].astype(np.float64)
    row = {text: i for i, text in enumerate(texts)}
    return [vectors[[row[r] for r in record["responses"]]] for record in records]


def bench_text(checked, results: Path, config: dict) -> list[dict]:
    rows = []
    batched = MagnitudeSettings.from_config(config["magnitude"])
    looped = OneAtATime.from_config(config["magnitude"])
    for task in config["text"]["tasks"]:
        for model in config["text"]["models"]:
            sets = text_sets(checked, results, task, model)
            stored = pd.read_csv(checked(results / "text" / "interim" / "scores" / model
                                         / f"{task}.csv"),
                                 dtype={"mag_area": str, "t_conv": str}, keep_default_na=False)
            out = {"task": task, "model": model, "sets": len(sets)}
            for name, settings in (("batch", batched), ("loop", looped)):
                (scores, _), cpu, wall = _timed(tt.score_sets, sets, settings,
                                                measures=["mag_area"])
                out[name] = {"cpu": cpu, "wall": wall, "mag_area": scores["mag_area"],
                             "t_conv": scores["t_conv"],
                             "as_stored": _as_written(scores["mag_area"])
                             == stored["mag_area"].tolist()
                             and _as_written(scores["t_conv"]) == stored["t_conv"].tolist()}
            out["max_rel"] = max(_max_rel(out["loop"]["mag_area"], out["batch"]["mag_area"]),
                                 _max_rel(out["loop"]["t_conv"], out["batch"]["t_conv"]))
            for name in ("batch", "loop"):
                del out[name]["mag_area"], out[name]["t_conv"]
            rows.append(out)
            _progress(f"text {task} / {model} done")
    return rows


# --------------------------------------------------------------------------------------------
# Model distinguishing
# --------------------------------------------------------------------------------------------


@contextmanager
def _without_scalar_scores():
    """summarise_sets with its scalar baselines left out (the same work on both sides)."""
    original = md.scalar_scores
    md.scalar_scores = lambda X, **options: {}
    try:
        yield
    finally:
        md.scalar_scores = original


def model_sets(checked, results: Path, config: dict, collection: str,
               stored) -> list[np.ndarray]:
    """The subsamples a stored scores file was made from: its own document indices, applied to
    the embeddings preprocessed as scripts/models_scores.py does."""
    cfg = config["models"]
    seed = int(cfg["seed"] if cfg.get("seed") is not None else config["seed"])
    preprocessing = str(stored["preprocessing"])
    size, count = cfg["subsample_size"], cfg["n_subsamples"]
    if stored["subsets"].shape != (len(cfg["models"]) * count, size):
        raise SystemExit(f"{collection}: the stored subsets have shape {stored['subsets'].shape}, "
                         f"not {len(cfg['models']) * count} sets of {size} (the configuration's): "
                         "rerun the model experiment.")
    subsets = stored["subsets"].reshape(len(cfg["models"]), count, size)
    spaces = []
    for model, sets in zip(cfg["models"], subsets, strict=True):
        path = results / "models" / "interim" / "embeddings" / collection / f"{model}.npy"
        X = md.preprocess(np.load(checked(path)), preprocessing, pca_dim=cfg["pca_dim"],
                          rng=md.preprocessing_rng(seed, collection, model))
        spaces.extend(X[s] for s in sets)
    return spaces


def bench_models(checked, results: Path, config: dict, collections, variants) -> list[dict]:
    rows = []
    batched = MagnitudeSettings.from_config(config["magnitude"])
    looped = OneAtATime.from_config(config["magnitude"])
    for collection in collections:
        for variant in variants:
            with np.load(checked(results / "models" / "interim" / "scores"
                                 / f"{collection}_{variant}.npz")) as f:
                stored = {k: f[k] for k in ("subsets", "preprocessing", "metric", "functions",
                                            "t_conv")}
            spaces = model_sets(checked, results, config, collection, stored)
            metric = str(stored["metric"])
            out = {"collection": collection, "variant": variant, "sets": len(spaces)}
            results_by = {}
            with _without_scalar_scores():
                for name, settings in (("batch", batched), ("loop", looped)):
                    summary, cpu, wall = _timed(md.summarise_sets, spaces, settings,
                                                metric=metric)
                    results_by[name] = summary
                    out[name] = {"cpu": cpu, "wall": wall,
                                 "as_stored": bool(
                                     np.array_equal(summary["functions"], stored["functions"])
                                     and np.array_equal(summary["t_conv"], stored["t_conv"]))}
            out["max_rel"] = max(
                _max_rel(results_by["loop"]["functions"], results_by["batch"]["functions"]),
                _max_rel(results_by["loop"]["t_conv"], results_by["batch"]["t_conv"]))
            rows.append(out)
            _progress(f"models {collection} / {variant} done")
    return rows


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def _progress(msg: str) -> None:
    print(f"# {msg}", file=sys.stderr, flush=True)


def print_report(report: dict) -> None:
    print(f"\nLoad average at start {report['load'][0]:.1f}, at end {report['load'][1]:.1f}; "
          f"BLAS threads {report['threads']}; {os.cpu_count()} CPU cores.")
    for title, key, label in (("Text temperature", "text", ("task", "model")),
                              ("Model distinguishing", "models", ("collection", "variant"))):
        rows = report.get(key) or []
        if not rows:
            continue
        print(f"\n### {title}: magnitude stage, batched against one set at a time\n")
        print(f"| {label[0]} | {label[1]} | sets | batch CPU (s) | loop CPU (s) | CPU ratio "
              "| batch wall (s) | loop wall (s) | batch = stored | loop = stored | "
              "loop vs batch (max rel.) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            b, lo = r["batch"], r["loop"]
            print(f"| {r[label[0]]} | {r[label[1]]} | {r['sets']:,} | {b['cpu']:.2f} | "
                  f"{lo['cpu']:.2f} | {lo['cpu'] / b['cpu']:.1f}× | {b['wall']:.2f} | "
                  f"{lo['wall']:.2f} | {'yes' if b['as_stored'] else 'no'} | "
                  f"{'yes' if lo['as_stored'] else 'no'} | {r['max_rel']:.1e} |")
        cpu_b = sum(r["batch"]["cpu"] for r in rows)
        cpu_l = sum(r["loop"]["cpu"] for r in rows)
        print(f"| all | | {sum(r['sets'] for r in rows):,} | {cpu_b:.1f} | {cpu_l:.1f} | "
              f"{cpu_l / cpu_b:.1f}× | | | | | |")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=str(REPO / "results"),
                        help="the results folder the experiments wrote (default: results/)")
    parser.add_argument("--config", default=str(REPO / "config.yaml"))
    parser.add_argument("--collections", help="model experiment: comma-separated (default: all)")
    parser.add_argument("--variants", help="model experiment: comma-separated "
                        "<preprocessing>_<distance> (default: all)")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS threads (default 1: the two scoring rules run with threads: 1, "
                        "and results are bitwise the stored ones only at the rules' count)")
    parser.add_argument("--no-text", action="store_true")
    parser.add_argument("--no-models", action="store_true")
    parser.add_argument("--json", help="write all figures to this JSON file")
    args = parser.parse_args(argv)
    config = yaml.safe_load(Path(args.config).read_text())
    results = Path(args.results)
    collections = (args.collections.split(",") if args.collections
                   else config["models"]["collections"])
    variants = (args.variants.split(",") if args.variants
                else [f"{v['preprocessing']}_{v['distance']}"
                      for v in config["models"]["variants"]])
    checked = _AuditedFiles(results)
    report = {"load": [os.getloadavg()[0]], "threads": args.threads}
    with threadpool_limits(args.threads):
        if not args.no_text:
            report["text"] = bench_text(checked, results, config)
        if not args.no_models:
            report["models"] = bench_models(checked, results, config, collections, variants)
    report["load"].append(os.getloadavg()[0])
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
