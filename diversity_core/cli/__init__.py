"""The command line (``python -m diversity_core``, the ``diversity-core`` console script).

:mod:`.main` (the parser and ``main``), one module per command (:mod:`.score`, :mod:`.compare`,
:mod:`.audit`) and the options they share (:mod:`.options`). The library functions they print
live in the wings below: :mod:`diversity_core.comparison`, :mod:`diversity_core.provenance`.
"""
