"""A model file's text → its declarations, checked: the space, bodies, parameters (as symbols laid out in
coefficient rows) and the functions the space asks for, with errors that name the file and line.

The file is run once as plain Python; its functions are called later with symbolic arguments by the
space's builder (:mod:`.spaces`).  Nothing here reads a file: the text arrives from the caller (the
spec, or :func:`armillary.load_model`), so a worker builds the same model from a store's provenance.
"""

from __future__ import annotations

import inspect
import traceback
from dataclasses import dataclass, field
from numbers import Number

import numpy as np
import sympy

from ..errors import InvalidInput
from .spec_key import FIELD
from .symbolic import Matrix, Vector

#: the spaces a model may declare, and the functions each needs (beyond ``potential``) and may add
SPACE_FUNCTIONS = {
    "sphere_product": {"required": ("inertia",), "optional": ("force", "initial_state"),
                       "potential": ("potential", "pair_potential")},
    "rotation": {"required": ("inertia",), "optional": ("torque", "initial_state"), "potential": ("potential",)},
    "rigid_motion": {"required": ("inertia",), "optional": ("wrench", "initial_state"), "potential": ("potential",)},
    "generalised": {"required": ("mass_matrix",), "optional": ("generalised_force", "initial_state"),
                    "potential": ("potential",)},
}

#: what a model counts, where it is not ``bodies`` (the space's n: joint coordinates count themselves)
COUNTS = {"generalised": "coordinates"}
#: the arguments of a typed pair potential, ``pair_potential(r, p, a, b)`` with the two particles' type data (a
#: particle's mass is then its type's: such a model has no ``inertia``); a plain one takes ``(r, p)``
TYPED_PAIR_ARITY = 4
#: the system parameters (sphere_mixture's) that give each particle of a typed pair model its type and diameter; the
#: file's ``parameters`` may give their defaults under these names
LAYOUT_PARAMETERS = ("types", "composition", "polydispersity", "layout_seed", "particle_types", "diameters")


class Parameters:
    """``p`` of a model's functions: ``p.name`` is a symbol (a number parameter), a Vector (a list) or a
    Matrix (a list of lists) of symbols, or, for ``initial_state(p)``, the same of numbers."""

    def __init__(self, values: dict, model: str):
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_model", model)

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name.startswith("__") or name not in values:
            if name.startswith("__"):
                raise AttributeError(name)
            raise ModelError(self._unknown(name, values))
        return values[name]

    def __setattr__(self, name, value):
        raise ModelError(f"parameters are read-only in a model (p.{name} = …)")

    def _unknown(self, name: str, values: dict) -> str:
        return f"unknown parameter {name!r} (p.{name}); the file declares: {', '.join(values) or 'none'}"


class ParticleData(Parameters):
    """``a`` and ``b`` of a typed ``pair_potential(r, p, a, b)``: one particle of the pair, whose attributes
    (``a.sigma``, ``a.diameter``, …, which the space's builder chooses) are symbols; ``label``, the argument's name
    in the file, names it in messages."""

    def __init__(self, values: dict, label: str):
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_label", label)

    def __setattr__(self, name, value):
        raise ModelError(f"a particle's data are read-only in a model ({self._label}.{name} = …)")

    def _unknown(self, name: str, values: dict) -> str:
        return f"unknown attribute {self._label}.{name} of a particle; allowed: {', '.join(values)}"


class ModelError(Exception):
    """A model that evaluates to something unusable; :func:`model_call` adds the file and line."""


@dataclass
class ParameterLayout:
    """A model's parameters in declaration order: each one's default (an array), its unit, and the rows of
    the coefficient array (P, lanes) that hold its flattened values."""

    defaults: dict
    units: dict
    rows: dict = field(default_factory=dict)

    @property
    def row_count(self) -> int:
        return sum(value.size for value in self.defaults.values())

    def symbols(self) -> tuple[Parameters, dict]:
        """``p`` of symbols, and symbol → coefficient row."""
        values, rows, row = {}, {}, 0
        for name, default in self.defaults.items():
            symbols = [sympy.Symbol(f"p_{name}_{k}", real=True) for k in range(default.size)]
            for symbol in symbols:
                rows[symbol] = row
                row += 1
            values[name] = _shaped(symbols, default.shape)
        return values, rows

    def numbers(self, params: dict) -> dict:
        """Values for ``initial_state(p)``: the same shapes, of numbers."""
        return {name: _shaped(list(np.asarray(params[name], dtype=float).ravel()), self.defaults[name].shape)
                for name in self.defaults}

    def coefficients(self, params: dict, members: int) -> np.ndarray:
        """(members, P): the parameters' values (broadcast to members) flattened in row order."""
        columns = [np.asarray(params[name], dtype=np.float64).reshape(members, -1) for name in self.defaults]
        return np.concatenate(columns, axis=1) if columns else np.zeros((members, 0))


