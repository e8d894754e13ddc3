"""Symbolic expressions to lane functions: common subexpressions hoisted once (sympy's ``cse``), printed
as straight-line Python over scalars inside one loop over lanes, so LLVM keeps a member's state in
registers and vectorises across members.

Printing keeps to the operations that round the same in scalar and SIMD form: +, −, ×, ÷ and √; whole
powers are multiplications (x⁴ = (x·x)·(x·x)), half-integer powers use √, other powers and the
transcendental functions a model names (sin, exp, …) call NumPy's, lane by lane.  A generated module is
written once under a name carrying the hash of its text, so Numba's on-disk cache serves every later
process, and run from the text derived now, never from what the file holds (:func:`load_generated`).
"""

from __future__ import annotations

import hashlib
import os
import sys
import types

import sympy
from numba.core.registry import CPUDispatcher as Dispatcher

from ..caches import model_cache_directory, read_file, write_file

#: how a function of sympy prints in a kernel
FUNCTIONS = {sympy.sin: "np.sin", sympy.cos: "np.cos", sympy.tan: "np.tan", sympy.exp: "np.exp",
             sympy.log: "np.log", sympy.atan2: "np.arctan2", sympy.Abs: "np.abs", sympy.asin: "np.arcsin",
             sympy.acos: "np.arccos", sympy.atan: "np.arctan", sympy.sinh: "np.sinh", sympy.cosh: "np.cosh",
             sympy.tanh: "np.tanh"}
#: the largest whole power written as multiplications
MAX_UNROLLED_POWER = 16


class UnsupportedExpression(ValueError):
    """An expression the printer cannot write as kernel code (names the offending part)."""


def _number(value) -> str:
    text = repr(float(value))
    return text if not text.startswith("-") else f"({text})"


