"""Surfaces of section: crossings of a scalar expression of the state, located inside the step that holds them.

A section is a scalar expression e of the space's state variables (``"q[0][0]"``, ``"omega[1][2] - q[0][1]"``,
``"R[0][2][2]"``).  A step from t_k to t_k + h holds a crossing when e goes from below zero to zero or above
(``direction = "up"``), from above zero to zero or below (``"down"``), or either (``"both"``): the condition is
half-open, so a crossing that lands exactly on a step's end (or a segment's end) belongs to that step alone and
the next step, starting where it is zero, does not find it again.

**Where in the step.** The crossing time is the root τ ∈ (0, h] of f(τ) = e(Φ_{τ−h}(x_{k+1})), where Φ_σ is
the method's own step of size σ, here backwards from the step's end state x_{k+1} (so the sought state is
the method's one-step approximation, local error O(|τ − h|^{p+1}) for a method of order p; its steps run
backwards as well as forwards).  f(h) = e(x_{k+1}) and e(x_k), which f(0) approximates to that local error,
bracket the root; it is found by the Illinois variant of regula falsi (Dowell & Jarratt 1971, BIT 11, 168:
superlinear, order ≈ 1.44, never leaves the bracket), to a bracket of 10⁻¹² h.  The located time and state
are therefore accurate to the method's order: their error is the state's global error O(h^p), not the O(h²)
of interpolating linearly between steps, and not limited by a cubic Hermite interpolant's O(h⁴) either.
Searching back from x_{k+1}, which the step leaves in place, spares the time loop a copy of every member's
state at every step (for Example 2's explicit vi, 15 % of the step), and x_{k+1}'s bits are the same in every
layout.  Each iteration is one step of the one member on a one-lane block, the same arithmetic as in any
block width, so crossings are bitwise independent of chunking, lanes and threads; a root search costs 3–6
steps of one member per crossing, nothing between them.

Expressions are read by sympy, as model files are, and printed into one generated lane function
(:mod:`kernels.models.codegen`): ``section_values(state..., c, out)`` writes e of every section for every lane.
An expression may name the system's parameters as ``p.<name>`` (indexed as the parameter is shaped: ``p.l[0]``);
their per-member values ride in the last rows of the coefficient block ``c`` (:func:`with_section_parameters`),
so swept parameters move the section member by member.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import InvalidInput
from .lanes import lane_function
from .status import ESCAPED, OK

#: direction name → the sign the kernels read (+1: from below, −1: from above, 0: either)
DIRECTIONS = {"up": 1, "down": -1, "both": 0}
#: the root search's bracket at which it stops, relative to h: far below any method's error in the crossing time
#: (rk4 at h = 1e-3: ~1e-12 s), and reached in a handful of steps, where narrowing it to the last ulps would take
#: as many again through the round-off of e(Φ_τ)
SEARCH_TOLERANCE = 1e-12
#: the root search's largest number of steps per crossing
MAX_SEARCH_STEPS = 100


@dataclass(frozen=True)
class Section:
    """One surface of section: ``expression`` (Python over the space's state variables, scalar), the
    ``direction`` of the crossings kept ("up", "down" or "both"), the state variables ``record``-ed at each
    crossing (None: all) and at most ``max_crossings`` crossings kept per member and call (the rest counted).
    With ``stop``, a member stops at its first crossing (an escape): status ESCAPED, its final state the one
    located there, its later samples NaN.  ``function`` (with no expression): a Python function of the space's
    variables and ``p``, called once with symbols (a model file's ``def section(q, omega, p)``), in place of the
    expression's text."""

    name: str
    expression: str | None
    direction: str = "up"
    record: tuple | None = None
    max_crossings: int = 1000
    stop: bool = False
    function: object = None


def _symbols(space, n: int) -> tuple[dict, dict]:
    """Each state variable as an array of sympy symbols of its per-member shape, and each symbol's flat row."""
    import sympy

    arrays, rows, start = {}, {}, 0
    for variable in space.variables:
        shape = tuple(variable.shape(n))
        names = [f"{variable.name}_{'_'.join(map(str, index))}" for index in np.ndindex(*shape)]
        symbols = [sympy.Symbol(name, real=True) for name in names]
        for offset, symbol in enumerate(symbols):
            rows[symbol] = start + offset
        arrays[variable.name] = np.array(symbols, dtype=object).reshape(shape)
        start += len(symbols)
    return arrays, rows


class SectionParameters:
    """``p`` of a section's expression: ``p.<name>`` is the parameter's symbol, or an array of them shaped as the
    parameter is per member; every symbol read is remembered (``used``, in reading order) with its
    (name, flat index)."""

    def __init__(self, shapes: dict):
        object.__setattr__(self, "_shapes", shapes)
        object.__setattr__(self, "used", {})

    def __getattr__(self, name):
        import sympy

        shapes = object.__getattribute__(self, "_shapes")
        if name.startswith("__") or name not in shapes:
            raise _UnknownParameter(name, shapes)
        used = object.__getattribute__(self, "used")
        symbols = []
        for index in range(int(np.prod(shapes[name], dtype=np.int64))):
            symbol = sympy.Symbol(f"p_{name}_{index}", real=True)
            used.setdefault(symbol, (name, index))
            symbols.append(symbol)
        return symbols[0] if shapes[name] == () else np.array(symbols, dtype=object).reshape(shapes[name])


class _UnknownParameter(Exception):
    def __init__(self, name: str, shapes: dict):
        super().__init__(f"unknown parameter p.{name}; the system's parameters: {', '.join(shapes) or 'none'}")


def _functions() -> dict:
    """The functions (and pi) an expression may name, as sympy has them: the one list the reader and its errors use."""
    import sympy

    return {"sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "exp": sympy.exp, "log": sympy.log,
            "sqrt": sympy.sqrt, "atan2": sympy.atan2, "arctan2": sympy.atan2, "abs": sympy.Abs, "asin": sympy.asin,
            "acos": sympy.acos, "atan": sympy.atan, "sinh": sympy.sinh, "cosh": sympy.cosh, "tanh": sympy.tanh,
            "pi": sympy.pi}


def section_expression(space, n: int, field: str, section, parameters: dict):
    """The sympy expression of one section (its ``expression`` text, or its ``function`` called with symbols),
    refused (InvalidInput naming ``field``) when the text is not a string, names something other than the
    space's variables, ``p.<parameter>`` (``parameters``: name → per-member shape) and :func:`_functions`' names,
    indexes past a variable's shape, is not a scalar, or does not depend on the state.  Also the symbols' rows:
    {symbol: state row} and {symbol: (parameter, flat index)}."""
    import sympy

    allowed = f"the {space.name} space's variables {', '.join(space.names)} (indexed, e.g. {space.names[0]}[0]" \
              f"{'[0]' * (len(space.variables[0].dims) - 1)}), p.<parameter> and {', '.join(_functions())}"
    arrays, rows = _symbols(space, n)
    p = SectionParameters(parameters)
    expression = section.expression
    if section.function is not None and expression is None:
        value = _called(section.function, field, [arrays[name] for name in space.names] + [p])
        expression = f"{section.name}({', '.join(space.names)}, p)"
    else:
        if not isinstance(expression, str) or not expression.strip():
            raise InvalidInput(field, f"must be a Python expression over {allowed}, got {expression!r}")
        try:
            code = compile(expression, "<section>", "eval")
        except SyntaxError as error:
            raise InvalidInput(field, f"is not a Python expression ({error.msg}): {expression!r}") from None
        try:
            value = eval(code, {"__builtins__": {}}, {**arrays, **_functions(), "p": p})  # noqa: S307 - the user's spec
        except NameError as error:
            raise InvalidInput(field, f"{error.name!r} is not known; allowed: {allowed}") from None
        except _UnknownParameter as error:
            raise InvalidInput(field, str(error)) from None
        except IndexError as error:
            raise InvalidInput(field, f"{error} in {expression!r}; shapes: {space.expected(n)}") from None
        except (TypeError, ValueError, AttributeError) as error:
            raise InvalidInput(field, f"cannot be evaluated ({error}): {expression!r}") from None
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise InvalidInput(field, f"must be a scalar; {expression!r} has shape {value.shape} (index it further)")
        value = value.item()
    try:
        value = sympy.sympify(value)
    except sympy.SympifyError:
        raise InvalidInput(field, f"must be a scalar number, got {type(value).__name__}") from None
    if not isinstance(value, sympy.Expr) or not (value.free_symbols & set(rows)):
        raise InvalidInput(field, f"must depend on the state; {expression!r} is the constant {value}")
    return value, rows, p.used


def _called(function, field: str, arguments: list):
    """A model file's section function called with symbols; its failures are bad input naming ``field``."""
    try:
        return function(*arguments)
    except InvalidInput as error:  # a model file's function: its message names the file and line
        raise InvalidInput(field, error.message) from None
    except _UnknownParameter as error:
        raise InvalidInput(field, str(error)) from None
    except Exception as error:  # noqa: BLE001 - any failure of user code is bad input
        raise InvalidInput(field, f"{getattr(function, '__name__', 'section')}(…) failed: {type(error).__name__}: "
                                  f"{error}") from None


def values_source(space, n: int, expressions: list, used: dict) -> str:
    """A generated module with ``section_values(state..., c, out)``: out[s, b] = e_s of lane b.  The (S²)ⁿ layout
    passes q and ω blocks (n, 3, L), the flat layout one block x (rows, L); ``c`` is the coefficient block whose
    last ``len(used)`` rows hold the parameters the expressions name (``used``: symbol → (name, index), in the
    order :func:`with_section_parameters` appends them)."""
    from .models.codegen import lane_function_source

    rows = {}
    for _, row_of, _ in expressions:
        rows.update(row_of)
    if space.layout == "sphere":
        names = {symbol: (f"q[{row // 3}, {row % 3}, b]" if row < 3 * n else
                          f"omega[{(row - 3 * n) // 3}, {row % 3}, b]") for symbol, row in rows.items()}
        arguments, lanes = "q, omega, c, out", "q.shape[2]"
    else:
        names = {symbol: f"x[{row}, b]" for symbol, row in rows.items()}
        arguments, lanes = "x, c, out", "x.shape[1]"
    names.update({symbol: f"c[c.shape[0] - {len(used) - k}, b]" for k, symbol in enumerate(used)})
    body = lane_function_source("section_values", arguments, lanes, names,
                                [(f"out[{s}, b]", expr) for s, (expr, _, _) in enumerate(expressions)],
                                "Each section's expression at every lane's state (generated).")
    return SECTION_HEADER + body


SECTION_HEADER = '''"""Generated by armillary from the sections of a spec; do not edit (regenerated from their expressions)."""

import numpy as np

from armillary.kernels.lanes import lane_function

'''


@dataclass(frozen=True)
class SectionPlan:
    """Sections checked against a space and body count: their generated values module, ``modes`` (2, S): each
    one's direction (+1 up, −1 down, 0 both) and whether it stops members, the capacity (the most crossings
    any of them keeps per member and call) and the parameter components the expressions read, (name, flat
    index) in the order they ride in the coefficients."""

    sections: tuple
    source: str
    modes: np.ndarray
    capacity: int
    parameters: tuple = ()


def plan_sections(sections, space, n: int, parameters: dict | None = None) -> SectionPlan | None:
    """Validate ``sections`` (a sequence of :class:`Section`) for ``space`` with n bodies and the system's
    ``parameters`` (name → per-member shape: what ``p.<name>`` may read); None for none."""
    if not sections:
        return None
    if isinstance(sections, Section):
        sections = (sections,)
    sections = tuple(sections)
    expressions, seen = [], set()
    for section in sections:
        if not isinstance(section, Section):
            raise InvalidInput("section", f"must be kernels.sections.Section, got {type(section).__name__}")
        field = f"section.{section.name}"
        if not section.name.isidentifier() or section.name in seen:
            raise InvalidInput("section", f"names must be distinct identifiers, got {section.name!r}")
        seen.add(section.name)
        if section.direction not in DIRECTIONS:
            raise InvalidInput(f"{field}.direction", f"unknown direction {section.direction!r}; allowed: "
                                                     f"{', '.join(DIRECTIONS)}")
        maximum = section.max_crossings
        if isinstance(maximum, bool) or not isinstance(maximum, (int, np.integer)) or maximum < 1:
            raise InvalidInput(f"{field}.max_crossings", f"must be an integer >= 1, got {maximum!r}")
        unknown = sorted(set(section.record or ()) - set(space.names))
        if unknown:
            raise InvalidInput(f"{field}.record", f"unknown {', '.join(map(str, unknown))}; the {space.name} space "
                                                  f"has {', '.join(space.names)}")
        expressions.append(section_expression(space, n, f"{field}.expression", section, parameters or {}))
    used = {}
    for _, _, read in expressions:
        used.update(read)
    modes = np.array([[DIRECTIONS[s.direction] for s in sections], [int(bool(s.stop)) for s in sections]],
                     dtype=np.int64)
    return SectionPlan(sections, values_source(space, n, expressions, used), modes,
                       max(int(s.max_crossings) for s in sections), tuple(used.values()))


def parameter_shapes(system, n: int) -> dict:
    """What ``p.<name>`` of a section may read: each numeric (not structural) parameter's per-member shape."""
    values = system.broadcast(system.member_count() or 1, n)
    return {p.name: values[p.name].shape[1:] for p in system.definition.parameters if not p.structural}


def with_section_parameters(coef: np.ndarray, plan: SectionPlan | None, params: dict) -> np.ndarray:
    """The coefficients (members, P) with the parameter components ``plan``'s expressions read appended as
    columns (from ``params``, broadcast to members), where the generated ``section_values`` reads them."""
    if plan is None or not plan.parameters:
        return coef
    members = coef.shape[0]
    columns = [np.asarray(params[name], dtype=np.float64).reshape(members, -1)[:, index]
               for name, index in plan.parameters]
    return np.ascontiguousarray(np.column_stack([coef] + columns))


def section_outputs(plan: SectionPlan | None, members: int, rows: int) -> list:
    """The kernels' section outputs: crossing times (members, S, C), states (members, S, C, rows) and counts
    (members, S); with no sections, empty arrays of those ranks.  Times and states are views of crossing-major
    memory, so that the members' j-th crossings lie together and a call touches memory in proportion to the
    crossings it stores (member-major, each member's first crossing fell on pages of its own: 130 µs of page
    faults per member with C = 1000, more than stepping it 2000 times); they are left unfilled: the kernels
    write the first C crossings of each member and :func:`section_results` reads no further than the counts.
    The memory has one member more than the views (times) and one row more (states), so that the views are
    contiguous in neither order whatever S and C, and Numba types them 'A' every time: as plain views, the
    times were 'F' with one section and 'A' with more, and a process compiled its sections kernel once for
    each (5–16 s)."""
    count = len(plan.sections) if plan else 0
    capacity = plan.capacity if plan else 0
    return [np.empty((count, capacity, members + 1))[:, :, :members].transpose(2, 0, 1),
            np.empty((count, capacity, members, rows + 1))[..., :rows].transpose(2, 0, 1, 3),
            np.zeros((members, count), np.int64)]


def section_results(plan: SectionPlan | None, outputs: list, space, n: int, status: np.ndarray,
                    final: np.ndarray) -> dict | None:
    """Each section's crossings by name: ``time`` (members, C) (s), ``count`` (members,) (every crossing found,
    also those past max_crossings) and ``state`` {variable: (members, C, *shape)}, NaN past each member's
    stored crossings, C the most any member stored (at most max_crossings); recorded states put back on the
    manifold (where the method kept them within STATE_TOLERANCE of it; farther ones are left as stepped).
    The flat final states (members, rows) of members a section stopped (``status`` ESCAPED) become the state
    located at their crossing, in place: the kernels step every lane of a block, stopped or not."""
    if plan is None:
        return None
    times, states, counts = outputs
    for s, section in enumerate(plan.sections):
        stopped = (status == ESCAPED) & (counts[:, s] > 0) if section.stop else np.zeros(len(status), bool)
        final[stopped] = states[stopped, s, 0]
    results = {}
    for s, section in enumerate(plan.sections):
        stored = np.minimum(counts[:, s], int(section.max_crossings))
        width = int(stored.max(initial=0))
        found = np.arange(width) < stored[:, np.newaxis]
        time = np.full((len(stored), width), np.nan)
        time[found] = times[:, s, :width][found]
        flat = np.full((len(stored), width, states.shape[-1]), np.nan)
        flat[found] = states[:, s, :width][found]
        state = space.unflatten(flat, n)
        if found.any():
            on_manifold = space.unflatten(flat[found], n)
            try:
                on_manifold = space.project(on_manifold)
            except InvalidInput:
                pass  # a method that drifted off the manifold by more than the tolerance: kept as stepped
            for name, value in on_manifold.items():
                state[name] = state[name].copy()
                state[name][found] = value
        record = section.record or space.names
        results[section.name] = {"time": time, "count": counts[:, s].copy(),
                                 "state": {name: state[name] for name in record}}
    return results


@lane_function
def crossed(direction, before, after):
    """Whether a step from value ``before`` to ``after`` crosses zero in ``direction`` (+1 up, −1 down, 0
    either); half-open, so a zero at a step's end counts for that step only."""
    up = before < 0.0 and after >= 0.0
    down = before > 0.0 and after <= 0.0
    return up if direction > 0 else down if direction < 0 else up or down


@lane_function
def any_crossing(modes, before, after, lane_status):
    """Whether some lane still OK crossed some section in its direction this step: one branch-free sweep over the
    lanes (the drivers search the lanes one by one only then; calling :func:`crossed` per lane and step cost 4×
    a step of Example 2's explicit vi)."""
    count = 0
    for s in range(modes.shape[1]):
        upward = modes[0, s] >= 0
        downward = modes[0, s] <= 0
        for b in range(before.shape[1]):
            up = (before[s, b] < 0.0) & (after[s, b] >= 0.0) & upward
            down = (before[s, b] > 0.0) & (after[s, b] <= 0.0) & downward
            count += (up | down) & (lane_status[b] == OK)
    return count > 0


@lane_function
def illinois_update(bracket, tau, value):
    """One Illinois regula-falsi update of ``bracket`` = [a, f(a), b, f(b), side] with the new point (τ, f(τ))."""
    if (value > 0.0) == (bracket[3] > 0.0):
        bracket[2], bracket[3] = tau, value
        if bracket[4] == -1.0:
            bracket[1] *= 0.5
        bracket[4] = -1.0
    else:
        bracket[0], bracket[1] = tau, value
        if bracket[4] == 1.0:
            bracket[3] *= 0.5
        bracket[4] = 1.0


@lane_function
def next_root_guess(bracket):
    """The regula-falsi point of the bracket, or its midpoint when round-off puts it outside."""
    a, fa, b, fb = bracket[0], bracket[1], bracket[2], bracket[3]
    tau = (a * fb - b * fa) / (fb - fa)
    return tau if a < tau < b else 0.5 * (a + b)


@lane_function
def search_finished(bracket, value, h):
    """Stop at an exact zero, a non-finite value, or a bracket of SEARCH_TOLERANCE·h."""
    return value == 0.0 or not np.isfinite(value) or bracket[2] - bracket[0] <= SEARCH_TOLERANCE * h


@lane_function
def store_crossing(m, s, t, lane_state, section_count, section_time, section_state):
    """Record a member's crossing (time t (s), its flat state ``lane_state``) if its capacity allows; count it."""
    j = section_count[m, s]
    if j < section_time.shape[2]:
        section_time[m, s, j] = t
        for r in range(lane_state.shape[0]):
            section_state[m, s, j, r] = lane_state[r]
    section_count[m, s] = j + 1


@lane_function
def sphere_lane_state(q, omega, out):
    """out ← lane 0 of (q, ω) (n, 3, L) flattened as the section outputs hold it: q's rows, then ω's."""
    n = q.shape[0]
    for i in range(n):
        for k in range(3):
            out[3 * i + k] = q[i, k, 0]
            out[3 * n + 3 * i + k] = omega[i, k, 0]


@lane_function
def crossing_to_locate(b, s, m, members, lane_status, modes, before, after):
    """Whether lane b (member m) crossed section s in this step and is to be searched: a member, still OK (not
    stopped by an earlier section of this step), its values on either side of zero in the section's direction."""
    return m < members and lane_status[b] == OK and crossed(modes[0, s], before[s, b], after[s, b])


@lane_function
def search_start(b, s, h, modes, before, after):
    """A crossing's search on a one-lane block: the solver's flags (active, code, iterations), the sections'
    values, and the bracket [a, f(a), b, f(b), side] = [0, e(x_k), h, e(x_{k+1}), 0] of lane b's section s."""
    return (np.ones(1, np.bool_), np.zeros(1, np.int64), np.zeros(1, np.int64), np.empty((modes.shape[1], 1)),
            np.array([0.0, before[s, b], h, after[s, b], 0.0]))


@lane_function
def stop_at_escape(b, s, step, modes, active, lane_status, lane_failed):
    """Lane b's crossing of section s: if that section stops members, lane b is ESCAPED at ``step`` (inactive)."""
    if modes[1, s] != 0:
        lane_status[b] = ESCAPED
        lane_failed[b] = step
        active[b] = False


# Stages bound into the drivers as ``locate_crossings`` (see kernels.driver and kernels.flat_driver): the
# (S²)ⁿ layout's and the flat layout's, and nothing for kernels without sections.

def sphere_locate_template(t0, h, q, omega, before, after, md, mf, c, topology, options, active, lane_status,
                           lane_failed, step, first, members, modes, section_count, section_time, section_state):
    """Every crossing of the step (the call's ``step``-th) from t0 (s) to t0 + h that ended in the lanes' state
    (q, ω), located by re-stepping the member alone back from there (see the module docstring) and recorded for
    members still OK; a section with stop (``modes[1]``) stops the member there (status ESCAPED, inactive)."""
    n = q.shape[0]
    lanes = q.shape[2]
    # one member's one-lane block, allocated once for every crossing of the step
    q1 = np.empty((n, 3, 1))
    omega1 = np.empty((n, 3, 1))
    md1 = np.empty((md.shape[0], 1))
    mf1 = np.empty((mf.shape[0], mf.shape[1], 1))
    c1 = np.empty((c.shape[0], 1))
    work1 = integrator_allocate(n, 1)  # noqa: F821 (bound at specialisation)
    lane_state = np.empty(6 * n)
    for b in range(lanes):
        m = first + b
        for s in range(modes.shape[1]):
            if not crossing_to_locate(b, s, m, members, lane_status, modes, before, after):
                continue
            md1[:, 0] = md[:, b]
            mf1[:, :, 0] = mf[:, :, b]
            c1[:, 0] = c[:, b]
            active1, code1, iterations1, values1, bracket = search_start(b, s, h, modes, before, after)
            tau = h
            for _ in range(MAX_SEARCH_STEPS):
                tau = next_root_guess(bracket)
                q1[:, :, 0] = q[:, :, b]
                omega1[:, :, 0] = omega[:, :, b]
                integrator_begin(q1, omega1, md1, mf1, c1, topology, tau - h, options, work1)  # noqa: F821
                integrator_step(t0 + h, q1, omega1, md1, mf1, c1, topology, tau - h, options, work1,  # noqa: F821
                                active1, code1, iterations1)
                section_values(q1, omega1, c1, values1)  # noqa: F821
                value = values1[s, 0]
                illinois_update(bracket, tau, value)
                if search_finished(bracket, value, h):
                    break
            sphere_lane_state(q1, omega1, lane_state)
            store_crossing(m, s, t0 + tau, lane_state, section_count, section_time, section_state)
            stop_at_escape(b, s, step, modes, active, lane_status, lane_failed)


def flat_locate_template(t0, h, x, before, after, n, c, topology, options, active, lane_status, lane_failed, step,
                         first, members, modes, section_count, section_time, section_state):
    """The flat layout's :func:`sphere_locate_template`: the re-step also applies the system's constraints."""
    rows = x.shape[0]
    lanes = x.shape[1]
    # one member's one-lane block, allocated once for every crossing of the step
    x1 = np.empty((rows, 1))
    c1 = np.empty((c.shape[0], 1))
    work1 = integrator_allocate(rows, n, 1)  # noqa: F821 (bound at specialisation)
    system_work1 = vector_field_work(rows, n, 1)  # noqa: F821
    moved1 = np.zeros(1)
    for b in range(lanes):
        m = first + b
        for s in range(modes.shape[1]):
            if not crossing_to_locate(b, s, m, members, lane_status, modes, before, after):
                continue
            c1[:, 0] = c[:, b]
            active1, code1, iterations1, values1, bracket = search_start(b, s, h, modes, before, after)
            tau = h
            for _ in range(MAX_SEARCH_STEPS):
                tau = next_root_guess(bracket)
                x1[:, 0] = x[:, b]
                integrator_begin(x1, n, c1, topology, tau - h, options, work1)  # noqa: F821
                integrator_step(x1, n, c1, topology, t0 + h, tau - h, options, work1, active1, code1,  # noqa: F821
                                iterations1)
                system_constrain(x1, n, c1, topology, system_work1, moved1)  # noqa: F821
                section_values(x1, c1, values1)  # noqa: F821
                value = values1[s, 0]
                illinois_update(bracket, tau, value)
                if search_finished(bracket, value, h):
                    break
            store_crossing(m, s, t0 + tau, x1[:, 0], section_count, section_time, section_state)
            stop_at_escape(b, s, step, modes, active, lane_status, lane_failed)


def dense_locate_template(t0, h, dense, before, after, lane_status, lane_failed, step, first, members, modes,
                          section_count, section_time, section_state, lane_state):
    """The crossings in one member's accepted step of a method with dense output (rk45; a one-lane block) from
    t0 (s), of size h (s): each the root of e on the step's dense output, by the search of this module; returns
    the time (s) at which a section with stop stopped the member (status ESCAPED), else inf.  ``dense`` is what
    the layout's bound ``dense_values(theta, dense, values, lane_state)`` reads to write the sections' values and
    the flat state at t0 + θh; ``lane_state`` (rows,) is scratch."""
    stopped_at = np.inf
    inactive = np.zeros(1, np.bool_)
    for s in range(modes.shape[1]):
        if not crossing_to_locate(0, s, first, members, lane_status, modes, before, after):
            continue
        values, bracket = search_start(0, s, h, modes, before, after)[3:]
        tau = h
        for _ in range(MAX_SEARCH_STEPS):
            tau = next_root_guess(bracket)
            dense_values(tau / h, dense, values, lane_state)  # noqa: F821 (bound at specialisation)
            illinois_update(bracket, tau, values[s, 0])
            if search_finished(bracket, values[s, 0], h):
                break
        store_crossing(first, s, t0 + tau, lane_state, section_count, section_time, section_state)
        stop_at_escape(0, s, step, modes, inactive, lane_status, lane_failed)
        if lane_status[0] != OK:
            stopped_at = min(stopped_at, t0 + tau)
    return stopped_at


def no_sphere_locate(t0, h, q, omega, before, after, md, mf, c, topology, options, active, lane_status, lane_failed,
                     step, first, members, modes, section_count, section_time, section_state):
    """Kernels without sections: nothing to locate."""


def no_flat_locate(t0, h, x, before, after, n, c, topology, options, active, lane_status, lane_failed, step, first,
                   members, modes, section_count, section_time, section_state):
    """Kernels without sections: nothing to locate."""


@lane_function
def no_sphere_values(q, omega, c, out):
    """``section_values`` of kernels without sections."""


@lane_function
def no_flat_values(x, c, out):
    """``section_values`` of kernels without sections."""


#: the drivers' section stages by layout, with sections and without
SECTION_STAGES = {("sphere", True): (("locate_crossings", sphere_locate_template),),
                  ("sphere", False): (("locate_crossings", no_sphere_locate),),
                  ("flat", True): (("locate_crossings", flat_locate_template),),
                  ("flat", False): (("locate_crossings", no_flat_locate),)}
NO_SECTION_VALUES = {"sphere": no_sphere_values, "flat": no_flat_values}
