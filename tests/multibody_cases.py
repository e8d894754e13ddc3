"""Random multibody trees shared by the multibody tests: the same bodies as an Armillary system and as a
Pinocchio model."""

import numpy as np
import pinocchio
import pytest

from armillary.kernels import get_system

#: the mark of every test that compiles the multibody system's kernels (rk4, midpoint, rk45: 20–40 s each from a
#: fresh cache): they run on one pytest worker, which compiles each once
MULTIBODY_KERNELS = pytest.mark.xdist_group("multibody")


def random_tree(rng, kinds, parents):
    """Random bodies on joints of any type, as an Armillary system and as a Pinocchio model."""
    n = len(kinds)
    axes = rng.normal(size=(n, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    origins, masses, coms = rng.uniform(-0.5, 0.5, (n, 3)), rng.uniform(0.5, 2.0, n), rng.uniform(-0.3, 0.3, (n, 3))
    factors = rng.normal(size=(n, 3, 3))
    inertias = 0.1 * np.einsum("nij,nkj->nik", factors, factors) + 0.01 * np.eye(3)
    model = pinocchio.Model()
    joint_ids = []
    for j, kind in enumerate(kinds):
        joint = {"spherical": pinocchio.JointModelSpherical, "free": pinocchio.JointModelFreeFlyer}.get(kind)
        joint = joint() if joint else {"revolute": pinocchio.JointModelRevoluteUnaligned,
                                       "prismatic": pinocchio.JointModelPrismaticUnaligned}[kind](axes[j])
        parent = 0 if parents[j] < 0 else joint_ids[parents[j]]
        joint_ids.append(model.addJoint(parent, joint, pinocchio.SE3(np.eye(3), origins[j]), f"joint{j}"))
        model.appendBodyToJoint(joint_ids[-1], pinocchio.Inertia(masses[j], coms[j], inertias[j]),
                                pinocchio.SE3.Identity())
    system = get_system("multibody", joints=[{"type": k, "parent": p} for k, p in zip(kinds, parents)], axis=axes,
                        origin=origins, mass=masses, com=coms, inertia=inertias)
    return system, model
