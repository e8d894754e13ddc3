"""State spaces: the geometry of each kind of mechanical state, declared once.

A space names its state variables (shapes from the body count, dims, units), admits an initial
state (normalising it within :data:`STATE_TOLERANCE` of the manifold, refusing it beyond, naming the
variable), perturbs states along tangent directions (its retraction: perturbed initial conditions and
Benettin shadows), measures distances for Benettin's method and lists its constraint diagnostics and
initial-condition samplers.  Systems are registered against a space, methods declare the spaces
they support; ``ensemble/`` and ``jobs/`` see only these declarations.
"""

from .base import STATE_TOLERANCE, Diagnostic, Sampler, StateSpace, Variable
from .generalised import GENERALISED
from .rigid_motion import RIGID_MOTION
from .rolling import ROLLING, ROLLING_DISK
from .rotation import ROTATION
from .sphere_product import SPHERE_PRODUCT

SPACES: dict[str, StateSpace] = {space.name: space for space in (SPHERE_PRODUCT, ROTATION, RIGID_MOTION, GENERALISED,
                                                                  ROLLING, ROLLING_DISK)}

__all__ = ["SPACES", "StateSpace", "Variable", "Diagnostic", "Sampler", "STATE_TOLERANCE", "SPHERE_PRODUCT",
           "ROTATION", "RIGID_MOTION", "GENERALISED", "ROLLING", "ROLLING_DISK"]