def _shaped(items: list, shape: tuple):
    if shape == ():
        return items[0]
    if len(shape) == 1:
        return Vector(items)
    return Matrix([items[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])])


@dataclass
class ModelFile:
    """A model file run once: its namespace and what it declares."""

    path: str
    source: str
    namespace: dict
    space: str
    bodies: int | None
    layout: ParameterLayout
    doc: str
    #: the defaults a typed pair model's ``parameters`` give the system parameters of :data:`LAYOUT_PARAMETERS`, as
    #: written (checked where the system is bound, as a spec's values)
    layout_defaults: dict = field(default_factory=dict)

    def has(self, name: str) -> bool:
        return callable(self.namespace.get(name))

    def function(self, name: str):
        return self.namespace[name]

    def arity(self, name: str) -> int:
        return arity(self.namespace[name])

    @property
    def typed_pairs(self) -> bool:
        """Whether its pair potential reads the two particles' type data: ``pair_potential(r, p, a, b)``."""
        return self.has("pair_potential") and self.arity("pair_potential") == TYPED_PAIR_ARITY

    def call(self, name: str, *args):
        """``name(*args)`` of the file, with errors naming the file, the line and the function."""
        return model_call(self.path, name, self.namespace[name], *args)


def arity(function) -> int:
    """How many arguments ``function`` takes."""
    return len(inspect.signature(function).parameters)


def _where(path: str, error: BaseException) -> str:
    """``path:line`` of the innermost frame of the model file in ``error``'s traceback."""
    line = None
    for frame, number in traceback.walk_tb(error.__traceback__):
        if frame.f_code.co_filename == path:
            line = number
    return f"{path}:{line}" if line is not None else path


def model_call(path: str, name: str, function, *args):
    try:
        return function(*args)
    except NameError as error:
        raise InvalidInput(FIELD, f"{_where(path, error)}: unknown name {error.name!r} in {name}") from None
    except ModelError as error:
        raise InvalidInput(FIELD, f"{_where(path, error)}: {error} in {name}") from None
    except InvalidInput:
        raise
    except Exception as error:  # noqa: BLE001 - any failure of user code is bad input, reported with its line
        raise InvalidInput(FIELD, f"{_where(path, error)}: {type(error).__name__} in {name}: {error}") from None


