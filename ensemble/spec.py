"""The run spec (TOML): parsing, validation and the canonical form stored with every run.

Every error is an :class:`~kernels.errors.InvalidInput` whose field is the dotted key
(``integrator.dt``) and whose message names the allowed values.  Unknown keys are errors.  What a
system's state is decides the ``[ensemble]`` samplers and their keys and the ``[output]`` variables
(declared by its space, :mod:`kernels.spaces`).  Cluster kinds beyond ``local`` and ``address`` are
registered by the layer that provides them (``jobs`` registers ``slurm``).
"""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
from dataclasses import asdict, dataclass, field, replace

from armillary.kernels import DEVICES, METHODS, SYSTEMS, InvalidInput, methods_for
from armillary.kernels.integration import temperature_schedule_knots
from armillary.kernels.integrators import ACTIVE_KEYS, NON_NEGATIVE_OPTIONS, OPTION_DOCS
from armillary.kernels.models import build_model, declared_model
from armillary.kernels.systems import system_definition
from armillary.kernels.spaces import SPACES
from armillary.kernels.systems.base import SCALAR

from .cluster_kinds import CLUSTER_KEYS, parse_cluster_section
from .spec_keys import SPEC_KEYS, STATISTICS

#: initial conditions every space has; its samplers (``uniform``, …) come on top
GENERIC_INITIAL = ("preset", "perturb", "file")
#: steps per task segment when the spec does not say (rounded to whole save intervals)
DEFAULT_CHECKPOINT_STEPS = 10_000
DEFAULT_CHUNK = 1_000
#: sizes beyond which a spec is refused before anything is planned (the plan and the store's
#: records grow with them): members, saved samples per member, (chunk, segment) records, sweep points
MAX_MEMBERS = 10**9
MAX_SAMPLES = 10**8
MAX_RECORDS = 10**7
MAX_SWEEP_POINTS = 10**6
#: spec fields added after stores already existed: left out of the identity while unused
OPTIONAL_FIELDS = ("option_sweeps", "skin", "device", "fma", "lyapunov", "model_source", "lyapunov_spectrum", "megno", "sali", "until", "section", "escape",
                   "sections")


def output_variables(space, definition=None) -> tuple[str, ...]:
    """What ``[output] variables`` may list for a space: its state, the energy, its diagnostics; and
    ``min_separation`` (per member, the least close-encounter separation) for a system ``definition``
    that declares encounters."""
    encounters = ("min_separation",) if getattr(definition, "encounter", None) is not None else ()
    return space.names + ("energy",) + tuple(d.name for d in space.diagnostics + space.optional_diagnostics) + encounters


def initial_kinds(space) -> tuple[str, ...]:
    return GENERIC_INITIAL + tuple(space.samplers)


#: the bath options a spec may sweep (``temperature = { values = [...] }``) and their store coordinates
OPTION_SWEEPS = {"temperature": "bath_temperature", "friction": "bath_friction", "diffusion": "bath_diffusion",
                 "cooling_rate": "bath_cooling_rate",
                 "active.speed": "active_speed", "active.rotational_diffusion": "active_rotational_diffusion"}


def option_unit(path: str) -> str:
    """The unit of a sweepable bath option (``path`` as in OPTION_SWEEPS), from its declaration: a method option's
    in OPTION_DOCS, ``active``'s keys in SPEC_KEYS."""
    return SPEC_KEYS[f"integrator.{path}"].unit if "." in path else OPTION_DOCS[path][0]


#: a ``[system.params]`` key that sweeps one component of a parameter: ``name[k]``, k 0-based without leading zeros
COMPONENT_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[(0|[1-9][0-9]*)\]")
#: a TOML bare key (others are written quoted)
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Sweep:
    """One swept parameter, or one component of it: its grid of values (members are spread over the
    outer product of sweeps).  ``name`` is the key as written, also the store's coordinate: ``phase``
    sweeps the whole parameter, ``phase[1]`` only its component 1 along its first own axis."""

    name: str
    values: tuple[float, ...]

    @property
    def parameter(self) -> str:
        """The name of the swept parameter."""
        return self.name.partition("[")[0]

    @property
    def component(self) -> int | None:
        """The index of the swept component, None when the whole parameter is swept."""
        match = COMPONENT_KEY.fullmatch(self.name)
        return int(match[2]) if match else None


