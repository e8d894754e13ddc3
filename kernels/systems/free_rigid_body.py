"""Free rigid bodies (no torque): Euler's equations J Ω̇ = JΩ × Ω with Ṙ = R Ω̂.

The spatial angular momentum L = Σ_i R_i J_i Ω_i is conserved (all three components), and so are
the energy ½ Ω·JΩ and each body's Casimir |J_i Ω_i|².  For a symmetric body (A = B ≠ C) Ω₃ is
constant and Ω₁ + iΩ₂ turns at λ = (C − A)Ω₃/A; for an asymmetric body spinning near its
intermediate axis the spin flips periodically (the Dzhanibekov effect), with a period given by
Jacobi's elliptic integral K(k) (Landau & Lifshitz, Mechanics §37).
"""

import numpy as np

from .base import Preset
from .rigid import (RigidBodyDefinition, check_inertia, inertia_header, inertia_parameter, no_potential, no_torque,
                    spatial_angular_momentum)


def _dzhanibekov():
    return Preset(
        doc="I = (1, 2, 3) kg·m², spin 1 rad/s about the intermediate axis with a 1e-3 rad/s perturbation on the "
            "others (the spin flips every ~28 s)",
        params={"inertia": [1.0, 2.0, 3.0]},
        state={"R": np.eye(3)[np.newaxis], "Omega": np.array([[1e-3, 1.0, 1e-3]])},
    )


def _symmetric_top():
    return Preset(
        doc="A = B = 1, C = 2 kg·m², Ω = (0.5, 0, 2) rad/s: Ω₃ constant, Ω₁ + iΩ₂ turns at (C − A)Ω₃/A = 2 rad/s",
        params={"inertia": [1.0, 1.0, 2.0]},
        state={"R": np.eye(3)[np.newaxis], "Omega": np.array([[0.5, 0.0, 2.0]])},
    )


DEFINITION = RigidBodyDefinition(
    name="free_rigid_body",
    summary="torque-free rigid bodies on SO(3) (Euler's equations)",
    parameters=(inertia_parameter("inertia tensor about the centre of mass"),),
    presets={"dzhanibekov": _dzhanibekov, "symmetric_top": _symmetric_top},
    bodies=lambda params: params["inertia"].shape[-3],
    coefficients=lambda params, n: inertia_header(params["inertia"]),
    potential=no_potential,
    torque=no_torque,
    momentum=spatial_angular_momentum,
    momentum_doc="spatial angular momentum Σ R J Ω (all three components)",
    check=lambda params: check_inertia(params["inertia"]),
    revision=2,  # 2: lgvi without momentum drift (Π = JΩ exact, Ω = J⁻¹Π refined) and a second-order first guess
)
