"""Particles on a sphere (ensemble/particles.py): geodesic displacement, g(θ), Voronoi order and defects,
each against a closed form or an exact fact (Euler's formula, an icosphere's symmetry, pair counts)."""

import time

import numpy as np
import pytest

from armillary.ensemble.particles import (
    coordination_figure, defect_clusters, default_theta_max, geodesic_displacement, pair_distribution, voronoi_order,
)
from armillary.kernels.geometry import icosphere


def uniform_points(n, seed):
    points = np.random.default_rng(seed).standard_normal((n, 3))
    return points / np.linalg.norm(points, axis=1, keepdims=True)


def icosphere_points(levels):
    """The vertices of a subdivided icosahedron (:func:`kernels.geometry.icosphere`): 10·4^levels + 2, the first 12
    the icosahedron's (five-fold), every other six-fold."""
    return icosphere(levels)[0]


# --------------------------------------------------------------------------------------- Voronoi order


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_total_charge_of_random_points_is_twelve(seed):
    """Euler's formula on the sphere's Delaunay triangulation (V − E + F = 2, 3F = 2E) gives Σ z_i = 6N − 12
    exactly, for any points in general position; each neighbour pair is counted by both its particles."""
    order = voronoi_order(uniform_points(500, seed))
    assert order.total_charge == 12
    assert order.coordination.sum() == 2 * len(order.neighbours) == 6 * 500 - 12
    assert sum(order.defects.values()) == np.count_nonzero(order.coordination != 6)
    assert order.six_fold_fraction == pytest.approx(np.mean(order.coordination == 6))
    assert np.all(np.abs(order.psi6) <= 1 + 1e-12)
    # every defect belongs to exactly one cluster, and the clusters' charges add up to the total
    clusters = defect_clusters(uniform_points(500, seed), order)
    members = np.concatenate([cluster.members for cluster in clusters])
    assert np.array_equal(np.sort(members), np.flatnonzero(order.coordination != 6))
    assert sum(cluster.charge for cluster in clusters) == 12


def test_icosahedron_is_twelve_five_fold_sites():
    order = voronoi_order(icosphere_points(0))
    assert np.all(order.coordination == 5) and order.total_charge == 12
    assert order.defects == {"z5": 12, "z7": 0, "other": 0}
    assert len(order.neighbours) == 30  # the icosahedron's edges
    # five bonds 72° apart: Σ exp(6i·72°·k) = Σ exp(i·72°·k) (6·72° = 360° + 72°) = 0, so ψ₆ = 0 (to round-off)
    assert np.abs(order.psi6).max() < 1e-12


@pytest.mark.parametrize("levels", [2, 3])  # 162 and 642 vertices
def test_icosphere_has_twelve_unit_defects_at_the_icosahedron_vertices(levels):
    points = icosphere_points(levels)
    order = voronoi_order(points)
    assert order.total_charge == 12 and order.defects == {"z5": 12, "z7": 0, "other": 0}
    assert np.all(order.coordination[:12] == 5) and np.all(order.coordination[12:] == 6)
    # the subdivided triangles are near-equilateral, bonds near 60° apart: the mean |ψ₆| is 0.915 (162) and
    # 0.917 (642), the same on any rotation of the points (exact geometry: no noise to allow for)
    assert np.abs(order.psi6[12:]).mean() > 0.9
    clusters = defect_clusters(points, order)
    assert len(clusters) == 12 and all(c.charge == 1 and len(c.members) == 1 for c in clusters)
    # each cluster is one vertex of the icosahedron (the first 12 points), centred exactly on it
    centres = np.array([c.centre for c in clusters])
    np.testing.assert_allclose(centres, icosphere_points(0), atol=1e-15)


def test_coordination_figure_is_written(tmp_path):
    points = icosphere_points(2)
    path = coordination_figure(points, voronoi_order(points).coordination, tmp_path / "coordination.png")
    assert path == tmp_path / "coordination.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


# ------------------------------------------------------------------------------------------------ g(θ)


