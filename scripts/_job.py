"""Running a rule's job: ``main`` called with the rule's files and params, then the provenance
records of what it wrote.

A rule script defines ``main(...)`` (its contract with the rule: :mod:`_contract`) and ends
with::

    if __name__ == "__main__":
        run(main, globals().get("snakemake"))

:func:`run` sends log output (and tqdm progress) to the rule's ``log:`` file and limits BLAS
threads to the rule's ``threads`` (:mod:`_environment`), checks the rule against ``main``
(:func:`_contract.bind`), checks that every ``.npz``, ``.npy`` and ``.json`` input is intact
(:func:`diversity_core.provenance.intact.check_intact`), hashes the inputs (what the script is
about to read) and, once ``main`` has returned, writes a provenance record beside every output
(:mod:`diversity_core.provenance.records`: the SHA-256 of every input, output and of the
script, rule, params, configuration, git state, versions, and the files of the measure plugins
that took part: :mod:`diversity_core.measures.registry`). Records of the outputs are removed
before ``main`` runs and again if it fails, so a record exists only beside an output that was
written. ``main`` may return a mapping of facts worth recording (counts, checks): they go into
the records' ``extra``. Outside Snakemake, ``main``'s arguments come from the command line
(:mod:`_command_line`), and the outputs get their records as under Snakemake, with
``rule: null``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

from _command_line import parse_cli
from _contract import RECORDED_ONLY, REPO_ROOT, ContractError, as_list, bind, roles, script_path
from _environment import logging_to, thread_limit

# Rule scripts use diversity_core from this checkout, installed or not (a conda environment made
# by `--sdm conda` holds only the third-party packages).
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from diversity_core.measures.registry import plugin_files, register_plugins  # noqa: E402
from diversity_core.provenance.digests import Hasher  # noqa: E402
from diversity_core.provenance.intact import check_intact  # noqa: E402
from diversity_core.provenance.records import (  # noqa: E402
    Roots,
    entries,
    remove_records,
    write_records,
)

log = logging.getLogger("diversity_pipeline")


def run(main, smk=None) -> None:
    """Call ``main`` with the rule's files and params (Snakemake) or from the command line; then
    write the provenance records of its outputs."""
    script = script_path(main, smk)
    if smk is None:
        kwargs = parse_cli(main)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        roots = Roots.of(REPO_ROOT / "results", REPO_ROOT / "resources", REPO_ROOT)
        _run_and_record(main, kwargs, script=script, roots=roots, rule=None, config=None,
                        wildcards=None)
        return
    rule = getattr(smk, "rule", None)
    log_file = smk.log[0] if len(smk.log) else None
    # The configuration's measure plugins (checked when it was read) join the registry.
    register_plugins((smk.config.get("measures") or {}).get("plugins") or ())
    with logging_to(log_file), thread_limit(smk.threads):
        try:
            kwargs = bind(main, smk, rule=rule, script=script)
        except ContractError:
            log.exception("rule failed")
            remove_records(str(path) for path in smk.output)  # no record without its output
            raise
        config = dict(smk.params.items()).get(RECORDED_ONLY)
        roots = Roots.of(smk.config["results_dir"], smk.config["resources_dir"], os.getcwd())
        _run_and_record(main, kwargs, script=script, roots=roots, rule=rule, config=config,
                        wildcards=dict(smk.wildcards.items()))


def _run_and_record(main, kwargs, *, script, roots, rule, config, wildcards) -> None:
    main_roles = roles(main)
    files = {group: {name: as_list(kwargs[name]) for name, role in main_roles.items()
                     if role.group == group and name in kwargs} for group in ("input", "output")}
    outputs = [path for paths in files["output"].values() for path in paths]
    params = {name: value for name, value in kwargs.items() if name not in main_roles}
    try:
        remove_records(outputs)
        inputs = [path for paths in files["input"].values() for path in paths]
        check_intact(inputs)
        hasher = Hasher()
        # What the script is about to read; assets under resources/ by their pinned digest.
        input_entries = entries(files["input"], roots, hasher, pinned_digest=True)
        _INPUT_DIGESTS.clear()
        _INPUT_DIGESTS.update({os.path.abspath(path): entry["sha256"]
                               for name, paths in files["input"].items()
                               for path, entry in zip(paths, input_entries[name], strict=True)})
        extra = main(**kwargs)
        if extra is not None and not isinstance(extra, Mapping):
            raise TypeError(f"{script.name}: main returned {type(extra).__name__}; it returns "
                            "None or a mapping of facts for the provenance records.")
        written = write_records(files["output"], files["input"], roots=roots, hasher=hasher,
                                rule=rule, script=script, params=params, config=config,
                                wildcards=wildcards, extra=dict(extra or {}),
                                input_entries=input_entries, measures=plugin_files())
    except Exception:
        log.exception("rule failed")
        remove_records(outputs)  # Snakemake removes the outputs; their records go too
        raise
    log.info("provenance: %d record(s); hashed %d file(s), %.1f MB, in %.2f s", len(written),
             hasher.files, hasher.bytes / 1e6, hasher.seconds)


# The digests of the running job's inputs, by absolute path (filled by run before main).
_INPUT_DIGESTS: dict[str, str] = {}


def input_sha256(path) -> str:
    """The SHA-256 of one of the running job's inputs, as its provenance records hold it (an
    asset: its pinned digest): hashed once per job, whoever asks."""
    return _INPUT_DIGESTS[os.path.abspath(path)]
