"""The provenance records of a run as a Workflow Run RO-Crate (https://w3id.org/ro/wfrun/workflow),
so that a reader's tools (``rocrate``, ``runcrate``, WorkflowHub, ``rocrate-validator``) read our
chain of custody without our code: ``python -m diversity_core audit --ro-crate DIR``.

The crate holds

* the workflow (``Snakefile``, the crate's ``mainEntity``, a ``ComputationalWorkflow`` in
  Snakemake) and one ``CreateAction`` for the run: its ``object`` the assets the chains end in,
  its ``result`` the final results;
* one ``CreateAction`` per job that the records describe: ``instrument`` the rule's script (a
  ``SoftwareApplication`` copied into the crate), ``object`` its inputs, ``result`` its outputs,
  ``name`` the rule;
* a copy of every file of the results tree that a record names (final results and the interim
  files on disk: about 300 MB for a full default run) and of every record
  (``<file>.provenance.json``, ``about`` its file); every file carries its ``sha256`` and
  ``contentSize``. Assets under ``resources/`` (1.7 GB of public packages, fetched by their
  pins) and inputs not on disk (a fresh clone's interim files) are described, not copied:
  contextual entities ``#resources/...`` / ``#results/...`` with the same digests, whether they
  are pinned and by which configuration key.

Built with the ``rocrate`` library (pinned in ``envs/requirements.txt``); validated in
``tests/test_audit.py`` against the Workflow Run Crate profile of ``roc-validator``.
"""

from __future__ import annotations

import json
import mimetypes
from pathlib import Path

from .digests import RECORD_SUFFIX
from .records import record_path

PROFILES = {
    "https://w3id.org/ro/wfrun/process/0.5": "Process Run Crate",
    "https://w3id.org/ro/wfrun/workflow/0.5": "Workflow Run Crate",
    "https://w3id.org/ro/wfrun/provenance/0.5": "Provenance Run Crate",
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0": "Workflow RO-Crate",
}
PYTHON = {"@id": "https://www.python.org/", "@type": "ComputerLanguage", "name": "Python",
          "url": "https://www.python.org/"}


