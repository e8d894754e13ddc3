"""The built-in multibody n_link_pendulum_on_cart (two links) as a model: a double pendulum on a free cart."""
from armillary.model import cos

space = "generalised"
coordinates = 3                       # the cart's travel x (m), then each link's angle from upright (rad)
coordinate_names = ["cart_x", "link_1_angle", "link_2_angle"]
parameters = {"cart_mass": 1.0, "m": [1.0, 1.0], "l": [1.0, 1.0], "g": 9.81}
units = {"cart_mass": "kg", "m": "kg", "l": "m", "g": "m/s²"}
LINKS = 2


def carried(p, i):
    """The point masses at and beyond the end of link i (kg): what link i's angle swings."""
    return sum(p.m[k] for k in range(i, LINKS))


def mass_matrix(q, p):
    """M(q) of T = ½ uᵀ M u (kg, kg·m, kg·m²): mass k sits at (x − Σ_{i≤k} l_i sin q_i, Σ_{i≤k} l_i cos q_i),
    so its speed² is ẋ² − 2ẋ Σ l_i cos q_i q̇_i + Σ_ij l_i l_j cos(q_i − q_j) q̇_i q̇_j over its links."""
    angle = [q[1 + i] for i in range(LINKS)]
    matrix = [[p.cart_mass + carried(p, 0)] + [-p.l[i] * cos(angle[i]) * carried(p, i) for i in range(LINKS)]]
    for i in range(LINKS):
        matrix.append([matrix[0][1 + i]] + [p.l[i] * p.l[j] * cos(angle[i] - angle[j]) * carried(p, max(i, j))
                                            for j in range(LINKS)])
    return matrix


def potential(q, p):
    """V = Σ_k m_k g y_k (J): gravity along −y, the links upright at q = 0."""
    return sum(p.g * p.l[i] * cos(q[1 + i]) * carried(p, i) for i in range(LINKS))


def initial_state(p):
    """The built-in preset's release: the links at 90° and 170° from upright, everything at rest."""
    return {"q": [0.0, 1.5707963267948966, 2.9670597283903604], "u": [0.0, 0.0, 0.0]}