def _power(base: str, exponent: int) -> str:
    """base**exponent, exponent ≥ 1, by repeated squaring written out."""
    if exponent == 1:
        return base
    half = _power(base, exponent // 2)
    square = f"({half} * {half})" if exponent // 2 > 1 else f"({base} * {base})"
    return square if exponent % 2 == 0 else f"({square} * {base})"


def print_expression(expr, names: dict) -> str:
    """Python source for ``expr``; ``names`` maps each sympy Symbol to the source that reads it."""
    if expr.is_Symbol:
        if expr not in names:
            raise UnsupportedExpression(f"unknown symbol {expr}")
        return names[expr]
    if expr.is_Integer or expr.is_Rational or expr.is_Float:
        return _number(expr)
    if expr is sympy.pi:
        return _number(sympy.pi.evalf(20))
    if expr is sympy.E:
        return _number(sympy.E.evalf(20))
    if expr.is_Add:
        text = ""
        for term in expr.args:
            if term.could_extract_minus_sign():
                text += (" - " if text else "-") + print_expression(-term, names)
            else:
                text += (" + " if text else "") + print_expression(term, names)
        return f"({text})"
    if expr.is_Mul:
        numerator, denominator = [], []
        sign = ""
        for factor in expr.args:
            if factor.is_Number and factor.is_negative:
                sign = "-"
                factor = -factor
                if factor == 1:
                    continue
            if factor.is_Pow and factor.exp.is_Number and factor.exp.is_negative:
                denominator.append(print_expression(sympy.Pow(factor.base, -factor.exp), names))
            elif factor.is_Rational and not factor.is_Integer and factor.p == 1:
                denominator.append(_number(factor.q))
            else:
                numerator.append(print_expression(factor, names))
        text = " * ".join(numerator) if numerator else "1.0"
        if denominator:
            text = f"{text} / ({' * '.join(denominator)})"
        return f"({sign}{text})" if sign else f"({text})"
    if expr.is_Pow:
        base, exponent = expr.args
        if exponent.is_Integer and 0 < exponent <= MAX_UNROLLED_POWER:
            return _power(print_expression(base, names), int(exponent))
        if exponent.is_Integer and -MAX_UNROLLED_POWER <= exponent < 0:
            return f"(1.0 / {_power(print_expression(base, names), int(-exponent))})"
        if exponent.is_Rational and exponent.q == 2:
            root = f"np.sqrt({print_expression(base, names)})"
            whole = abs(int(exponent.p))
            text = root if whole == 1 else f"({_power(print_expression(base, names), whole // 2)} * {root})"
            return text if exponent > 0 else f"(1.0 / {text})"
        return f"({print_expression(base, names)} ** {print_expression(exponent, names)})"
    function = FUNCTIONS.get(expr.func)
    if function is not None:
        return f"{function}({', '.join(print_expression(arg, names) for arg in expr.args)})"
    raise UnsupportedExpression(f"cannot compile {expr.func.__name__}(…) into a kernel (in {str(expr)[:80]})")


def hoist_constants(expressions: list, variables: set, prefix: str = "c_") -> tuple[list, list]:
    """(expressions, constants): the largest subexpressions free of ``variables`` (parameter-only sums, products
    and functions, e.g. 4ε, σ¹², φ(r_c)) replaced by symbols ``prefix``k, and (symbol, subexpression) of each, to
    be computed once per member rather than once per evaluation (per pair, for a pair potential)."""
    constants: dict = {}

    def constant(expr):
        if expr.is_Atom:
            return expr
        if expr not in constants:
            constants[expr] = sympy.Symbol(f"{prefix}{len(constants)}", real=True)
        return constants[expr]

    def walk(expr):
        if expr.is_Atom:
            return expr
        if not expr.free_symbols & variables:
            return constant(expr)
        if expr.is_Add or expr.is_Mul:
            fixed = [arg for arg in expr.args if not arg.free_symbols & variables]
            varying = [walk(arg) for arg in expr.args if arg.free_symbols & variables]
            return expr.func(*([constant(expr.func(*fixed))] if fixed else []), *varying)
        return expr.func(*(walk(arg) for arg in expr.args))

    hoisted = [walk(sympy.sympify(expr)) for expr in expressions]
    return hoisted, [(symbol, expr) for expr, symbol in constants.items()]


def divisions(expr) -> int:
    """How many divisions the printer writes for ``expr`` (one per negative power)."""
    return sum(1 for node in sympy.preorder_traversal(expr) if node.is_Pow and node.exp.is_negative)


def straight_line(outputs: list, names: dict, indent: str, assign: str = "=") -> list[str]:
    """Lines assigning (``assign``: ``=`` or ``+=``) each (target source, expression) of ``outputs`` after
    hoisting common subexpressions; ``names`` maps the input symbols to their source."""
    expressions = [sympy.sympify(expr) for _, expr in outputs]
    replacements, reduced = sympy.cse(expressions, symbols=sympy.numbered_symbols("t_"), order="none")
    names = dict(names)
    lines = []
    for symbol, value in replacements:
        names[symbol] = str(symbol)
        lines.append(f"{indent}{symbol} = {print_expression(value, names)}")
    for (target, _), value in zip(outputs, reduced):
        lines.append(f"{indent}{target} {assign} {print_expression(value, names)}")
    return lines


def lane_function_source(name: str, arguments: str, lanes: str, names: dict, outputs: list, doc: str,
                         before: tuple = (), assign: str = "=", decorator: str = "@lane_function") -> str:
    """A lane function ``name(arguments)`` whose one loop ``for b in range(lanes)`` computes ``outputs``
    (target, expression) from inputs ``names`` (symbol → source reading lane b).  ``before``: lines ahead
    of the loop; ``assign``: ``=``, or ``+=`` to add to the targets."""
    body = straight_line(outputs, names, " " * 8, assign)
    lines = [decorator, f"def {name}({arguments}):", f'    """{doc}"""', *("    " + line for line in before),
             f"    for b in range({lanes}):", *body]
    if not outputs:
        lines.append("        pass")
    return "\n".join(lines) + "\n"


HEADER = '''"""Generated by armillary from a model file; do not edit (regenerated from the model's source)."""

import numpy as np

from armillary.kernels.lanes import lane_function

'''


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_generated(source: str):
    """Import generated module text.  It is kept in the model cache under the hash of its text, so that later
    processes find the same file and Numba's cache keyed by that file serves them; but what runs is ``source``
    itself, compiled here, once the file was checked to hold exactly it (a file another hand changed is
    rewritten first, which also retires the kernels Numba cached for the old file)."""
    digest = source_hash(source)
    module_name = f"armillary_model_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    directory = model_cache_directory()
    path = os.path.join(directory, module_name + ".py")
    if read_file(path) != source:
        write_file(directory, module_name + ".py", source)
    module = types.ModuleType(module_name)
    module.__file__ = path
    sys.modules[module_name] = module
    exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 - the text derived now, not the file's
    # the lane functions that run on their own (the model checks call them from Python in every process that builds
    # the model) are kept in Numba's cache like the kernels: its entries are stamped by the file, which holds the
    # text just run
    for value in module.__dict__.values():
        if isinstance(value, Dispatcher) and value.py_func.__module__ == module_name:
            value.enable_caching()
    return module