@dataclass(frozen=True)
class Spec:
    """A validated run spec.  ``n_steps`` = t_end / dt exactly (a whole number of steps)."""

    system: str
    preset: str | None
    params: dict
    sweeps: tuple[Sweep, ...]
    method: str
    dt: float
    t_end: float
    n_steps: int
    save_every: int
    checkpoint_every: int
    options: dict
    members: int
    seed: int
    initial: str
    scale: float
    omega_scale: float
    initial_path: str | None
    chunk: int
    store: str
    variables: tuple[str, ...]
    cluster: dict = field(default_factory=dict)
    lyapunov: dict | None = None  # {"d0": …, "renormalise_every": …} when Benettin shadows are carried
    #: the other chaos indicators, each {"d0", "renormalise_every"} (the spectrum also "count"); all share
    #: one set of shadows (see :attr:`shadows`)
    lyapunov_spectrum: dict | None = None
    megno: dict | None = None
    sali: dict | None = None
    #: ``[ensemble] until``: {"statistic", "half_width", "batch", "max_members"}, or None for a fixed size
    until: dict | None = None
    #: ``[analysis] section``: {"expression", "direction", "record", "max_crossings"}, or None
    section: dict | None = None
    #: ``[analysis] escape``: {"expression", "direction", "stop"}, or None
    escape: dict | None = None
    #: ``[analysis] sections``: name → a table as ``section``'s, for several named sections, or None
    sections: dict | None = None
    #: the options of a space-declared sampler beyond ``omega_scale`` (e.g. ``particles``), None if it has none
    sampler_options: dict | None = None
    #: a model file's path (absolute; for messages) and its text, which the run is built from wherever it
    #: runs (stored specs, SLURM array tasks and Dask workers carry the text, never read the file)
    model: str | None = None
    model_source: str | None = None
    #: read back from a store (``parse_spec(stored=True)``): its model, if any, is known by what its text
    #: declares and never run (:attr:`armillary.ensemble.plan.Plan.system`)
    stored: bool = False
    #: sweeps of a stochastic method's bath (``[integrator] temperature = { values = [...] }``, friction,
    #: cooling_rate, active's speed and rotational_diffusion), named by their store coordinate (OPTION_SWEEPS);
    #: ``options`` keeps their tables as written.  None without any
    option_sweeps: tuple[Sweep, ...] | None = None
    #: system-parallel runs: the neighbour lists' Verlet skin (m, chord), or "auto"; None: "auto" (not written)
    skin: float | str | None = None
    #: ``[execution] device``: "cuda" steps the members on a CUDA GPU; None: the CPU (not written).  Part of the
    #: identity: a GPU's results differ from the CPU's by round-off, so a store is finished where it was begun
    device: str | None = None
    #: ``[execution] fma``: False compiles the GPU's kernels without fused multiply-adds (still not the CPU's bits);
    #: None: true (not written; part of the identity when false)
    fma: bool | None = None
    #: ``[execution] ranks``: the MPI ranks ``armillary submit`` asks SLURM for (one system-mode member over all of
    #: them); None: 1.  Not part of the identity: the results are the same bits on any number of ranks
    ranks: int | None = None
    #: ``[execution] threads_per_rank``: each rank's kernel threads (and a SLURM task's CPUs); None: the CPUs a rank has
    threads_per_rank: int | None = None

    @property
    def grid(self) -> tuple[Sweep, ...]:
        """Every sweep the members are spread over: the parameters', then the bath's (the last fastest)."""
        return self.sweeps + (self.option_sweeps or ())

    @property
    def sampler(self) -> dict:
        """The options the chosen sampler draws with: ``omega_scale`` and its own."""
        return {"omega_scale": self.omega_scale, **(self.sampler_options or {})}

    @property
    def shadows(self) -> dict | None:
        """The shadows every member carries for the configured indicators: {"count", "d0",
        "renormalise_every"} (count: the spectrum's, 2 for SALI, else 1), or None."""
        tables = [t for t in (self.lyapunov, self.lyapunov_spectrum, self.megno, self.sali) if t is not None]
        if not tables:
            return None
        count = max([1] + [t.get("count", 1) for t in tables] + [2] * (self.sali is not None))
        return {"count": count, "d0": tables[0]["d0"], "renormalise_every": tables[0]["renormalise_every"]}

    @property
    def sweep_points(self) -> int:
        return math.prod(len(s.values) for s in self.grid)

    def identity(self) -> str:
        """Canonical JSON of everything that determines the store's contents (not where it lives or
        which cluster computes it): two specs with the same identity produce bitwise-equal stores."""
        fields = asdict(self)
        # the model's text decides, not its file; ranks and threads never change a bit
        for name in ("store", "cluster", "t_end", "model", "stored", "ranks", "threads_per_rank"):
            fields.pop(name)
        for name in OPTIONAL_FIELDS:  # absent when unused, so stores made before they existed still match
            if fields[name] is None:
                fields.pop(name)
        options = fields.pop("sampler_options")
        if options is not None:  # under the sampler's name (stores of before state spaces said "particles")
            fields[self.initial] = options
        return json.dumps(fields, sort_keys=True)

    @property
    def surfaces(self) -> dict:
        """Every surface of section by name: ``section`` (named "section") first, then ``sections``'."""
        return {**({"section": self.section} if self.section is not None else {}), **(self.sections or {})}

    def to_toml(self) -> str:
        """The effective spec (after defaults and overrides) as TOML text that loads back to ``self``."""
        params = dict(self.params)
        params.update({s.name: {"values": list(s.values)} for s in self.sweeps})
        sections = {
            "system": ({"model": self.model, "model_source": self.model_source, "params": params} if self.model else
                       {"name": self.system, "preset": self.preset, "params": params}),
            "integrator": {"method": self.method, "dt": self.dt, "t_end": self.t_end, "save_every": self.save_every,
                           "checkpoint_every": self.checkpoint_every, "skin": self.skin, **self.options},
            "ensemble": {"members": None if self.until else self.members, "until": self.until, "seed": self.seed, "initial": self.initial, "scale": self.scale,
                         "omega_scale": self.omega_scale, "path": self.initial_path, "chunk": self.chunk,
                         **(self.sampler_options or {})},
            "output": {"store": self.store, "variables": list(self.variables)},
            "cluster": dict(self.cluster),
            "execution": {"device": self.device, "fma": self.fma, "ranks": self.ranks,
                          "threads_per_rank": self.threads_per_rank},
            "analysis": {name: getattr(self, name) for name in INDICATORS + ("section", "escape", "sections")},
        }
        lines = []
        for section, entries in sections.items():
            lines.append(f"[{section}]")
            lines += [f"{key} = {_toml_value(value)}" for key, value in entries.items() if value is not None]
            lines.append("")
        return "\n".join(lines)


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):  # JSON's escapes are TOML's, but for characters beyond the BMP: kept as they are
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an absent key (None: a section whose model file gives its expression) stays absent
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items() if v is not None) + " }"
    raise TypeError(f"cannot write {value!r} as TOML")


