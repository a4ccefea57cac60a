"""The one compiled part of diversity_core: ``diversity_core.magnitude._kernels`` (see its C file:
exp through glibc's vector math library, the weighted distance form in one pass, and the large-n
path's products with exp(-tD), one pass over each panel of distances).

Built on x86-64 Linux, where glibc ships libmvec; elsewhere, or if the build fails (no compiler,
a C library without libmvec), the package installs without it and NumPy forms exp(-tD), the
form and the products (``diversity_core.magnitude.EXPONENTIAL`` says which). Everything else
is in pyproject.toml.
"""

import platform
import sys

from setuptools import Extension, setup

extensions = []
if sys.platform.startswith("linux") and platform.machine() == "x86_64":
    extensions.append(Extension(
        "diversity_core.magnitude._kernels", ["diversity_core/magnitude/_kernels.c"],
        libraries=["mvec", "m"], optional=True,
    ))

setup(ext_modules=extensions)
