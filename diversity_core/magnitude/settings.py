"""One object for the magnitude conventions an experiment shares.

Every experiment computes convergence scales and MagAreas under the same conventions: the
convergence target, the tolerance of the convergence-scale search, the integration rule of
MagArea and its tolerance, and the number of scales of a stored magnitude function. The pipeline
keeps them in the ``magnitude`` section of its configuration; rules hand that section to their
scripts unchanged, and the scripts turn it into a :class:`MagnitudeSettings` with
:meth:`MagnitudeSettings.from_config`. The configuration schema is the pipeline's single source
of their defaults; the defaults below are the package's (those of :func:`convergence_scale` and
:func:`mag_area`), and a test checks that the two agree.

>>> settings = MagnitudeSettings.from_config({"target": 0.9})
>>> space = MagnitudeSpace(pairwise_distances(X))
>>> t_conv = settings.convergence_scale(space)
>>> area = settings.mag_area(space, t_conv)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from ..device import Device, parse_device
from . import (
    DEFAULT_INTEGRATION,
    DEFAULT_INTEGRATION_RTOL,
    DEFAULT_N_TS,
    DEFAULT_T_CONV_RTOL,
    DEFAULT_TARGET,
    INTEGRATION_METHODS,
    MagnitudeSpace,
    batch_on_device,
    convergence_scale,
    convergence_scales,
    mag_area,
    mag_areas,
    mag_diff,
    magnitude_functions,
    reference_free_t_cut,
    space_on_device,
)

__all__ = ["MagnitudeSettings", "config_problems"]


@dataclasses.dataclass(frozen=True)
class MagnitudeSettings:
    """Conventions of the magnitude computations of one experiment.

    Attributes
    ----------
    target : float in (0, 1)
        Convergence scale: ``Mag(t_conv) = target · n_distinct`` (paper: 0.95).
    t_conv_rtol : float > 0
        Relative tolerance of the convergence-scale search (on ``t_conv``).
    integration : str
        How MagArea integrates, one of ``INTEGRATION_METHODS`` (see :func:`mag_area`; ``cc25``
        is ``chebyshev``).
    integration_rtol : float > 0
        Relative tolerance of the MagArea integral (every rule but ``trapezoid``).
    n_ts : int >= 2
        Evenly spaced scales on ``[0, t_cut]`` (0 included) of stored magnitude functions and of
        the trapezoid rule.
    device : Device
        Where the engine runs, a :class:`~diversity_core.device.Device` (a name given is parsed
        once, when the settings are made: a name not in the table, or a GPU torch does not see,
        is refused in one line naming ``magnitude.device``): ``cpu`` (the default) and
        ``auto`` the NumPy engine (so that tables never depend on the machine; ``auto`` picks
        a GPU for the networks only); ``cuda``/``cuda:N`` the torch path on that GPU, dense
        float64, agreeing with the NumPy engine to the accuracy its solvers are asked for,
        1e-10 or better (docs/gpu.md); ``torch:cpu`` the torch path on the CPU (to check it
        without a GPU). Prepared spaces are used where they were made (a
        :class:`~diversity_core.magnitude.LargeMagnitudeSpace` on the host); ``compare`` and
        ``score`` put each set where the device's memory says
        (:func:`~diversity_core.magnitude.device_path`).
    """

    target: float = DEFAULT_TARGET
    t_conv_rtol: float = DEFAULT_T_CONV_RTOL
    integration: str = DEFAULT_INTEGRATION
    integration_rtol: float = DEFAULT_INTEGRATION_RTOL
    n_ts: int = DEFAULT_N_TS
    device: Device = parse_device("cpu")

    def __post_init__(self):
        if not 0.0 < self.target < 1.0:
            raise ValueError(f"magnitude.target must lie in (0, 1); got {self.target}.")
        if not self.t_conv_rtol > 0:
            raise ValueError(f"magnitude.t_conv_rtol must be positive; got {self.t_conv_rtol}.")
        if self.integration not in INTEGRATION_METHODS:
            raise ValueError(f"magnitude.integration must be one of {INTEGRATION_METHODS}; got "
                             f"{self.integration!r}.")
        if not self.integration_rtol > 0:
            raise ValueError(
                f"magnitude.integration_rtol must be positive; got {self.integration_rtol}.")
        if int(self.n_ts) != self.n_ts or self.n_ts < 2:
            raise ValueError(f"magnitude.n_ts must be an integer >= 2; got {self.n_ts}.")
        # The one parse of this edge: the methods below and measure_sets(**as_dict()) carry
        # the Device as it is.
        object.__setattr__(self, "device", parse_device(self.device, key="magnitude.device"))

    @classmethod
    def from_config(cls, section: Mapping | None) -> MagnitudeSettings:
        """Settings from the ``magnitude`` section of a configuration; absent keys take the
        package defaults, unknown keys raise ``ValueError`` naming them."""
        section = dict(section or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(section) - known)
        if unknown:
            raise ValueError(f"unknown magnitude settings {unknown}; known: {sorted(known)}.")
        return cls(**section)

    def as_dict(self) -> dict:
        """The settings by field name: also the conventions' keyword arguments of the
        reference-free protocol, ``measure_sets(spaces, **settings.as_dict())``
        (:mod:`diversity_core.magnitude.sets`); ``device`` the :class:`Device` itself."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    @property
    def area_options(self) -> dict:
        """Keyword arguments of :func:`mag_area` and :func:`mag_diff`."""
        return {"method": self.integration, "rtol": self.integration_rtol, "n_ts": self.n_ts}

    def space(self, D):
        """``D`` (an (n, n) distance matrix) prepared once where the engine runs, so that its
        convergence scale, MagArea and MagDiff share every evaluated scale: a
        :class:`MagnitudeSpace`, or on the torch path a ``TorchMagnitudeSpace``."""
        return (MagnitudeSpace(D) if self.device.engine == "numpy"
                else space_on_device(D, self.device))

    def convergence_scale(self, D) -> float:
        """:func:`convergence_scale` of ``D`` (a distance matrix or a ``MagnitudeSpace``)."""
        return convergence_scale(space_on_device(D, self.device), self.target,
                                 rtol=self.t_conv_rtol)

    def mag_area(self, D, t_cut: float) -> float:
        """:func:`mag_area` of ``D`` on ``[0, t_cut]``."""
        return mag_area(space_on_device(D, self.device), t_cut, **self.area_options)

    def convergence_scales(self, spaces, *, errors: str = "raise"):
        """:func:`convergence_scales` of a batch of spaces, shape (m,)."""
        return convergence_scales(batch_on_device(spaces, self.device), self.target,
                                  rtol=self.t_conv_rtol, errors=errors)

    def mag_areas(self, spaces, t_cut, *, errors: str = "raise"):
        """:func:`mag_areas` of a batch of spaces on ``[0, t_cut]``, shape (m,)."""
        return mag_areas(batch_on_device(spaces, self.device), t_cut,
                         **self.area_options, errors=errors)

    def magnitude_functions(self, spaces, t_cut: float, *, errors: str = "raise"):
        """The stored magnitude functions of a batch of spaces: Mag at the ``n_ts`` evenly
        spaced scales of ``[0, t_cut]`` (0 included), shape (m, n_ts), and those scales."""
        ts = np.linspace(0.0, t_cut, self.n_ts)
        return magnitude_functions(batch_on_device(spaces, self.device), ts,
                                   errors=errors), ts

    def mag_diff(self, D_x, D_ref, t_cut: float, **options) -> float:
        """:func:`mag_diff` on ``[0, t_cut]``; ``options``: ``normalise``, ``absolute``,
        ``reference_area``."""
        device = self.device
        return mag_diff(space_on_device(D_x, device), space_on_device(D_ref, device), t_cut,
                        **self.area_options, **options)

    def reference_free_t_cut(self, distance_matrices=(), *, convergence_scales=None) -> float:
        """:func:`reference_free_t_cut`: the median convergence scale."""
        device = self.device
        return reference_free_t_cut([space_on_device(D, device) for D in distance_matrices],
                                    self.target, rtol=self.t_conv_rtol,
                                    convergence_scales=convergence_scales)


def config_problems(section) -> list[str]:
    """The problems of the configuration's ``magnitude`` section, each naming its key, checked
    by the pipeline before any job (``workflow/rules/common.smk``, ``CONFIG_CHECKS``). The
    device is not among them: common.smk checks every section's ``device`` by name
    (:func:`~diversity_core.device.device_problem`), since a GPU that the submitting machine
    lacks may be on the node a job runs on (SLURM), where making the settings parses it."""
    section = dict(section or {})
    section.pop("device", None)
    problems = []
    try:
        MagnitudeSettings.from_config(section)
    except ValueError as err:
        problems.append(str(err))
    return problems