def _toml_key(key: str) -> str:
    """A key as TOML reads it back: bare if it can be, else quoted (``"phase[1]"``)."""
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key)


#: every ``section.key`` a spec has been read for in this process (what the docs' completeness test checks)
READ_FIELDS: set[str] = set()


def declared_fields() -> set[str]:
    """Every ``section.key`` a spec may hold: SPEC_KEYS, the methods' options, the spaces' sampler keys and the
    cluster kinds' keys."""
    return (set(SPEC_KEYS) | {f"integrator.{key}" for method in METHODS.values() for key in method.options}
            | {f"ensemble.{key}" for space in SPACES.values() for sampler in space.samplers.values()
               for key in sampler.options}
            | {f"cluster.{key}" for keys in CLUSTER_KEYS.values() for key in keys})


class _Section:
    """Typed access to one table of the spec; remembers which keys were read so leftovers are errors.  Only
    declared keys may be read (:func:`declared_fields`): the docs' spec reference is made from the declarations."""

    def __init__(self, name: str, table, declared: str | None = None):
        """``declared``: the table whose key declarations this one's keys share (e.g. each of
        ``analysis.sections``' tables: ``analysis.section``), by default its own."""
        if not isinstance(table, dict):
            raise InvalidInput(name, f"must be a table [{name}], got {type(table).__name__}")
        self.name, self.table, self.used, self.declared = name, table, set(), declared or name

    def field(self, key: str) -> str:
        return f"{self.name}.{key}"

    def get(self, key, kind, default=None, required=False):
        declared = f"{self.declared}.{key}"
        if declared not in declared_fields():
            raise KeyError(f"spec key {declared} is read but not declared (ensemble/spec_keys.py)")
        READ_FIELDS.add(declared)
        self.used.add(key)
        if key not in self.table:
            if required:
                raise InvalidInput(self.field(key), "is required")
            return default
        value = self.table[key]
        ok = {
            "str": isinstance(value, str),
            "int": isinstance(value, int) and not isinstance(value, bool),
            "float": isinstance(value, (int, float)) and not isinstance(value, bool),
            "bool": isinstance(value, bool),
            "list": isinstance(value, list),
            "table": isinstance(value, dict),
        }[kind]
        if not ok:
            raise InvalidInput(self.field(key), f"must be {_KIND_NAMES[kind]}, got {value!r}")
        return float(value) if kind == "float" else value

    def positive(self, key, kind, default=None, required=False, minimum=0, strict=True):
        value = self.get(key, kind, default, required)
        if value is None:
            return None
        if not math.isfinite(value) or (value <= minimum if strict else value < minimum):
            relation = ">" if strict else ">="
            raise InvalidInput(self.field(key), f"must be a finite number {relation} {minimum}, got {value!r}")
        return value

    def choice(self, key, allowed, default=None, required=False):
        value = self.get(key, "str", default, required)
        if value is not None and value not in allowed:
            raise InvalidInput(self.field(key), f"unknown value {value!r}; allowed: {', '.join(allowed)}")
        return value

    def finish(self):
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            allowed = ", ".join(sorted(self.used))
            raise InvalidInput(self.field(unknown[0]), f"unknown key; allowed in [{self.name}]: {allowed}")


_KIND_NAMES = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
               "list": "a list", "table": "a table"}
_SECTIONS = ("system", "integrator", "ensemble", "output", "cluster", "execution", "analysis")
#: command-line / API overrides and the spec key each replaces
OVERRIDES = {"store": ("output", "store"), "members": ("ensemble", "members"),
             "workers": ("cluster", "workers"), "scheduler": ("cluster", "scheduler"), "device": ("execution", "device")}


