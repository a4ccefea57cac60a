"""diversity_core._threads: the package's one pool, and shares that split their own work."""

import subprocess
import sys

NESTED = """
from concurrent.futures import ThreadPoolExecutor
from diversity_core import _threads
pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix=_threads._POOL_PREFIX)
_threads.executor = lambda pid: pool
def outer(i):
    return sum(_threads.map_threads(lambda j: 10 * i + j, [0, 1, 2], 2))
print(_threads.map_threads(outer, [0, 1, 2, 3], 2))
pool.shutdown()
"""


def test_a_share_that_splits_its_work_runs_it_on_its_own_thread():
    """Two workers, each running a share that maps three items of its own: on the pool the
    inner items would queue behind the outer shares, which wait for them (for ever); run in a
    process of its own, so that a regression fails at the timeout instead of hanging the
    suite."""
    done = subprocess.run([sys.executable, "-c", NESTED], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[3,", "33,", "63,", "93]"]