def ideal_gas_pairs(n, theta):
    """Expected pairs of n uniform points per bin of centres ``theta`` (equal bins from 0)."""
    width = theta[1] - theta[0]
    return n * (n - 1) / 2 * (np.cos(theta - width / 2) - np.cos(theta + width / 2)) / 2


def test_pair_distribution_of_uniform_points_is_one_within_counting_noise():
    """For uniform points the count in a bin is binomial with mean μ = N(N−1)/2 · p: two pairs sharing a
    particle are independent, since given q_i the chance that q_j lies in a band about it is p whatever q_i
    (isotropy).  So g − 1 has σ = √((1 − p)/μ) ≤ 1/√μ per bin, and 5σ bounds all 400 bins (a 5σ excursion
    in any of them has probability ≈ 400 · 6·10⁻⁷)."""
    n = 3000
    theta, g = pair_distribution(uniform_points(n, 4))
    assert len(theta) == 400 and theta[-1] == pytest.approx(np.pi * (1 - 1 / 800))  # defaults: 400 bins over [0, π]
    assert np.all(np.abs(g - 1) < 5 / np.sqrt(ideal_gas_pairs(n, theta)))


def test_pair_distribution_counts_every_pair_of_many_particles():
    """2·10⁵ particles with the default range (10 mean spacings, 0.079 rad): the counts g · expected are the
    integers cKDTree counts within θ_max, all of them (no subset), in seconds."""
    from scipy.spatial import cKDTree

    n = 200_000
    points = uniform_points(n, 5)
    start = time.perf_counter()
    theta, g = pair_distribution(points, bins=4)  # few bins: the test's time goes to the tree walk only
    seconds = time.perf_counter() - start
    theta_max = default_theta_max(n)
    assert theta_max == pytest.approx(10 * np.sqrt(4 * np.pi / n))
    assert theta[-1] + (theta[1] - theta[0]) / 2 == pytest.approx(theta_max)
    counts = g * ideal_gas_pairs(n, theta)
    np.testing.assert_allclose(counts, np.round(counts), rtol=0, atol=1e-6)
    tree = cKDTree(points)
    within = (tree.count_neighbors(tree, 2 * np.sin(theta_max / 2)) - n) // 2
    assert int(np.round(counts).sum()) == within
    assert np.abs(g - 1).max() < 5 / np.sqrt(ideal_gas_pairs(n, theta)).min()  # uniform, as above
    assert seconds < 30  # about 2 s; an all-pairs method would need 2·10¹⁰ distances


# ----------------------------------------------------------------------------------- displacement


