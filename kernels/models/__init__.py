"""Users' own models: a model file's text becomes a system like the built-ins.

:func:`build_model` runs the file (:mod:`.loader`), derives by symbolic differentiation what its space's
methods need and generates lane functions with the ABI of that space's hand-written systems (one module per
space: :mod:`.sphere_product`, …), imports them (:mod:`.codegen`) and registers the definition, so that
every method of the space, the runner and the analysis take it by name as they take a built-in.

Two caches spare later runs the work: the derivation, keyed by a hash of the model's text and of this
package's code, and Numba's kernels, keyed by a hash of the generated text (the system's name carries it).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import inspect
import json
import os
import pathlib
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..caches import model_cache_directory, read_file, signature, signed_by_this_cache, write_file
from ..errors import InvalidInput
from ..source_hash import SOURCE_HASH
from ..systems import MODELS
from ..systems.base import LIST, SCALAR, TABLE, Parameter, Preset
from .spec_key import FIELD

if TYPE_CHECKING:
    from .loader import ModelFile


def builder(space: str):
    """The module of this package that builds models of ``space`` (:data:`.loader.SPACE_FUNCTIONS` lists them):
    derive(model, p, rows) → (text, meta) and assemble(model, module, meta, common).  Imported on first use, as
    the loader and the code generator are: they import sympy, 0.4 s of the start-up of every process without a model."""
    return importlib.import_module(f"{__name__}.{space}")


#: model parameter shapes by number of axes (a list's length is the file's own)
MODEL_SHAPES = {0: SCALAR, 1: LIST, 2: TABLE}


def model_name(path: str, source: str) -> str:
    """The registered name: the file's stem and a hash of its text (an edited file is another system)."""
    from .codegen import source_hash

    stem = re.sub(r"\W", "_", pathlib.Path(path).stem) or "model"
    return f"{stem}_{source_hash(source)[:8]}"


@dataclass(frozen=True)
class DeclaredModel:
    """What a model file's text declares, read without running it (its syntax tree only): the registered name,
    the state space (its top-level ``space = "..."``) and its presets (``initial`` if it defines ``initial_state``).  Enough to read
    a store of the model (its variables, its spec's identity) where the model's code must not run."""

    name: str
    space: object
    presets: tuple[str, ...]


@functools.cache  # every Plan of a store reads it again; the text decides, so it is parsed once per process
def declared_model(source: str, path: str) -> DeclaredModel:
    """The :class:`DeclaredModel` of a model file's ``source``; InvalidInput if its space is not a literal name
    of a space models are built on."""
    from ..spaces import SPACES

    bound = {}
    try:
        for node in ast.parse(source).body:
            if isinstance(node, ast.Assign):
                bound.update((target.id, node.value) for target in node.targets if isinstance(target, ast.Name))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound[node.name] = node
    except SyntaxError:
        pass
    space = bound.get("space")
    name = space.value if isinstance(space, ast.Constant) else None
    if name not in SPACES:
        raise InvalidInput(FIELD, f"{path}: the stored model's space cannot be read without running it (a top-level "
                           "space = \"...\" naming a space)")
    return DeclaredModel(model_name(path, source), SPACES[name], ("initial",) if "initial_state" in bound else ())


def _derived(model: ModelFile) -> tuple[str, dict, float]:
    """(generated module text, builder meta, seconds spent deriving): from the derivation cache when this
    model text was derived before by this code and the entry carries this cache's signature of it (an entry
    written or changed by anyone else is derived again and replaced), else derived now and cached."""
    from .codegen import HEADER
    from .loader import Parameters

    key = hashlib.sha256((SOURCE_HASH + "\0" + model.space + "\0" + model.source).encode()).hexdigest()[:24]
    directory = model_cache_directory()
    name = f"derived-{key}.json"
    try:
        cached = json.loads(read_file(os.path.join(directory, name)) or "")
        if signed_by_this_cache(directory, _signed_text(key, cached["text"], cached["meta"]), cached["mac"]):
            return cached["text"], cached["meta"], 0.0
    except (ValueError, KeyError, TypeError):
        pass
    start = time.perf_counter()
    values, rows = model.layout.symbols()
    text, meta = builder(model.space).derive(model, Parameters(values, model.path), rows)
    text = HEADER + text
    seconds = time.perf_counter() - start
    mac = signature(directory, _signed_text(key, text, meta))
    write_file(directory, name, json.dumps({"text": text, "meta": meta, "seconds": seconds, "mac": mac}))
    return text, meta, seconds