def _sweep(name: str, value: dict, where: str | None = None) -> Sweep:
    where = where or f"system.params.{name}"
    if set(value) not in ({"values"}, {"linspace"}):
        raise InvalidInput(where, f"a sweep is {{ values = [...] }} or {{ linspace = [a, b, n] }}, got keys {sorted(value)}")
    if "values" in value:
        values = value["values"]
        if not (isinstance(values, list) and values and all(_is_number(v) for v in values)):
            raise InvalidInput(where + ".values", f"must be a non-empty list of numbers, got {values!r}")
        return Sweep(name, tuple(float(v) for v in values))
    grid = value["linspace"]
    if not (isinstance(grid, list) and len(grid) == 3 and _is_number(grid[0]) and _is_number(grid[1])
            and isinstance(grid[2], int) and not isinstance(grid[2], bool) and grid[2] >= 1):
        raise InvalidInput(where + ".linspace", f"must be [start, stop, count] with count an integer >= 1, got {grid!r}")
    start, stop, count = float(grid[0]), float(grid[1]), grid[2]
    if count > MAX_SWEEP_POINTS:
        raise InvalidInput(where + ".linspace", f"count must be <= {MAX_SWEEP_POINTS:.0e}, got {count}")
    return Sweep(name, tuple(start + (stop - start) * k / (count - 1) if count > 1 else start for k in range(count)))


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _model_section(section: _Section, directory: str, stored: bool) -> tuple:
    """The definition, path and text of ``[system] model`` (a path relative to the spec's ``directory``;
    ``model_source``, which stored specs carry, replaces reading it).  A store's own spec (``stored``) gives
    the model as its text declares it (:func:`~armillary.kernels.models.declared_model`), never run: a store's
    model code runs only when the store is run or resumed."""
    path, source = section.get("model", "str"), section.get("model_source", "str")
    for key, why in (("name", "a model file stands for the system's name"),
                     ("preset", "a model's initial state is its initial_state(p)")):
        if key in section.table:
            raise InvalidInput(section.field(key), f"give either model or {key}, not both ({why})")
    path = os.path.normpath(os.path.join(directory, path))
    if source is None:
        return (*read_model_file(path), path)
    return (declared_model(source, path) if stored else build_model(source, path)), source, path


def read_model_file(path) -> tuple:
    """(definition, text) of the model file at ``path``; InvalidInput naming it if it cannot be read."""
    path = os.fspath(path)
    source = _read_text(path, "system.model")
    return build_model(source, path), source


