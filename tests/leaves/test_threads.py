"""diversity_core._threads: the package's one pool, and shares that split their own work."""

import os
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


def test_importing_the_package_lets_openblas_workers_sleep_before_numpy_loads():
    # OpenBLAS reads OPENBLAS_THREAD_TIMEOUT when it loads: `import diversity_core` sets it
    # (unless the environment did) and loads no NumPy, so the NumPy imported after it, and every
    # process it starts, takes it.
    code = ("import os, sys, diversity_core; "
            "print(os.environ['OPENBLAS_THREAD_TIMEOUT'], 'numpy' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    for given, expected in ((None, "4 False"), ("12", "12 False")):
        if given is not None:
            env["OPENBLAS_THREAD_TIMEOUT"] = given
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, check=True)
        assert done.stdout.strip() == expected
