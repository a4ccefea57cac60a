"""The one compiled part of diversity_core: ``diversity_core.magnitude._vexp`` (see its C file).

Built on x86-64 Linux, where glibc ships libmvec; elsewhere, or if the build fails (no compiler,
a C library without libmvec), the package installs without it and forms exp(-tD) with NumPy's
exp (``diversity_core.magnitude.EXPONENTIAL`` says which). Everything else is in pyproject.toml.
"""

import platform
import sys

from setuptools import Extension, setup

extensions = []
if sys.platform.startswith("linux") and platform.machine() == "x86_64":
    extensions.append(Extension(
        "diversity_core.magnitude._vexp", ["diversity_core/magnitude/_vexp.c"],
        libraries=["mvec", "m"], optional=True,
    ))

setup(ext_modules=extensions)
