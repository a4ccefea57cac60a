"""Unit disks of constant curvature (paper §4.1): the point clouds of the curvature experiment.

Point clouds follow the generator of Turkeš, Montúfar and Otter (2022), "On the effectiveness of
persistent homology": ``n`` points drawn uniformly (with respect to area) from a disk of geodesic
radius 1 on the surface of constant Gaussian curvature ``K``:

* ``K > 0``: a spherical cap on the sphere of radius ``R = 1/sqrt(K)``;
* ``K < 0``: a disk in the hyperbolic plane of curvature ``K`` (the Poincaré disk model);
* ``K = 0``: the Euclidean unit disk.

Points are stored in geodesic polar coordinates ``(r, θ)`` about the disk's centre; a Poincaré
disk point at Euclidean radius ``ρ`` has geodesic radius ``r = 2R artanh(ρ)``, so the distances
below are the hyperbolic distances of the Poincaré model. Radii are drawn by inverting the area
function ``A(r)`` of a geodesic disk: ``A(r) ∝ 1 - cos(r/R)`` (sphere), ``r²`` (plane),
``cosh(r/R) - 1`` (hyperbolic plane). Distances use the haversine forms of the spherical and
hyperbolic laws of cosines, which keep full relative precision for nearby points (the plain
``arccos``/``arccosh`` forms lose half the digits there).

The original generator (Turkeš et al.'s ``data_construction.py``,
``calculate_distance_matrix_hyperbolic``) computes the hyperbolic distance as
``R·artanh(|c1 − c2| / |1 − c1·conj(c2)|)`` for Poincaré coordinates ``c = tanh(r/2R)·e^{iθ}``,
with the right line, ``2R·artanh(...)``, commented out: every K < 0 distance in their data is half
the true one. ``hyperbolic_distance="turkes"`` reproduces that (for comparison with their data
and with published numbers); the default ``True`` is the true distance. Sampling is the same in
both: their radii ``(2/√−K)·arsinh(√u·sinh(√−K/2))`` and ``(2/√K)·arcsin(√u·sin(√K/2))`` are the
area-uniform ones below, written differently.
"""

from __future__ import annotations

import numpy as np

__all__ = ["sample_disk", "geodesic_distances", "normal_coordinates", "curvature_design",
           "HYPERBOLIC_DISTANCES", "hyperbolic_distance_name", "hyperbolic_distance_factor"]

# Names of the ``curvature.hyperbolic_distance`` option: the true distance, or Turkeš et al.'s.
HYPERBOLIC_DISTANCES = ("true", "turkes")

def sample_disk(curvature: float, n_points: int, rng: np.random.Generator) -> np.ndarray:
    """Draw ``n_points`` uniformly from the geodesic unit disk of constant curvature.

    Parameters
    ----------
    curvature : float
        Gaussian curvature K; the unit disk exists for K < π² (the cap must fit on the sphere).
    n_points : int
    rng : numpy Generator

    Returns
    -------
    polar : array of shape (n_points, 2)
        Geodesic polar coordinates: radius r in [0, 1] and angle θ in [0, 2π).
    """
    if curvature >= np.pi**2:
        raise ValueError(f"a geodesic unit disk does not fit on a sphere of curvature {curvature}.")
    u = rng.uniform(size=n_points)
    theta = rng.uniform(0.0, 2.0 * np.pi, size=n_points)
    if curvature > 0:
        R = 1.0 / np.sqrt(curvature)
        r = R * np.arccos(1.0 - u * (1.0 - np.cos(1.0 / R)))
    elif curvature < 0:
        R = 1.0 / np.sqrt(-curvature)
        r = R * np.arccosh(1.0 + u * (np.cosh(1.0 / R) - 1.0))
    else:
        r = np.sqrt(u)
    return np.column_stack([r, theta])


def normal_coordinates(polar: np.ndarray) -> np.ndarray:
    """Geodesic normal coordinates ``(r cos θ, r sin θ)`` of points given in geodesic polar
    coordinates: the chart of the surface's exponential map at the disk's centre. The distance
    of a point to the centre is its geodesic one, and for K = 0 every distance is; between two
    other points of a curved disk the Euclidean distance of the chart is not the geodesic one
    (:func:`geodesic_distances`).

    Returns
    -------
    points : array of shape (n_points, 2)
    """
    r, theta = polar[:, 0], polar[:, 1]
    return np.column_stack([r * np.cos(theta), r * np.sin(theta)])