def _read_text(path: str, field: str) -> str:
    """The text of the file at ``path``; InvalidInput(field) naming it if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as error:
        raise InvalidInput(field, f"cannot read {path!r}: {error.strerror}") from None


def _system_section(section: _Section, directory: str, stored: bool) -> tuple:
    """Name, preset, fixed parameters and sweeps of ``[system]``, and the model's path and text (None for a
    built-in system).  In a store's own spec, a model's parameters are taken as written (checked when the
    store was made; the model is not run to list them)."""
    if "model" in section.table:
        definition, source, path = _model_section(section, directory, stored)
        name, preset = definition.name, ("initial" if "initial" in definition.presets else None)
    else:
        if "model_source" in section.table:
            raise InvalidInput("system.model_source", "is written by armillary beside model = \"path\"; give model")
        name = section.choice("name", tuple(sorted(SYSTEMS)), required=True)
        definition, source, path = SYSTEMS[name], None, None
        preset = section.choice("preset", tuple(sorted(definition.presets)))
    params = section.get("params", "table", {})
    section.finish()
    fixed, sweeps = {}, []
    declared = None if stored and source is not None else {p.name: p for p in definition.parameters}
    for key, value in params.items():
        where = f"system.params.{key}"
        component = COMPONENT_KEY.fullmatch(key)
        if component is None and ("[" in key or "]" in key):
            raise InvalidInput(where, 'must be a parameter name, or name[k] to sweep its component k (0-based, a '
                               'whole number without leading zeros), e.g. "phase[1]"')
        parameter = component[1] if component else key
        if declared is not None and parameter not in declared:
            allowed = ", ".join(declared) or "none"
            owner = f"the model file {path}" if path else name
            raise InvalidInput(where, f"unknown parameter of {owner}; allowed: {allowed}")
        structural = declared is not None and declared[parameter].structural
        if structural and (component or (isinstance(value, dict) and set(value) in ({"values"}, {"linspace"}))):
            raise InvalidInput(where, "is structural and cannot be swept")
        if isinstance(value, dict) and not structural:  # a table is a sweep, but a structural value's own (types)
            if declared is not None and component and declared[parameter].shape == SCALAR:
                raise InvalidInput(where, f"{parameter} is a scalar, it has no components; sweep it whole, "
                                   f"{parameter} = {{ values = [...] }}")
            sweeps.append(_sweep(key, value))
        elif component:
            raise InvalidInput(where, "a component takes a sweep, { values = [...] } or { linspace = [a, b, n] }; "
                               f"give fixed values for all of {parameter} under its name")
        else:
            fixed[key] = value
    swept_whole = {s.parameter for s in sweeps if s.component is None}
    for sweep in sweeps:
        if sweep.component is not None and sweep.parameter in swept_whole:
            raise InvalidInput(f"system.params.{sweep.name}", f"cannot be swept together with a sweep of the whole "
                               f"{sweep.parameter}")
    return name, preset, fixed, tuple(sweeps), path, source


def _integrator_section(section: _Section, definition) -> dict:
    """``[integrator]``; the method checked against the system's ``definition`` (None: a store's model, not run)."""
    method = section.choice("method", tuple(METHODS), required=True)
    if definition is not None and not METHODS[method].supports(definition):
        raise InvalidInput("integrator.method", f"{method!r} does not support {definition.name} (space "
                           f"{definition.space.name}); allowed: {', '.join(methods_for(definition))}")
    dt = section.positive("dt", "float", required=True)
    t_end = section.positive("t_end", "float", required=True)
    if not t_end / dt < 2**53:  # beyond, steps are no longer whole numbers of a float64 count
        raise InvalidInput("integrator.t_end", f"must be fewer than 2^53 steps of dt = {dt!r} s, got {t_end!r}")
    n_steps = round(t_end / dt)
    if n_steps < 1 or abs(n_steps * dt - t_end) > 1e-9 * t_end:
        raise InvalidInput("integrator.t_end", f"must be a whole number of steps dt = {dt!r} s, got {t_end!r}")
    save_every = section.positive("save_every", "int", 1)
    if n_steps // save_every + 1 > MAX_SAMPLES:
        raise InvalidInput("integrator.save_every", f"{n_steps} steps saved every {save_every} make "
                           f"{n_steps // save_every + 1} samples per member; at most {MAX_SAMPLES:.0e} (save less often)")
    default_segment = max(1, DEFAULT_CHECKPOINT_STEPS // save_every) * save_every
    checkpoint_every = section.positive("checkpoint_every", "int", default_segment)
    if checkpoint_every % save_every:
        raise InvalidInput("integrator.checkpoint_every",
                           f"must be a multiple of save_every = {save_every} (segments end on saved samples), "
                           f"got {checkpoint_every}")
    skin = section.get("skin", "str" if isinstance(section.table.get("skin"), str) else "float")
    if skin is not None and skin != "auto" and not (isinstance(skin, float) and math.isfinite(skin) and skin > 0):
        raise InvalidInput(section.field("skin"), f'must be "auto" or a finite number > 0 (m, chord), got {skin!r}')
    options, sweeps = {}, []
    for key, default in METHODS[method].options.items():
        if key in METHODS[method].choices:  # named values (formulation)
            value = section.choice(key, METHODS[method].choices[key])
            if value is not None:
                options[key] = value
            continue
        if key == "temperature_schedule":  # a list of [t, T] knots
            knots = section.get(key, "list")
            if knots is not None:
                try:
                    options[key] = temperature_schedule_knots(knots).tolist()
                except InvalidInput as refused:
                    raise InvalidInput(section.field(key), refused.message) from None
                for other in ("temperature", "cooling_rate"):
                    if other in section.table:
                        raise InvalidInput(section.field(key), f"give either temperature_schedule or {other}, not "
                                           "both (the schedule starts at its first knot's temperature)")
            continue
        if key == "active":  # a table of its own keys
            table = section.get(key, "table")
            if table is not None:
                options[key] = _active_table(_Section(section.field(key), table), sweeps)
            continue
        if key in OPTION_SWEEPS and isinstance(section.table.get(key), dict):
            options[key] = _option_sweep(section, key, key, sweeps)
            continue
        kind = "bool" if isinstance(default, bool) else "int" if key.endswith(("iterations", "steps")) else "float"
        value = section.get(key, kind)
        if value is not None:
            _check_option_value(section.field(key), key, value, kind)
            options[key] = value
    if METHODS[method].stochastic and "temperature" not in options and "temperature_schedule" not in options:
        raise InvalidInput(section.field("temperature"), f"{method} needs the bath's temperature (J, k_B = 1), "
                           "a number >= 0, or a temperature_schedule")
    if "diffusion" in options:
        if "friction" in options:
            raise InvalidInput(section.field("diffusion"), "give either friction or diffusion, not both (D = T/ζ)")
        temperature = options.get("temperature", (options.get("temperature_schedule") or [[0, 0]])[0][1])
        if not min(temperature["values"] if isinstance(temperature, dict) else [temperature]) > 0:
            raise InvalidInput(section.field("diffusion"), "needs a temperature > 0: the friction coefficient is "
                               "ζ = T/D")
    unknown = sorted(set(section.table) - section.used)
    other = {key for m in METHODS.values() for key in m.options}
    for key in unknown:
        if key in other:
            allowed = ", ".join(METHODS[method].options) or "none"
            raise InvalidInput(section.field(key), f"is not an option of method {method!r}; its options: {allowed}")
    section.finish()
    return dict(method=method, dt=dt, t_end=t_end, n_steps=n_steps, save_every=save_every,
                checkpoint_every=checkpoint_every, options=options, option_sweeps=tuple(sweeps) or None, skin=skin)


def _check_option_value(field: str, key: str, value, kind: str) -> None:
    """A method option's value: >= 0 for NON_NEGATIVE_OPTIONS, > 0 for the other numbers."""
    if key in NON_NEGATIVE_OPTIONS and not value >= 0:
        raise InvalidInput(field, f"must be >= 0, got {value!r}")
    if kind != "bool" and key not in NON_NEGATIVE_OPTIONS and not value > 0:
        raise InvalidInput(field, f"must be > 0, got {value!r}")


def _option_sweep(section: _Section, key: str, path: str, sweeps: list) -> dict:
    """A swept bath option (``path`` as in OPTION_SWEEPS): its Sweep, named by its store coordinate, appended to
    ``sweeps``; every value checked as the option's; returns the table as a stored spec writes it back."""
    sweep = _sweep(OPTION_SWEEPS[path], section.get(key, "table"), section.field(key))
    for value in sweep.values:
        if key in ACTIVE_KEYS:
            if not (value > 0 if ACTIVE_KEYS[key] is None else value >= 0):
                raise InvalidInput(section.field(key), f"every value must be {'>' if ACTIVE_KEYS[key] is None else '>='}"
                                   f" 0, got {value!r}")
        else:
            _check_option_value(section.field(key), key, value, "float")
    sweeps.append(sweep)
    return {"values": list(sweep.values)}


