"""Two spherical pendula hanging from one point, their masses joined by a spring (docs: own models)."""
from armillary.model import dot, cross, norm, sqrt, exp, sin, cos, log  # noqa: F401 (the helpers a model may use)

space = "sphere_product"
bodies = 2
parameters = {"m": [1.0, 1.5], "l": [1.0, 0.8], "g": 9.81, "k": 4.0}
units = {"m": "kg", "l": "m", "g": "m/s²", "k": "N/m"}


def inertia(p):
    return [[p.m[0] * p.l[0]**2, 0], [0, p.m[1] * p.l[1]**2]]


def potential(q, p):
    d = p.l[0] * q[0] - p.l[1] * q[1]
    return sum(p.m[i] * p.g * p.l[i] * q[i][2] for i in range(2)) + p.k / 2 * dot(d, d)


def initial_state(p):
    return {"q": [[0.6, 0.0, -0.8], [0.0, 0.6, -0.8]], "omega": [[0.0, 1.0, 0.0], [-0.5, 0.0, 0.0]]}