def write_crate(report, dest) -> Path:
    """Write the crate of the run that ``report`` (an :class:`~.audit.AuditReport`) audited into
    folder ``dest``; return it."""
    from rocrate.model.contextentity import ContextEntity
    from rocrate.rocrate import ROCrate

    roots, dest = report.roots, Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} is not empty; the crate needs a new folder.")
    # Version 1.1: the Workflow Run Crate profiles (0.5) build on RO-Crate 1.1.
    crate = ROCrate(version="1.1")
    crate.name = "Metric space magnitude diversity: a run of the reference pipeline"
    crate.description = ("Every result of this run with the rule, script, parameters and "
                         "inputs that made it, each file with its SHA-256 (diversity_core "
                         "provenance records).")
    crate.license = "https://spdx.org/licenses/BSD-3-Clause"
    for uri, name in PROFILES.items():
        crate.add(ContextEntity(crate, uri, properties={"@type": "CreativeWork", "name": name,
                                                          "version": uri.rsplit("/", 1)[1]}))
    crate.root_dataset["conformsTo"] = [{"@id": uri} for uri in PROFILES]
    # schema.org's sha256 came after the RO-Crate 1.1 context: defined here.
    crate.metadata.extra_terms["sha256"] = "http://schema.org/sha256"
    workflow = crate.add_workflow(
        roots.workdir / "Snakefile", "Snakefile", main=True, lang="snakemake",
        properties={"@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow"],
                    "name": "diversity_core reference pipeline"})
    python = crate.add(ContextEntity(crate, PYTHON["@id"], properties=PYTHON))

    records = _records(report)
    entities: dict[tuple, object] = {}

    def entity(key, entry: dict):
        """A file of the run: copied into the crate if it lies in the results tree, else (an
        asset, or a file not on disk) described by a contextual entity with its digest."""
        if key in entities:
            return entities[key]
        root, path = key
        crate_path = f"{root}/{path}" if root else Path(path).name
        properties = {"sha256": entry.get("sha256"), "contentSize": str(entry.get("size"))}
        notes = []
        if entry.get("kind") == "directory":
            notes.append("a folder; sha256 is that of its sha256sum-style listing "
                         "(docs/auditing.md)")
        if "pinned" in entry:
            notes.append(("pinned" if entry["pinned"] else "not pinned")
                         + (f" by configuration key {entry['config_key']}"
                            if entry.get("config_key") else ""))
        if entry.get("source"):
            notes.append(f"fetched from {entry['source']}")
        if notes:
            properties["description"] = "; ".join(notes)
        source = roots.path(*key)
        if entry.get("kind") != "directory":
            properties["encodingFormat"] = _media_type(path)
        if root == "results" and source.exists():
            if source.is_dir():
                made = crate.add_tree(source, crate_path, properties=properties)
            else:
                made = crate.add_file(source, crate_path, properties=properties)
        else:
            properties["@type"] = "CreativeWork"
            properties["name"] = crate_path
            properties["description"] = (
                properties.get("description", "") + "; not copied: " + (
                    "an asset under resources/, fetched and checked by its pins"
                    if root == "resources" else "not on disk when the crate was written")
            ).lstrip("; ")
            made = crate.add(ContextEntity(crate, f"#{crate_path}", properties=properties))
        entities[key] = made
        return made

    scripts = {}
    final_results, assets = [], []
    for key, record in records.items():
        job_outputs = [((e.get("root"), e.get("path")), e) for group in record["outputs"].values()
                       for e in group]
        job_inputs = [((e.get("root"), e.get("path")), e) for group in record["inputs"].values()
                      for e in group]
        script = record.get("script") or {}
        script_key = (script.get("root"), script.get("path"))
        if script_key not in scripts:
            source = roots.path(*script_key)
            name = Path(script_key[1] or "script.py").name
            scripts[script_key] = crate.add_file(
                source if source.is_file() else None,
                script_key[1] if script_key[0] else f"scripts/{name}",
                properties={"@type": ["File", "SoftwareApplication", "SoftwareSourceCode"],
                            "name": name, "encodingFormat": "text/x-python",
                            "sha256": script.get("sha256"), "programmingLanguage": python})
        outputs = [entity(k, e) for k, e in job_outputs]
        inputs = [entity(k, e) for k, e in job_inputs]
        action_id = "#job-" + "-".join(sorted(k[1] for k, _ in job_outputs)).replace("/", "_")
        if crate.get(action_id) is None:
            crate.add_action(scripts[script_key], identifier=action_id, object=inputs,
                             result=outputs, properties={
                                 "name": f"rule {record.get('rule')}",
                                 "description": json.dumps(
                                     {"params": record.get("params"),
                                      "wildcards": record.get("wildcards")},
                                     sort_keys=True, default=str)})
        for k, e in job_inputs:
            if k[0] == "resources":
                assets.append(entity(k, e))
        record_file = record_path(roots.path(*key))
        crate.add_file(record_file, f"results/{key[1]}{RECORD_SUFFIX}",
                       properties={"about": entity(key, dict(job_outputs)[key]),
                                   "encodingFormat": "application/json",
                                   "description": "diversity_core provenance record"})
        if "interim" not in Path(key[1]).parts:
            final_results.append(entity(key, dict(job_outputs)[key]))
    workflow["hasPart"] = list(scripts.values())  # the tools the workflow orchestrates
    crate.add_action(workflow, identifier="#run", object=list(dict.fromkeys(assets)),
                     result=final_results, properties={
                         "name": "Run of the diversity_core reference pipeline",
                         "description": "Assets in, final results out; each job is a "
                                        "CreateAction of its own."})
    crate.write(dest)
    return dest


def _records(report) -> dict[tuple, dict]:
    """Every readable record of the results tree, by the file it describes."""
    out = {}
    for key in sorted(report.files, key=lambda k: (k[0] or "", k[1])):
        if key[0] != "results":
            continue
        path = record_path(report.roots.path(*key))
        if not path.is_file():
            continue
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("format", 1) >= 2 and key in {
                (e.get("root"), e.get("path")) for g in record.get("outputs", {}).values()
                for e in g}:
            out[key] = record
    return out




def _media_type(path: str) -> str:
    known = {".npz": "application/zip", ".npy": "application/octet-stream",
             ".jsonl": "application/jsonl", ".md": "text/markdown", ".py": "text/x-python"}
    suffix = Path(path).suffix.lower()
    return known.get(suffix) or mimetypes.guess_type(path)[0] or "application/octet-stream"