def _active_table(section: _Section, sweeps: list) -> dict:
    """``[integrator] active = { speed, rotational_diffusion }``: both required, speed > 0, rotational_diffusion
    >= 0 (rad/s and rad²/s on the unit sphere); either may be a sweep, appended to ``sweeps``."""
    values = {}
    for key, least in ACTIVE_KEYS.items():
        if isinstance(section.table.get(key), dict):
            values[key] = _option_sweep(section, key, f"active.{key}", sweeps)
        else:
            values[key] = section.positive(key, "float", required=True, strict=least is None)
    section.finish()
    return values


def _until(section: _Section) -> dict | None:
    """``until = { statistic, half_width, batch, max_members }``: add members batch by batch until the 95 %
    interval of the statistic at every sweep point is within ± half_width (see :mod:`.execute`)."""
    table = section.get("until", "table")
    if table is None:
        return None
    if "members" in section.table:
        raise InvalidInput("ensemble.members", "leave it out with ensemble.until: the rule sizes the run "
                           "(until.max_members caps it)")
    until = _Section("ensemble.until", table)
    statistic = until.choice("statistic", tuple(STATISTICS), required=True)
    half_width = until.get("half_width", "float", required=True)
    if not (math.isfinite(half_width) and half_width > 0):
        raise InvalidInput("ensemble.until.half_width", f"must be a finite number > 0, got {half_width!r}")
    batch = until.positive("batch", "int", 1000, minimum=1, strict=False)
    max_members = until.positive("max_members", "int", 1_000_000, minimum=1, strict=False)
    until.finish()
    if max_members > MAX_MEMBERS:
        raise InvalidInput("ensemble.until.max_members", f"must be <= {MAX_MEMBERS:.0e}, got {max_members}")
    return {"statistic": statistic, "half_width": half_width, "batch": batch, "max_members": max_members}


def _ensemble_section(section: _Section, space) -> dict:
    until = _until(section)
    members = until["max_members"] if until else section.positive("members", "int", required=True, minimum=1,
                                                                   strict=False)
    if members > MAX_MEMBERS:
        raise InvalidInput("ensemble.members", f"must be <= {MAX_MEMBERS:.0e}, got {members}")
    seed = section.positive("seed", "int", 0, strict=False)
    initial = section.choice("initial", initial_kinds(space), "preset")
    scale = section.positive("scale", "float", 1e-3)
    omega_scale = section.positive("omega_scale", "float", 1.0, strict=False)
    path = section.get("path", "str")
    if (initial == "file") != (path is not None):
        names = ", ".join(name + "0" for name in space.names)
        raise InvalidInput("ensemble.path", f"is required with initial = \"file\" (a .npz with {names}, a store, "
                           "or a GSD or XYZ file of particles)"
                           if path is None else "is only used with initial = \"file\"")
    if path is not None and "://" not in path:
        path = os.path.abspath(path)
    default_chunk = min(members, DEFAULT_CHUNK) if until is None else math.gcd(until["batch"], DEFAULT_CHUNK)
    chunk = section.positive("chunk", "int", default_chunk, minimum=1, strict=False)
    if until is not None and until["batch"] % chunk:
        raise InvalidInput("ensemble.until.batch", f"must be a multiple of ensemble.chunk = {chunk} (a batch is "
                           f"whole tasks), got {until['batch']}")
    options = _sampler_options(section, space, initial)
    section.finish()
    return dict(members=members, seed=seed, initial=initial, scale=scale, omega_scale=omega_scale,
                initial_path=path, chunk=min(chunk, members), sampler_options=options, until=until)


def _sampler_options(section: _Section, space, initial: str) -> dict | None:
    """The chosen sampler's own keys (declared by the space), with their defaults; keys of the space's
    other samplers are refused naming the sampler they belong to."""
    for name, sampler in space.samplers.items():
        if name != initial:
            for key in sampler.options:
                if key in section.table:
                    raise InvalidInput(section.field(key), f'is only used with initial = "{name}"')
    sampler = space.samplers.get(initial)
    if sampler is None or not sampler.options:
        return None
    options = {}
    for key, (default, kind, doc) in sampler.options.items():
        if isinstance(kind, tuple):
            options[key] = section.choice(key, kind, default, required=default is None)
        elif kind == "number":  # any finite number, negative ones included
            options[key] = section.get(key, "float", default, required=default is None)
            if not math.isfinite(options[key]):
                raise InvalidInput(section.field(key), f"must be a finite number, got {options[key]!r}")
        else:
            options[key] = section.positive(key, kind, default, required=default is None, strict=False)
    sampler.check(options)
    return options


def _output_section(section: _Section, space, definition) -> dict:
    """``[output]``; the variables checked against the space and the system's ``definition`` (None: a store's
    model, not run, whose variables were checked when the store was made)."""
    store = section.get("store", "str", required=True)
    allowed = output_variables(space, definition)
    variables = section.get("variables", "list", ["energy"] + [d.name for d in space.diagnostics])
    for name in variables:
        if name not in allowed and definition is not None:
            raise InvalidInput("output.variables", f"unknown variable {name!r} for {definition.name} (space {space.name}); allowed: "
                               f"{', '.join(allowed)}")
    if len(set(variables)) != len(variables):
        raise InvalidInput("output.variables", f"lists a variable twice: {variables}")
    section.finish()
    return dict(store=store, variables=tuple(variables))