def test_rigid_rotation_about_z_has_closed_form_displacement():
    """Points turning rigidly about e_z by ω per sample: a point at distance ρ = √(1 − z²) from the axis moves
    along a chord 2ρ|sin(ωτ/2)| = 2 sin(θ/2), so θ(τ) = 2 arcsin(ρ |sin(ωτ/2)|) and q(t+τ)·q(t) =
    z² + ρ² cos ωτ, the same from every origin.  atan2 of the cross and dot products matches to round-off."""
    members, times, n, omega = 3, 40, 50, 0.15
    start = np.stack([uniform_points(n, seed) for seed in range(members)])
    angle = omega * np.arange(times)
    cos, sin = np.cos(angle)[None, :, None], np.sin(angle)[None, :, None]
    x, y, z = (start[:, None, :, k] for k in range(3))
    points = np.stack(np.broadcast_arrays(cos * x - sin * y, sin * x + cos * y, z + 0 * cos), axis=-1)
    lags, msd, correlation, msd_se, correlation_se = geodesic_displacement(points)
    assert lags.dtype.kind == "i" and np.array_equal(lags, np.arange(times))
    rho = np.sqrt(1 - start[..., 2] ** 2)[:, None, :]  # (member, 1, particle)
    tau = omega * lags[None, :, None]
    theta = 2 * np.arcsin(rho * np.abs(np.sin(tau / 2)))
    per_member_msd = np.mean(theta ** 2, axis=2)
    per_member_correlation = np.mean(start[:, None, :, 2] ** 2 + rho ** 2 * np.cos(tau), axis=2)
    np.testing.assert_allclose(msd, per_member_msd.mean(axis=0), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(correlation, per_member_correlation.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(msd_se, per_member_msd.std(axis=0, ddof=1) / np.sqrt(members), rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(correlation_se, per_member_correlation.std(axis=0, ddof=1) / np.sqrt(members),
                               rtol=1e-9, atol=1e-15)
    assert np.all(np.isfinite(msd_se[1:])) and np.all(msd_se[1:] > 0)


def test_static_configuration_has_no_displacement():
    """θ(a, a) = atan2(|a × a|, a·a) = atan2(0, 1) = 0 exactly; a·a = 1 to a few ulp.  One member: the standard
    errors are NaN (no replicas to spread)."""
    points = np.broadcast_to(uniform_points(30, 6), (12, 30, 3))
    lags, msd, correlation, msd_se, correlation_se = geodesic_displacement(points)
    assert np.all(msd == 0) and np.allclose(correlation, 1, rtol=0, atol=1e-15)
    assert np.all(np.isnan(msd_se)) and np.all(np.isnan(correlation_se))


def test_displacement_averages_every_time_origin():
    """Against a plain loop over members, lags, origins and particles (θ by arccos, fine away from 0 and π,
    where random pairs are), on random unit vectors with no structure, so each origin's term differs."""
    members, times, n = 3, 7, 5
    points = np.stack([uniform_points(times * n, seed).reshape(times, n, 3) for seed in range(members)])
    lags, msd, correlation, msd_se, correlation_se = geodesic_displacement(points)
    per_msd = np.zeros((members, times))
    per_correlation = np.zeros((members, times))
    for m in range(members):
        for k in range(times):
            terms = [(np.arccos(np.clip(points[m, t, i] @ points[m, t + k, i], -1, 1)) ** 2,
                      points[m, t, i] @ points[m, t + k, i]) for t in range(times - k) for i in range(n)]
            per_msd[m, k], per_correlation[m, k] = np.mean(terms, axis=0)
    np.testing.assert_allclose(msd, per_msd.mean(axis=0), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(correlation, per_correlation.mean(axis=0), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(msd_se, per_msd.std(axis=0, ddof=1) / np.sqrt(members), rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(correlation_se, per_correlation.std(axis=0, ddof=1) / np.sqrt(members), rtol=1e-9,
                               atol=1e-13)


# -------------------------------------------------------------------------------------------- accessor


def test_accessor_reads_the_points_of_a_sphere_product_store():
    """On an in-memory Dataset shaped as an (S²)ⁿ store (no kernel run): the methods hand the state's points
    to the functions of particles.py."""
    import xarray as xr

    import armillary  # noqa: F401  (registers ds.armillary)

    q = np.stack([icosphere_points(1)[None].repeat(4, axis=0), icosphere_points(1)[None].repeat(4, axis=0)[:, :, ::-1]])
    ds = xr.Dataset({"q": (("member", "time", "body", "xyz"), q), "omega": (("member", "time", "body", "xyz"),
                                                                         np.zeros_like(q))},
                    coords={"member": [0, 1], "time": np.arange(4.0)},
                    attrs={"system": "sphere_lj", "method": "vi", "space": "sphere_product", "spec": ""})
    expected = geodesic_displacement(q)
    np.testing.assert_equal(tuple(ds.armillary.geodesic_displacement()), tuple(expected))
    np.testing.assert_equal(tuple(ds.armillary.geodesic_displacement(members=1)), tuple(geodesic_displacement(q[1])))
    order = ds.armillary.voronoi_order(member=0, time_index=-1)
    assert order.total_charge == 12 and order.defects["z5"] == 12
    theta, g = ds.armillary.pair_distribution(bins=30)
    np.testing.assert_equal(g, pair_distribution(q[0, -1], bins=30)[1])