def _parameter_defaults(path: str, declared) -> dict:
    if declared is None:
        return {}
    if not isinstance(declared, dict):
        raise InvalidInput(FIELD, f"{path}: parameters must be a dict of name → number or list, got "
                           f"{type(declared).__name__}")
    defaults = {}
    for name, value in declared.items():
        if not (isinstance(name, str) and name.isidentifier()):
            raise InvalidInput(FIELD, f"{path}: parameter names must be identifiers, got {name!r}")
        try:
            array = np.array(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidInput(FIELD, f"{path}: parameter {name!r} must be a number or a (nested) list of "
                               f"numbers, got {value!r}") from None
        if array.ndim > 2 or array.size == 0 or not np.all(np.isfinite(array) | (array == np.inf)):
            raise InvalidInput(FIELD, f"{path}: parameter {name!r} must be a finite number, or a non-empty list "
                               f"or list of lists of them, got {value!r}")
        defaults[name] = array
    return defaults


def read_model(source: str, path: str) -> ModelFile:
    """Run a model file's ``source`` (``path`` names it in messages) and check its declarations."""
    try:
        code = compile(source, path, "exec")
    except SyntaxError as error:
        raise InvalidInput(FIELD, f"{path}:{error.lineno}: syntax error: {error.msg}") from None
    namespace = {"__name__": "armillary_model_file", "__file__": path}
    try:
        exec(code, namespace)  # noqa: S102 - running the user's model is the point
    except NameError as error:
        raise InvalidInput(FIELD, f"{_where(path, error)}: unknown name {error.name!r}") from None
    except ImportError as error:
        raise InvalidInput(FIELD, f"{_where(path, error)}: {error}") from None
    except Exception as error:  # noqa: BLE001
        raise InvalidInput(FIELD, f"{_where(path, error)}: {type(error).__name__}: {error}") from None
    space = namespace.get("space")
    if space not in SPACE_FUNCTIONS:
        raise InvalidInput(FIELD, f"{path}: space = {space!r} is not supported; allowed: {', '.join(SPACE_FUNCTIONS)}")
    count = COUNTS.get(space, "bodies")
    bodies = namespace.get(count)
    if bodies is not None and not (isinstance(bodies, int) and not isinstance(bodies, bool) and bodies >= 1):
        raise InvalidInput(FIELD, f"{path}: {count} must be an integer >= 1, got {bodies!r}")
    wanted = SPACE_FUNCTIONS[space]
    potentials = [name for name in wanted["potential"] if callable(namespace.get(name))]
    if not potentials:
        raise InvalidInput(FIELD, f"{path}: a {space} model must define {' or '.join(wanted['potential'])}")
    if len(potentials) > 1:
        raise InvalidInput(FIELD, f"{path}: define one of {' and '.join(potentials)}, not both")
    typed = False
    if potentials[0] == "pair_potential":
        if arity(namespace["pair_potential"]) not in (2, TYPED_PAIR_ARITY):
            raise InvalidInput(FIELD, f"{path}: pair_potential must take (r, p), or (r, p, a, b) with a and b the two "
                               "particles' type data")
        typed = arity(namespace["pair_potential"]) == TYPED_PAIR_ARITY
    if typed and callable(namespace.get("inertia")):
        raise InvalidInput(FIELD, f"{path}: a pair_potential(r, p, a, b) model takes each particle's mass from its "
                           "type (the system parameter types, e.g. { A = { sigma = 0.1, mass = 2.0 } }); remove "
                           "inertia")
    for name in wanted["required"]:
        if not callable(namespace.get(name)) and not (typed and name == "inertia"):
            raise InvalidInput(FIELD, f"{path}: a {space} model must define {name}(…)")
    if bodies is None and potentials[0] != "pair_potential":
        raise InvalidInput(FIELD, f"{path}: {count} = <number of {count}> is required")
    units = namespace.get("units") or {}
    declared, layout_defaults = namespace.get("parameters"), {}
    if typed and isinstance(declared, dict):  # the defaults of its layout's parameters are not the model's own
        layout_defaults = {name: declared[name] for name in LAYOUT_PARAMETERS if name in declared}
        declared = {name: value for name, value in declared.items() if name not in layout_defaults}
    defaults = _parameter_defaults(path, declared)
    if not isinstance(units, dict) or any(name not in defaults for name in units):
        unknown = [name for name in units if name not in defaults] if isinstance(units, dict) else units
        raise InvalidInput(FIELD, f"{path}: units must name declared parameters; unknown: {unknown!r}")
    doc = (namespace.get("__doc__") or "").strip().splitlines()
    return ModelFile(path=path, source=source, namespace=namespace, space=space, bodies=bodies,
                     layout=ParameterLayout(defaults, {name: str(units.get(name, "")) for name in defaults}),
                     doc=doc[0] if doc else "", layout_defaults=layout_defaults)


def scalar(value, path: str, what: str):
    """A model function's value as one sympy expression, or InvalidInput naming ``what``."""
    if isinstance(value, (Vector, Matrix, list, tuple, np.ndarray)) or not isinstance(value, (Number, sympy.Basic)):
        raise InvalidInput(FIELD, f"{path}: {what} must return a scalar (one number or expression), got "
                           f"{type(value).__name__}")
    return sympy.sympify(value)


def vectors(value, count: int, length: int, path: str, what: str) -> list[list]:
    """A model function's value as ``count`` vectors of ``length`` sympy expressions."""
    rows = list(value) if isinstance(value, (Vector, Matrix, list, tuple)) else None
    if count == 1 and rows is not None and len(rows) == length and not isinstance(rows[0], (Vector, list, tuple)):
        rows = [rows]  # one body may return its vector alone
    if rows is None or len(rows) != count or any(len(list(row)) != length for row in rows):
        raise InvalidInput(FIELD, f"{path}: {what} must return {count} vector(s) of {length} components")
    return [[scalar(x, path, what) for x in row] for row in rows]


def square(value, size: int, path: str, what: str) -> sympy.Matrix:
    """A model function's value as a size × size sympy matrix (a list of lists, or its diagonal as a list)."""
    sequences = (Vector, list, tuple, np.ndarray)
    rows = list(value.rows) if isinstance(value, Matrix) else list(value) if isinstance(value, sequences) else None
    if rows is not None and len(rows) == size and all(not isinstance(row, sequences) for row in rows):
        rows = [[rows[i] if i == j else 0 for j in range(size)] for i in range(size)]  # its diagonal
    if rows is None and size == 1:
        rows = [[value]]
    if rows is None or len(rows) != size or any(len(list(row)) != size for row in rows):
        raise InvalidInput(FIELD, f"{path}: {what} must return a {size}×{size} matrix (a list of {size} rows)")
    matrix = sympy.Matrix([[scalar(x, path, what) for x in row] for row in rows])
    if any(not sympy.expand(matrix[i, j] - matrix[j, i]).is_zero for i in range(size) for j in range(i)):
        raise InvalidInput(FIELD, f"{path}: {what} must be symmetric")
    return matrix


def free_of(expressions, allowed: set, path: str, what: str) -> None:
    """Refuse expressions that depend on symbols outside ``allowed`` (e.g. inertia(p) that reads q)."""
    for expr in expressions:
        extra = expr.free_symbols - allowed
        if extra:
            raise InvalidInput(FIELD, f"{path}: {what} depends on {', '.join(sorted(map(str, extra)))}, which it "
                               "cannot take here")

