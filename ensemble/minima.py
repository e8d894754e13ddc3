"""What an ensemble of minimisations found (a store of ``method = "fire"``): the distinct minima, how many members
reached each, and each minimum's defect structure.

Each member's minimum is its potential at its last sample (a minimisation records V alone as ``energy``) where its
status says it did not fail (OK: converged; NOT_CONVERGED: stopped at its step limit, counted apart).  Minima
are told apart by energy: members sorted by V fall into one minimum while each next V lies within
``tolerance`` · |V| of the previous one (single linkage along the sorted energies), so two minima closer than
that read as one.  A minimum's structure is its lowest member's: the Voronoi coordination z_i of every particle
(:func:`.particles.voronoi_order`), the numbers of 5-, 7- and other non-6-fold sites, and its defects grouped
into clusters of Voronoi neighbours (:func:`.particles.defect_clusters`), each with its net charge Σ(6 − z): isolated
disclinations (one site), scars (charged chains of several: grain boundaries that end inside the crystal, Bausch et
al., Science 299, 1716 (2003)) and neutral clusters (dislocations: a 5–7 pair, or neutral chains of them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr

from armillary.kernels.errors import InvalidInput
from armillary.kernels.status import NOT_CONVERGED, OK

from .analysis import particle_points
from .particles import VORONOI_MIN_PARTICLES, defect_clusters, voronoi_order

#: the default relative energy tolerance within which two members reached the same minimum
SAME_MINIMUM_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Minimum:
    """One distinct minimum an ensemble of minimisations reached."""

    #: V of its lowest member (J)
    energy: float
    #: the members (positions along ``member``) that reached it, lowest V first
    members: np.ndarray
    #: how many of them converged (the others stopped at their step limit within the tolerance of it)
    converged: int
    #: the member whose final configuration represents it (its lowest)
    representative: int
    #: sites with z = 5, z = 7 and any other z ≠ 6 (None when the store keeps no positions or N < 4)
    defects: dict | None
    #: sizes of its defect clusters, largest first: a 1 is an isolated disclination, a larger one a scar
    cluster_sizes: tuple | None
    #: net charge Σ(6 − z) of each cluster, in the order of ``cluster_sizes``
    cluster_charges: tuple | None

    @property
    def scars(self) -> int | None:
        """Charged clusters of more than one defect (grain-boundary scars, net charge ≠ 0)."""
        return None if self.cluster_sizes is None else sum(
            size > 1 and charge != 0 for size, charge in zip(self.cluster_sizes, self.cluster_charges))

    @property
    def neutral_clusters(self) -> int | None:
        """Clusters of net charge 0: dislocations (a 5–7 pair) and neutral chains of them."""
        return None if self.cluster_charges is None else sum(charge == 0 for charge in self.cluster_charges)


def is_minimisation(ds: xr.Dataset) -> bool:
    """Whether ``ds`` is a store of minimisations (it keeps ``minimisation_steps``)."""
    return "minimisation_steps" in ds


def final_energies(ds: xr.Dataset) -> np.ndarray:
    """Each member's V at its last sample (J); NaN for a member that failed or has no finite last energy."""
    energy = ds["energy"].isel(time=-1).values.astype(np.float64)
    reached = np.isin(ds["status"].values, (OK, NOT_CONVERGED))
    return np.where(reached & np.isfinite(energy), energy, np.nan)


def best_member(ds: xr.Dataset) -> int:
    """The member (its position along ``member``) holding the lowest final V of a minimisation store;
    InvalidInput naming ``store`` for another store or one where no member has a final energy."""
    if not is_minimisation(ds):
        raise InvalidInput("store", "is not a minimisation (method fire): it has no best member; give --member M")
    energies = final_energies(ds)
    if not np.isfinite(energies).any():
        raise InvalidInput("store", "no member has a final energy yet (run it first)")
    return int(np.nanargmin(energies))


def distinct_minima(ds: xr.Dataset, tolerance: float = SAME_MINIMUM_TOLERANCE) -> list[Minimum]:
    """The distinct minima of a minimisation store, lowest first (module docstring): members grouped by final V
    within ``tolerance`` (relative, > 0), each group's count, how many converged, and its lowest member's defects
    (when the store keeps the positions)."""
    if not is_minimisation(ds):
        raise InvalidInput("store", "is not a minimisation (method fire): it has no minima to list")
    if not (np.isfinite(tolerance) and tolerance > 0):
        raise InvalidInput("tolerance", f"must be a finite number > 0, got {tolerance!r}")
    energies = final_energies(ds)
    converged = ds["status"].values == OK
    order = np.argsort(energies, kind="stable")
    order = order[np.isfinite(energies[order])]
    if order.size == 0:
        return []
    sorted_energies = energies[order]
    new_group = np.abs(np.diff(sorted_energies)) > tolerance * np.abs(sorted_energies[1:])
    groups = np.split(order, np.flatnonzero(new_group) + 1)
    positions = _keeps_points(ds)
    return [_minimum(ds, group, energies, converged, positions) for group in groups]


def _keeps_points(ds: xr.Dataset) -> bool:
    """Whether the store keeps the state variables its space's particle positions come from."""
    try:
        particle_points(ds, 0, ds.sizes["time"] - 1)
    except KeyError:
        return False
    return True


def _minimum(ds: xr.Dataset, group: np.ndarray, energies: np.ndarray, converged: np.ndarray,
             positions: bool) -> Minimum:
    representative = int(group[0])
    defects = sizes = charges = None
    if positions:
        points = particle_points(ds, representative, ds.sizes["time"] - 1)
        if len(points) >= VORONOI_MIN_PARTICLES:
            order = voronoi_order(points)
            clusters = sorted(defect_clusters(points, order), key=lambda cluster: -cluster.members.size)
            defects = dict(order.defects)
            sizes = tuple(int(cluster.members.size) for cluster in clusters)
            charges = tuple(int(cluster.charge) for cluster in clusters)
    return Minimum(energy=float(energies[representative]), members=group, converged=int(converged[group].sum()),
                   representative=representative, defects=defects, cluster_sizes=sizes, cluster_charges=charges)


def minima_rows(minima: list[Minimum], members: int) -> tuple[list[str], list[list[str]]]:
    """(headings, rows) of a minima table: rank, V, members reaching it (share of the ensemble), converged,
    5-/7-/other-fold sites, isolated defects, scars (their sizes), neutral clusters (dislocations), representative
    member."""
    headings = ["minimum", "V (J)", "members", "share", "converged", "z=5", "z=7", "other", "isolated", "scars (sizes)",
                "neutral", "member"]
    rows = []
    for rank, minimum in enumerate(minima, 1):
        defects = minimum.defects or {}
        sizes, charges = minimum.cluster_sizes, minimum.cluster_charges
        scars = "–" if sizes is None else (
            f"{minimum.scars} ({', '.join(str(s) for s, c in zip(sizes, charges) if s > 1 and c != 0)})"
            if minimum.scars else "0")
        rows.append([str(rank), f"{minimum.energy:.9f}", str(minimum.members.size),
                     f"{minimum.members.size / members:.1%}", str(minimum.converged),
                     *(str(defects[key]) if key in defects else "–" for key in ("z5", "z7", "other")),
                     "–" if sizes is None else str(sum(size == 1 for size in sizes)), scars,
                     "–" if sizes is None else str(minimum.neutral_clusters), str(minimum.representative)])
    return headings, rows
