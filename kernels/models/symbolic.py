"""What a model file computes with: vectors of symbols or numbers, and the functions of
:mod:`armillary.model`.

A model file is plain Python run once with symbolic arguments (sympy symbols standing for state
coordinates and parameter values), and again with numbers where the runner needs values (a model's
``initial_state(p)``).  So every helper takes sympy expressions, plain numbers, lists and NumPy arrays
alike, and a :class:`Vector` adds, subtracts and scales whatever it holds.
"""

from __future__ import annotations

from numbers import Number

import numpy as np
import sympy


class Vector:
    """A short vector of symbols or numbers: ``+``, ``−``, scaling by numbers, symbols and parameters,
    indexing ``v[k]``, iteration and ``len``."""

    __slots__ = ("items",)
    __array_priority__ = 100  # NumPy scalars defer to Vector's reflected operators

    def __init__(self, items):
        self.items = tuple(items)

    def __getitem__(self, k):
        return self.items[k]

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def __repr__(self):
        return f"Vector({list(self.items)!r})"

    def _pair(self, other):
        other = as_vector(other)
        if len(other) != len(self):
            raise TypeError(f"vectors of lengths {len(self)} and {len(other)} do not add")
        return other

    def __add__(self, other):
        if _is_zero(other):  # sum() starts from 0
            return self
        return Vector(a + b for a, b in zip(self, self._pair(other)))

    __radd__ = __add__

    def __sub__(self, other):
        return Vector(a - b for a, b in zip(self, self._pair(other)))

    def __rsub__(self, other):
        return Vector(b - a for a, b in zip(self, self._pair(other)))

    def __neg__(self):
        return Vector(-a for a in self)

    def __pos__(self):
        return self

    def __mul__(self, scale):
        if isinstance(scale, (Vector, list, tuple, np.ndarray)):
            raise TypeError("a vector times a vector: use dot(a, b) or cross(a, b)")
        return Vector(a * scale for a in self)

    def __rmul__(self, scale):
        if isinstance(scale, (Vector, list, tuple, np.ndarray)):
            raise TypeError("a vector times a vector: use dot(a, b) or cross(a, b)")
        return Vector(scale * a for a in self)

    def __truediv__(self, scale):
        return Vector(a / scale for a in self)


def _is_zero(value) -> bool:
    return isinstance(value, Number) and value == 0


def as_vector(value) -> Vector:
    """A Vector of a Vector, a list or tuple, or a 1-D array; TypeError for anything else."""
    if isinstance(value, Vector):
        return value
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim == 1):
        return Vector(value)
    raise TypeError(f"expected a vector (a Vector, list or 1-D array), got {type(value).__name__}")


def dot(a, b):
    """a·b of two vectors of one length."""
    a, b = as_vector(a), as_vector(b)
    if len(a) != len(b):
        raise TypeError(f"dot of vectors of lengths {len(a)} and {len(b)}")
    return sum((x * y for x, y in zip(a, b)), 0)


def cross(a, b) -> Vector:
    """a × b of two 3-vectors."""
    a, b = as_vector(a), as_vector(b)
    if len(a) != 3 or len(b) != 3:
        raise TypeError(f"cross needs two 3-vectors, got lengths {len(a)} and {len(b)}")
    return Vector((a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]))


def _elementwise(symbolic, numeric):
    def function(x):
        if isinstance(x, sympy.Basic):
            return symbolic(x)
        if isinstance(x, Vector):
            raise TypeError(f"{symbolic.__name__} of a vector: apply it to a number (e.g. norm(v))")
        return numeric(x)
    function.__name__ = symbolic.__name__
    function.__doc__ = f"{symbolic.__name__}(x) of a number or a symbolic expression."
    return function


sqrt = _elementwise(sympy.sqrt, np.sqrt)
exp = _elementwise(sympy.exp, np.exp)
log = _elementwise(sympy.log, np.log)
sin = _elementwise(sympy.sin, np.sin)
cos = _elementwise(sympy.cos, np.cos)
tan = _elementwise(sympy.tan, np.tan)


def atan2(y, x):
    """atan2(y, x) (rad) of numbers or symbolic expressions."""
    if isinstance(y, sympy.Basic) or isinstance(x, sympy.Basic):
        return sympy.atan2(y, x)
    return np.arctan2(y, x)


def norm(v):
    """‖v‖ = √(v·v)."""
    return sqrt(dot(v, v))


class Matrix:
    """A small matrix of symbols or numbers indexed ``m[i, j]`` (and ``m[i]``, its row i as a Vector), with
    ``m @ v`` for a vector v and ``m.T``: a body's attitude R in a model on SO(3)."""

    __slots__ = ("rows",)

    def __init__(self, rows):
        self.rows = tuple(tuple(row) for row in rows)

    def __getitem__(self, index):
        if isinstance(index, tuple):
            i, j = index
            return self.rows[i][j]
        return Vector(self.rows[index])

    def __len__(self):
        return len(self.rows)

    @property
    def T(self) -> "Matrix":  # noqa: N802 (NumPy's name)
        return Matrix(zip(*self.rows))

    def __matmul__(self, other):
        if isinstance(other, Matrix):
            return Matrix([[dot(row, column) for column in other.T.rows] for row in self.rows])
        return Vector(dot(row, as_vector(other)) for row in self.rows)

    def __repr__(self):
        return f"Matrix({[list(row) for row in self.rows]!r})"


def matmul(a, b):
    """a @ b for a Matrix and a vector or Matrix."""
    return a @ b


__all__ = ["Vector", "Matrix", "dot", "cross", "norm", "sqrt", "exp", "log", "sin", "cos", "tan", "atan2", "matmul"]