def hyperbolic_distance_name(hyperbolic_distance) -> str:
    """``"true"`` or ``"turkes"`` for a value of the option ``curvature.hyperbolic_distance``:
    YAML's ``true`` (the boolean) or the string ``"true"``, or ``"turkes"``; anything else
    (``false`` included: there is no third distance) raises ``ValueError`` naming the option."""
    if hyperbolic_distance is True or hyperbolic_distance == "true":
        return "true"
    if hyperbolic_distance == "turkes":
        return "turkes"
    raise ValueError(
        "curvature.hyperbolic_distance must be true (the true hyperbolic distance) or 'turkes' "
        f"(Turkeš et al.'s, half of it); got {hyperbolic_distance!r}.")


def hyperbolic_distance_factor(curvature: float, hyperbolic_distance=True) -> float:
    """What the true distances of a disk of this curvature are multiplied by under the option:
    ``0.5`` for ``"turkes"`` and K < 0 (Turkeš et al.'s halved hyperbolic distances), else 1."""
    name = hyperbolic_distance_name(hyperbolic_distance)
    return 0.5 if name == "turkes" and curvature < 0 else 1.0


def geodesic_distances(polar: np.ndarray, curvature: float,
                       hyperbolic_distance=True) -> np.ndarray:
    """Geodesic distance matrix of points given in geodesic polar coordinates.

    Parameters
    ----------
    polar : array of shape (n, 2)
        Radius and angle, as returned by :func:`sample_disk`.
    curvature : float
    hyperbolic_distance : True or "turkes"
        ``True`` (default): the true geodesic distance. ``"turkes"``: for K < 0, half of it, as
        Turkeš et al.'s generator computes it (see the module docstring); K >= 0 is unchanged.

    Returns
    -------
    D : array of shape (n, n), symmetric with a zero diagonal (units: geodesic length).
    """
    factor = hyperbolic_distance_factor(curvature, hyperbolic_distance)
    r, theta = polar[:, 0], polar[:, 1]
    half_dtheta = np.sin(0.5 * (theta[:, None] - theta[None, :])) ** 2  # sin²(Δθ/2)
    dr = r[:, None] - r[None, :]
    if curvature > 0:
        R = 1.0 / np.sqrt(curvature)
        s = np.sin(r / R)
        hav = np.sin(0.5 * dr / R) ** 2 + s[:, None] * s[None, :] * half_dtheta
        D = 2.0 * R * np.arcsin(np.sqrt(np.clip(hav, 0.0, 1.0)))
    elif curvature < 0:
        R = 1.0 / np.sqrt(-curvature)
        sh = np.sinh(r / R)
        # cosh(d/R) - 1 = 2 sinh²(Δr/2R) + 2 sinh(r1/R) sinh(r2/R) sin²(Δθ/2)
        x = 2.0 * np.sinh(0.5 * dr / R) ** 2 + 2.0 * sh[:, None] * sh[None, :] * half_dtheta
        D = R * np.log1p(x + np.sqrt(x * (x + 2.0)))  # arccosh(1 + x), stable for small x
    else:
        D = np.sqrt(dr**2 + 4.0 * r[:, None] * r[None, :] * half_dtheta)
    D = 0.5 * (D + D.T)
    np.fill_diagonal(D, 0.0)
    return D * factor if factor != 1.0 else D


def curvature_design(
    *,
    curvature_min: float,
    curvature_max: float,
    n_train_curvatures: int,
    clouds_per_curvature: int,
    n_test_clouds: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Curvatures of all clouds: a training grid (each value repeated) and uniform test draws.

    Returns
    -------
    curvature : array of shape (n_clouds,)
    split : array of shape (n_clouds,) with values "train" / "test"
    """
    grid = np.linspace(curvature_min, curvature_max, n_train_curvatures)
    train = np.repeat(grid, clouds_per_curvature)
    test = rng.uniform(curvature_min, curvature_max, size=n_test_clouds)
    split = np.array(["train"] * len(train) + ["test"] * len(test))
    return np.concatenate([train, test]), split
