"""Runs one documentation page's examples in a process of its own (``tests/docs/test_examples.py``
starts it), so that nothing an example does — registering a measure, setting an option — reaches
the test session or another page.

    python -m tests.support.page_runner BLOCKS.json

BLOCKS.json is a list of ``{"where": "page:line", "kind": "python" | "bash", "code": ...}`` in
page order. Python blocks share one namespace, as in a reader's session; shell blocks run with
``bash -e -o pipefail``. The first failing block is named on stderr and the exit status is 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
from pathlib import Path


def run_blocks(blocks: list[dict]) -> int:
    namespace: dict = {"__name__": "__main__"}
    for block in blocks:
        print(f"--- {block['where']}", flush=True)
        if block["kind"] == "python":
            try:
                exec(compile(block["code"], block["where"], "exec"), namespace)  # noqa: S102
            except BaseException:  # noqa: BLE001 - any failure of the example is the report
                print(f"{block['where']}: the example raised\n{traceback.format_exc()}",
                      file=sys.stderr)
                return 1
            continue
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block["code"]],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            print(f"{block['where']}: exit status {done.returncode}\n{done.stdout[-3000:]}\n"
                  f"{done.stderr[-3000:]}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(run_blocks(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))))
