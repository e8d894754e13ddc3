"""The run spec (TOML): parsing, validation and the canonical form stored with every run.

Every error is an :class:`~kernels.errors.InvalidInput` whose field is the dotted key
(``integrator.dt``) and whose message names the allowed values.  Unknown keys are errors.
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from dataclasses import asdict, dataclass, field, replace

from kernels import METHODS, SYSTEMS, InvalidInput

INITIAL_KINDS = ("preset", "perturb", "uniform", "file", "particles")
PLACEMENTS = ("fibonacci", "icosphere", "random")
CLUSTER_KINDS = ("local", "address", "slurm")
VARIABLES = ("q", "omega", "energy", "unit_error", "tangency_error", "temperature")
DEFAULT_VARIABLES = ("energy", "unit_error", "tangency_error")
#: steps per task segment when the spec does not say (rounded to whole save intervals)
DEFAULT_CHECKPOINT_STEPS = 10_000
DEFAULT_CHUNK = 1_000
#: spec fields added after stores already existed: left out of the identity while unused
OPTIONAL_FIELDS = ("lyapunov", "particles")


@dataclass(frozen=True)
class Sweep:
    """One swept parameter: its grid of values (members are spread over the outer product of sweeps)."""

    name: str
    values: tuple[float, ...]


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
    particles: dict | None = None  # initial = "particles": {"count", "placement", "min_separation", "temperature"}

    @property
    def sweep_points(self) -> int:
        return math.prod(len(s.values) for s in self.sweeps)

    def identity(self) -> str:
        """Canonical JSON of everything that determines the store's contents (not where it lives or
        which cluster computes it): two specs with the same identity produce bitwise-equal stores."""
        fields = asdict(self)
        for name in ("store", "cluster", "t_end"):
            fields.pop(name)
        for name in OPTIONAL_FIELDS:  # absent when unused, so stores made before they existed still match
            if fields[name] is None:
                fields.pop(name)
        return json.dumps(fields, sort_keys=True)

    def to_toml(self) -> str:
        """The effective spec (after defaults and overrides) as TOML text that loads back to ``self``."""
        params = dict(self.params)
        params.update({s.name: {"values": list(s.values)} for s in self.sweeps})
        sections = {
            "system": {"name": self.system, "preset": self.preset, "params": params},
            "integrator": {"method": self.method, "dt": self.dt, "t_end": self.t_end, "save_every": self.save_every,
                           "checkpoint_every": self.checkpoint_every, **self.options},
            "ensemble": {"members": self.members, "seed": self.seed, "initial": self.initial, "scale": self.scale,
                         "omega_scale": self.omega_scale, "path": self.initial_path, "chunk": self.chunk,
                         **(self.particles or {})},
            "output": {"store": self.store, "variables": list(self.variables)},
            "cluster": dict(self.cluster),
            "analysis": {"lyapunov": self.lyapunov},
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
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} as TOML")


class _Section:
    """Typed access to one table of the spec; remembers which keys were read so leftovers are errors."""

    def __init__(self, name: str, table):
        if not isinstance(table, dict):
            raise InvalidInput(name, f"must be a table [{name}], got {type(table).__name__}")
        self.name, self.table, self.used = name, table, set()

    def field(self, key: str) -> str:
        return f"{self.name}.{key}"

    def get(self, key, kind, default=None, required=False):
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
_SECTIONS = ("system", "integrator", "ensemble", "output", "cluster", "analysis")
#: command-line / API overrides and the spec key each replaces
OVERRIDES = {"store": ("output", "store"), "members": ("ensemble", "members"),
             "workers": ("cluster", "workers"), "scheduler": ("cluster", "scheduler")}


def _sweep(name: str, value: dict) -> Sweep:
    where = f"system.params.{name}"
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
    return Sweep(name, tuple(start + (stop - start) * k / (count - 1) if count > 1 else start for k in range(count)))


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _system_section(section: _Section) -> tuple[str, str | None, dict, tuple[Sweep, ...]]:
    name = section.choice("name", tuple(sorted(SYSTEMS)), required=True)
    definition = SYSTEMS[name]
    preset = section.choice("preset", tuple(sorted(definition.presets)))
    params = section.get("params", "table", {})
    section.finish()
    fixed, sweeps = {}, []
    for key, value in params.items():
        if key not in {p.name for p in definition.parameters}:
            allowed = ", ".join(p.name for p in definition.parameters)
            raise InvalidInput(f"system.params.{key}", f"unknown parameter of {name}; allowed: {allowed}")
        if isinstance(value, dict):
            if definition.parameter(key).structural:
                raise InvalidInput(f"system.params.{key}", "is structural and cannot be swept")
            sweeps.append(_sweep(key, value))
        else:
            fixed[key] = value
    return name, preset, fixed, tuple(sweeps)


def _integrator_section(section: _Section) -> dict:
    method = section.choice("method", tuple(METHODS), required=True)
    dt = section.positive("dt", "float", required=True)
    t_end = section.positive("t_end", "float", required=True)
    n_steps = round(t_end / dt)
    if n_steps < 1 or abs(n_steps * dt - t_end) > 1e-9 * t_end:
        raise InvalidInput("integrator.t_end", f"must be a whole number of steps dt = {dt!r} s, got {t_end!r}")
    save_every = section.positive("save_every", "int", 1)
    default_segment = max(1, DEFAULT_CHECKPOINT_STEPS // save_every) * save_every
    checkpoint_every = section.positive("checkpoint_every", "int", default_segment)
    if checkpoint_every % save_every:
        raise InvalidInput("integrator.checkpoint_every",
                           f"must be a multiple of save_every = {save_every} (segments end on saved samples), "
                           f"got {checkpoint_every}")
    options = {}
    for key, default in METHODS[method].options.items():
        kind = "bool" if isinstance(default, bool) else "int" if key.endswith(("iterations", "steps")) else "float"
        value = section.get(key, kind)
        if value is not None:
            if kind != "bool" and not value > 0:
                raise InvalidInput(section.field(key), f"must be > 0, got {value!r}")
            options[key] = value
    unknown = sorted(set(section.table) - section.used)
    other = {key for m in METHODS.values() for key in m.options}
    for key in unknown:
        if key in other:
            allowed = ", ".join(METHODS[method].options) or "none"
            raise InvalidInput(section.field(key), f"is not an option of method {method!r}; its options: {allowed}")
    section.finish()
    return dict(method=method, dt=dt, t_end=t_end, n_steps=n_steps, save_every=save_every,
                checkpoint_every=checkpoint_every, options=options)


def _ensemble_section(section: _Section) -> dict:
    members = section.positive("members", "int", required=True, minimum=1, strict=False)
    seed = section.positive("seed", "int", 0, strict=False)
    initial = section.choice("initial", INITIAL_KINDS, "preset")
    scale = section.positive("scale", "float", 1e-3)
    omega_scale = section.positive("omega_scale", "float", 1.0, strict=False)
    path = section.get("path", "str")
    if (initial == "file") != (path is not None):
        raise InvalidInput("ensemble.path", "is required with initial = \"file\" (a .npz with q0, omega0, or a store)"
                           if path is None else "is only used with initial = \"file\"")
    if path is not None and "://" not in path:
        path = os.path.abspath(path)
    chunk = section.positive("chunk", "int", min(members, DEFAULT_CHUNK), minimum=1, strict=False)
    particles = _particles(section, initial == "particles")
    section.finish()
    return dict(members=members, seed=seed, initial=initial, scale=scale, omega_scale=omega_scale,
                initial_path=path, chunk=min(chunk, members), particles=particles)


def _particles(section: _Section, used: bool) -> dict | None:
    """``initial = "particles"``: ``count`` particles placed on the sphere (``placement``: fibonacci
    lattice, icosphere vertices (count = 10·4^k + 2) or random with chords ≥ ``min_separation``), with
    thermal velocities at kinetic ``temperature`` (J per particle, k_B = 1; 0: at rest)."""
    keys = ("particles", "placement", "min_separation", "temperature")
    if not used:
        for key in keys:
            if key in section.table:
                raise InvalidInput(section.field(key), 'is only used with initial = "particles"')
        return None
    count = section.positive("particles", "int", required=True, minimum=2, strict=False)
    placement = section.choice("placement", PLACEMENTS, "fibonacci")
    min_separation = section.positive("min_separation", "float", 0.0, strict=False)
    temperature = section.positive("temperature", "float", 0.0, strict=False)
    faces_per_ten = (count - 2) // 10  # 4^k for an icosphere of level k
    power_of_four = faces_per_ten > 0 and faces_per_ten & (faces_per_ten - 1) == 0 and faces_per_ten.bit_length() % 2
    if placement == "icosphere" and ((count - 2) % 10 or not power_of_four):
        levels = ", ".join(str(10 * 4**k + 2) for k in range(7))
        raise InvalidInput("ensemble.particles", f"icosphere placement needs 10·4^k + 2 particles ({levels}, …), "
                           f"got {count}")
    if placement != "random" and min_separation:
        raise InvalidInput("ensemble.min_separation", 'is only used with placement = "random"')
    return {"particles": count, "placement": placement, "min_separation": min_separation, "temperature": temperature}


def _output_section(section: _Section) -> dict:
    store = section.get("store", "str", required=True)
    variables = section.get("variables", "list", list(DEFAULT_VARIABLES))
    for name in variables:
        if name not in VARIABLES:
            raise InvalidInput("output.variables", f"unknown variable {name!r}; allowed: {', '.join(VARIABLES)}")
    if len(set(variables)) != len(variables):
        raise InvalidInput("output.variables", f"lists a variable twice: {variables}")
    section.finish()
    return dict(store=store, variables=tuple(variables))


def _analysis_section(section: _Section, method: str) -> dict | None:
    """``lyapunov = { d0, renormalise_every }``: carry a Benettin shadow of every member (fixed-step
    methods only: renormalisation happens at common steps)."""
    table = section.get("lyapunov", "table")
    section.finish()
    if table is None:
        return None
    lyapunov = _Section("analysis.lyapunov", table)
    d0 = lyapunov.positive("d0", "float", 1e-8)
    if d0 >= 1e-2:
        raise InvalidInput("analysis.lyapunov.d0", f"must be a small distance in (0, 0.01) (linearised "
                           f"separation), got {d0!r}")
    every = lyapunov.positive("renormalise_every", "int", 10, minimum=1, strict=False)
    lyapunov.finish()
    if METHODS[method].lanes == 1:
        fixed = ", ".join(name for name, m in METHODS.items() if m.lanes is None)
        raise InvalidInput("analysis.lyapunov", f"needs a fixed-step method, not {method!r}; allowed: {fixed}")
    return {"d0": d0, "renormalise_every": every}


#: spec keys of a `kind = "slurm"` cluster and their TOML types
SLURM_CLUSTER_KEYS = {"site": "str", "partition": "str", "account": "str", "walltime": "str", "cores": "int",
                      "memory": "str", "minimum_jobs": "int", "maximum_jobs": "int", "worker_timeout": "float"}


def _slurm_cluster(section: _Section) -> dict:
    """The spec's dask-jobqueue keys, checked now (with the site file they name) so that a bad
    partition or time limit is refused before anything runs."""
    from .slurm import site_for_cluster  # only specs that use SLURM need sinfo

    cluster = {"kind": "slurm"}
    for key, kind in SLURM_CLUSTER_KEYS.items():
        value = section.get(key, kind)
        if value is not None:
            cluster[key] = value
    if cluster.get("worker_timeout", 1.0) <= 0:
        raise InvalidInput("cluster.worker_timeout", f"must be > 0 s, got {cluster['worker_timeout']!r}")
    try:
        site_for_cluster(cluster)
    except InvalidInput as error:
        key = {"time": "walltime"}.get(error.field, error.field)  # the site file says time, the spec walltime
        raise InvalidInput(f"cluster.{key}", error.message) from None
    return cluster


def _cluster_section(section: _Section) -> dict:
    kind = section.choice("kind", CLUSTER_KINDS, "local")
    cluster = {"kind": kind}
    if kind == "slurm":
        cluster = _slurm_cluster(section)
    elif kind == "local":
        cluster["workers"] = section.positive("workers", "int", len(os.sched_getaffinity(0)), minimum=1, strict=False)
    else:
        scheduler = section.get("scheduler", "str", required=True)
        if "://" not in scheduler:
            raise InvalidInput("cluster.scheduler", f"must be an address like tcp://host:8786, got {scheduler!r}")
        cluster["scheduler"] = scheduler
    section.finish()
    return cluster


def parse_spec(text: str, **overrides) -> Spec:
    """Validate spec text; ``overrides`` (store, members, workers, scheduler) replace spec keys.
    Relative paths (``output.store``, ``ensemble.path``) are taken relative to the working directory
    and stored absolute, so workers started elsewhere find them."""
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
    name, preset, params, sweeps = _system_section(_Section("system", document["system"]))
    integrator = _integrator_section(_Section("integrator", document["integrator"]))
    spec = Spec(
        system=name, preset=preset, params=params, sweeps=sweeps, **integrator,
        **_ensemble_section(_Section("ensemble", document["ensemble"])),
        **_output_section(_Section("output", document["output"])),
        cluster=_cluster_section(_Section("cluster", document.get("cluster", {}))),
        lyapunov=_analysis_section(_Section("analysis", document.get("analysis", {})), integrator["method"]),
    )
    if spec.store.startswith("file://"):  # a local directory however it is spelled
        spec = replace(spec, store=spec.store[len("file://"):])
    if "://" not in spec.store:
        spec = replace(spec, store=os.path.abspath(spec.store))
    if spec.sweeps and spec.members % spec.sweep_points:
        raise InvalidInput("ensemble.members", f"must be a multiple of the sweep's {spec.sweep_points} grid points "
                           f"(members are spread evenly over them), got {spec.members}")
    return spec


def load_spec(path, **overrides) -> Spec:
    """Read and validate the spec file at ``path`` (see :func:`parse_spec`)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise InvalidInput("spec", f"cannot read {path!r}: {error.strerror}") from None
    return parse_spec(text, **overrides)