def _execution_section(section: _Section) -> dict:
    """``[execution]``: ``device``, where the members are stepped (cpu, the default, or cuda), and ``fma``, whether the
    GPU's kernels may fuse multiply-adds; the GPU's own checks (the method and options it runs) are the plan's, and
    whether this machine has one the run's."""
    device = section.choice("device", DEVICES)
    fma = section.get("fma", "bool")
    ranks = section.get("ranks", "int")
    threads = section.get("threads_per_rank", "int")
    section.finish()
    device = None if device in (None, "cpu") else device
    if fma is False and device != "cuda":
        raise InvalidInput(section.field("fma"), "false applies to device = \"cuda\" (the CPU's kernels fuse no "
                           "multiply-adds)")
    for name, value in (("ranks", ranks), ("threads_per_rank", threads)):
        if value is not None and value < 1:
            raise InvalidInput(section.field(name), f"must be an integer >= 1, got {value!r}")
    if ranks is not None and ranks > 1 and device is not None:
        raise InvalidInput(section.field("ranks"), "more than one rank runs on device \"cpu\" (a GPU per rank is not "
                           "built yet)")
    return dict(device=device, fma=None if fma in (None, True) else False, ranks=None if ranks == 1 else ranks,
                threads_per_rank=threads)


#: the ``[analysis]`` tables, each carrying shadows: (name, whether it takes ``count``)
INDICATORS = ("lyapunov", "lyapunov_spectrum", "megno", "sali")


def _analysis_section(section: _Section, method: str, options: dict, definition) -> dict:
    """``lyapunov``, ``lyapunov_spectrum`` (with ``count``), ``megno`` and ``sali``, each ``{ d0,
    renormalise_every }``: the chaos indicators, computed from one set of shadows per member (fixed-step
    methods only: renormalisation happens at common steps), so the tables that are given must agree on d0
    and renormalise_every.  (That ``count`` is at most the tangent dimension is checked by the plan, which
    knows the number of bodies.)"""
    tables = {name: section.get(name, "table") for name in INDICATORS}
    surface, escape = section.get("section", "table"), section.get("escape", "table")
    named = section.get("sections", "table")
    section.finish()
    parsed = {"section": _surface_of_section("section", surface), "escape": _surface_of_section("escape", escape),
              "sections": _named_sections(named)}
    shared = None
    for name, table in tables.items():
        if table is None:
            parsed[name] = None
            continue
        runs = METHODS[method].resolve(options)
        if runs.lanes == 1 or runs.stochastic:  # shadows follow a deterministic flow step by step
            fixed = ", ".join(m for m in (methods_for(definition) if definition else METHODS)
                              if METHODS[m].lanes is None and not METHODS[m].stochastic)
            raise InvalidInput(f"analysis.{name}", f"needs a deterministic fixed-step method, not {method!r}; "
                               f"allowed: {fixed}")
        indicator = _Section(f"analysis.{name}", table)
        d0 = indicator.positive("d0", "float", 1e-8)
        if d0 >= 1e-2:
            raise InvalidInput(indicator.field("d0"), f"must be a small distance in (0, 0.01) (linearised "
                               f"separation), got {d0!r}")
        every = indicator.positive("renormalise_every", "int", 10, minimum=1, strict=False)
        entry = {"d0": d0, "renormalise_every": every}
        if name == "lyapunov_spectrum":
            count = indicator.positive("count", "int", required=True, minimum=1, strict=False)
            entry = {"count": count, **entry}
        indicator.finish()
        if shared is not None:
            for key in ("d0", "renormalise_every"):
                if entry[key] != shared[1][key]:
                    raise InvalidInput(indicator.field(key), f"must equal analysis.{shared[0]}.{key} = "
                                       f"{shared[1][key]!r}: the indicators share one set of shadows")
        shared = shared or (name, entry)
        parsed[name] = entry
    return parsed


def _named_sections(tables: dict | None) -> dict | None:
    """``[analysis] sections``: name → a section's table (:func:`_surface_of_section`); names are lower-case
    identifiers other than ``section`` and ``escape``, since each names its store variables
    (``section_<name>_time``, …)."""
    if tables is None:
        return None
    if not tables:
        raise InvalidInput("analysis.sections", "must name at least one section: [analysis.sections.<name>]")
    for name in tables:
        if not SECTION_NAME.fullmatch(name) or name in ("section", "escape"):
            raise InvalidInput(f"analysis.sections.{name}", "a section's name must be a lower-case identifier "
                               "(a-z, 0-9, _; starting with a letter) other than section and escape")
    return {name: _surface_of_section(f"sections.{name}", table) for name, table in tables.items()}


#: the names ``[analysis] sections`` may give
SECTION_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _surface_of_section(name: str, table: dict | None) -> dict | None:
    """``[analysis] section``'s, ``escape``'s or one of ``sections``' keys (``name`` "section", "escape" or
    "sections.<name>"), typed and with their defaults (the expression and the recorded variables are checked
    against the space by the plan, which knows the number of bodies)."""
    if table is None:
        return None
    surface = _Section(f"analysis.{name}", table, "analysis.section" if name.startswith("sections.") else None)
    entry = {"expression": surface.get("expression", "str"),  # absent: the model file's function of that name
             "direction": surface.choice("direction", ("up", "down", "both"), "up")}
    if name == "escape":
        entry["stop"] = surface.get("stop", "bool", True)
        surface.finish()
        return entry
    entry["max_crossings"] = int(surface.positive("max_crossings", "int", 1000, minimum=1, strict=False))
    record = surface.get("record", "list")
    if record is not None:
        if not (record and all(isinstance(name, str) for name in record)):
            raise InvalidInput(surface.field("record"), f"must be a non-empty list of state variable names, got "
                                                        f"{record!r}")
        entry["record"] = record
    surface.finish()
    return entry