def _signed_text(key: str, text: str, meta: dict) -> str:
    """What a derivation entry's signature covers: the key it is filed under (so an entry cannot be moved to
    another model's name), the generated text and the builder's meta."""
    return json.dumps([key, text, meta], sort_keys=True)


def _parameters(model: ModelFile) -> tuple[Parameter, ...]:
    return tuple(Parameter(name, MODEL_SHAPES[value.ndim], model.layout.units[name], "a parameter of the model file",
                           default=value.item() if value.ndim == 0 else value.tolist(),
                           check="cutoff" if name == "cutoff" else "finite")
                 for name, value in model.layout.defaults.items())


def _presets(model: ModelFile, space) -> dict:
    """``initial``: the state ``initial_state(p)`` returns at the parameters' defaults (a bound system
    evaluates it at its own values: :class:`ModelInfo`)."""
    if not model.has("initial_state"):
        return {}
    return {"initial": lambda: Preset(doc="initial_state(p) of the model file", params={},
                                      state=initial_state(model, space, model.layout.defaults))}


def initial_state(model: ModelFile, space, params: dict) -> dict:
    """``initial_state(p)`` of the file evaluated with numbers (a per-member value: its first member's): the
    space's variables by name."""
    from .loader import Parameters, model_call

    first = {name: np.asarray(value)[0] if np.ndim(value) > model.layout.defaults[name].ndim else value
             for name, value in params.items() if name in model.layout.defaults}
    p = Parameters(model.layout.numbers(first), model.path)
    state = model_call(model.path, "initial_state", model.function("initial_state"), p)
    names = [v.name for v in space.variables]
    if not isinstance(state, dict) or any(name not in names for name in state):
        raise InvalidInput(FIELD, f"{model.path}: initial_state(p) must return a dict of {', '.join(names)}")
    try:
        return {name: np.array(value, dtype=np.float64) for name, value in state.items()}
    except (TypeError, ValueError) as error:
        raise InvalidInput(FIELD, f"{model.path}: initial_state(p) returned a non-numeric value: {error}") from None


@functools.cache
def _build(source: str, path: str):
    from .codegen import load_generated
    from .loader import model_call, read_model

    model = read_model(source, path)
    start = time.perf_counter()
    text, meta, derive_seconds = _derived(model)
    module = load_generated(text)
    name = model_name(path, source)
    space_builder = builder(model.space)
    common = dict(name=name, summary=model.doc or f"model {path}", parameters=_parameters(model),
                  presets=_presets(model, space_builder.SPACE), bodies=lambda params: model.bodies,
                  coefficients=lambda params, n: model.layout.coefficients(params, _members(params)))
    definition = space_builder.assemble(model, module, meta, common)
    state = (lambda params: initial_state(model, space_builder.SPACE, params)) if model.has("initial_state") else None
    # a definition is frozen; what the model adds is set once here, before anyone holds the definition
    functions = {key: functools.partial(model_call, path, key, value) for key, value in model.namespace.items()
                 if inspect.isfunction(value)}
    object.__setattr__(definition, "model", ModelInfo(path=path, source=source, text=text, initial_state=state,
                                                      derive_seconds=derive_seconds,
                                                      load_seconds=time.perf_counter() - start, functions=functions))
    MODELS[name] = definition
    return definition


def _members(params: dict) -> int:
    return next((value.shape[0] for value in params.values() if isinstance(value, np.ndarray)), 1)


@dataclass(frozen=True)
class ModelInfo:
    """Where a model came from (its file's path and text, the generated module's text), its
    ``initial_state(params)`` (None if the file has none), what building it cost (s; derivation 0 when
    it came from the cache) and the file's functions by name (e.g. a section's, ``def section(q, omega, p)``),
    their errors naming the file and line."""

    path: str
    source: str
    text: str
    initial_state: Callable[[dict], dict] | None
    derive_seconds: float
    load_seconds: float
    functions: dict = field(default_factory=dict)


def build_model(source: str, path: str = "<model>"):
    """The system definition of a model file's ``source`` (``path`` names it in messages), registered under
    its name (:func:`model_name`); built once per process and text."""
    return _build(source, path)


__all__ = ["build_model", "model_name", "ModelInfo", "declared_model", "DeclaredModel"]