def parse_spec(text: str, stored: bool = False, directory: str = "", **overrides) -> Spec:
    """Validate spec text; ``overrides`` (store, members, workers, scheduler) replace spec keys.
    Relative paths (``output.store``, ``ensemble.path``) are taken relative to the working directory
    and stored absolute, so workers started elsewhere find them; ``system.model`` relative to
    ``directory`` (the spec file's).  ``stored``: the spec a store
    holds, read back for analysis: its ``[cluster]`` is kept as written, unchecked (it says where the
    run computed, which neither the results nor this machine depend on)."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InvalidInput("spec", f"is not valid TOML: {error}") from None
    for key in document:
        if key not in _SECTIONS:
            raise InvalidInput(key, f"unknown section; allowed: {', '.join(_SECTIONS)}")
    for name, value in overrides.items():
        if name not in OVERRIDES:
            raise InvalidInput(name, f"unknown override; allowed: {', '.join(OVERRIDES)}")
        if value is not None:
            section, key = OVERRIDES[name]
            document.setdefault(section, {})[key] = value
            if name == "scheduler":
                document[section]["kind"] = "address"
                document[section].pop("workers", None)
    for required in ("system", "integrator", "ensemble", "output"):
        if required not in document:
            raise InvalidInput(required, f"section [{required}] is required")
    name, preset, params, sweeps, model, model_source = _system_section(_Section("system", document["system"]),
                                                                        os.path.abspath(directory), stored)
    # a store's model is known by what its text declares (its code is not run); the checks that need the
    # model's definition were made when the store was written
    definition = None if stored and model_source is not None else system_definition(name)
    space = declared_model(model_source, model).space if definition is None else definition.space
    integrator = _integrator_section(_Section("integrator", document["integrator"]), definition)
    cluster = document.get("cluster", {})
    spec = Spec(
        system=name, preset=preset, params=params, sweeps=sweeps, **integrator, model=model, model_source=model_source,
        **_ensemble_section(_Section("ensemble", document["ensemble"]), space),
        **_output_section(_Section("output", document["output"]), space, definition),
        cluster=dict(cluster) if stored else parse_cluster_section(_Section("cluster", cluster)),
        **_execution_section(_Section("execution", document.get("execution", {}))),
        **_analysis_section(_Section("analysis", document.get("analysis", {})), integrator["method"],
                            integrator["options"], definition),
        stored=stored,
    )
    if spec.store.startswith("file://"):  # a local directory however it is spelled
        spec = replace(spec, store=spec.store[len("file://"):])
    if "://" not in spec.store:
        spec = replace(spec, store=os.path.abspath(spec.store))
    records = -(-spec.members // spec.chunk) * -(-spec.n_steps // spec.checkpoint_every)
    if records > MAX_RECORDS:
        raise InvalidInput("integrator.checkpoint_every", f"{records} (chunk, segment) tasks; at most {MAX_RECORDS:.0e} "
                           "(raise checkpoint_every or ensemble.chunk)")
    if spec.sweep_points > MAX_SWEEP_POINTS:
        raise InvalidInput("system.params", f"the sweeps make {spec.sweep_points} grid points; at most "
                           f"{MAX_SWEEP_POINTS:.0e}")
    if spec.until is not None:
        _check_until(spec)
    if spec.grid and spec.members % spec.sweep_points:
        raise InvalidInput("ensemble.members", f"must be a multiple of the sweep's {spec.sweep_points} grid points "
                           f"(members are spread evenly over them), got {spec.members}")
    return spec


def _check_until(spec: Spec) -> None:
    """The rule's statistic must be measured by the run, and its batches must tile every sweep point's members."""
    until = spec.until
    measured, where = {"lyapunov": (spec.lyapunov is not None, "[analysis] lyapunov"),
                       "megno_final": (spec.megno is not None, "[analysis] megno"),
                       "energy": ("energy" in spec.variables, "energy in [output] variables")}[
        STATISTICS[until["statistic"]][1]]
    if not measured:
        raise InvalidInput("ensemble.until.statistic", f"{until['statistic']} needs {where}, which this spec does "
                           "not configure")
    if spec.cluster.get("kind") == "slurm":
        raise InvalidInput("ensemble.until", "stops between batches, which a SLURM array of fixed tasks cannot: run "
                           "it on a local or address cluster, or submit a fixed-size run (ensemble.members)")
    per_point = until["max_members"] // spec.sweep_points
    if until["max_members"] % spec.sweep_points or per_point % until["batch"]:
        raise InvalidInput("ensemble.until.max_members", f"must be a multiple of batch × sweep points = "
                           f"{until['batch'] * spec.sweep_points}, got {until['max_members']}")


def load_spec(path, **overrides) -> Spec:
    """Read and validate the spec file at ``path`` (see :func:`parse_spec`)."""
    path = os.fspath(path)
    return parse_spec(_read_text(path, "spec"), directory=os.path.dirname(path), **overrides)
