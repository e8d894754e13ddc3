"""The docs' reference pages, generated from the code that defines what they describe: the spec's keys
(:mod:`armillary.ensemble.spec_keys`, the methods' options, the spaces' samplers, the cluster kinds), the
command line (its argument parser), the systems and methods (their registries), the store's variables (the
spaces' declarations) and the exit codes.  ``docs/conf.py`` writes :func:`reference_pages` into
``docs/reference/generated/`` before every build, so the pages cannot drift from the code; the docs tests
check them against the code the other way round.
"""

from __future__ import annotations

import argparse
import functools

from armillary.ensemble.cluster_kinds import CLUSTER_KEYS
from armillary.ensemble.spec import SPEC_KEYS, initial_kinds
from armillary.ensemble.store import COMMON_ATTRS, INDICATOR_ATTRS, INDICATOR_VARIABLES, SECTION_ATTRS
from armillary.kernels import METHODS, SPACES, STATUS_MEANINGS, SYSTEMS
from armillary.kernels.gpu import GPU_METHODS
from armillary.kernels.integrators import OPTION_DOCS

from .cli import EXIT_CODES, build_parser, describe_system

#: the spec's sections in the order a spec is read
SECTIONS = ("system", "integrator", "integrator.active", "ensemble", "output", "cluster", "execution", "analysis",
            "analysis.lyapunov", "analysis.lyapunov_spectrum", "analysis.megno", "analysis.sali", "analysis.section",
            "analysis.escape", "ensemble.until")


def _cell(text) -> str:
    """Text for a Markdown table cell (pipes escaped, no line breaks)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: tuple, rows: list) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + \
        ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]


def _code(text) -> str:
    return f"`{text}`"


def spec_reference() -> str:
    """Every spec key by section: TOML type, default, unit, meaning; the methods' options; the samplers' keys;
    the slurm cluster's keys."""
    lines = ["# Spec keys", "", "Generated from `armillary.ensemble.spec_keys` and the registries that declare "
             "their own keys; the spec's reader refuses any other key, naming the allowed ones.", ""]
    for section in SECTIONS:
        keys = [(field.rsplit(".", 1)[1], key) for field, key in SPEC_KEYS.items() if field.rsplit(".", 1)[0] == section]
        lines += [f"## `[{section}]`", ""]
        lines += _table(("key", "type", "default", "unit", "meaning"),
                        [(_code(name), key.kind, key.default, key.unit, key.doc) for name, key in keys])
        lines.append("")
        if section == "integrator":
            lines += ["Methods (`method`): " + "; ".join(
                f"`{name}` ({', '.join(method.spaces)})" for name, method in METHODS.items()) + ".", "",
                "### Method options (`[integrator]`)", ""]
            lines += _table(("option", "methods (default)", "unit", "meaning"),
                            [(_code(option), ", ".join(f"{name} ({method.options[option]})"
                                                       for name, method in METHODS.items() if option in method.options),
                              *OPTION_DOCS[option]) for option in _method_options()])
            lines.append("")
        if section == "ensemble":
            lines += ["### Initial states and samplers (`initial`)", ""]
            rows = []
            for space in SPACES.values():
                rows.append((space.name, ", ".join(_code(kind) for kind in initial_kinds(space)), "", "", ""))
                for name, sampler in space.samplers.items():
                    for key, (default, kind, doc) in sampler.options.items():
                        allowed = " \\| ".join(kind) if isinstance(kind, tuple) else kind
                        rows.append((space.name, _code(name), _code(key), allowed,
                                     f"{doc} (default {default})" if default is not None else f"{doc} (required)"))
            lines += _table(("space", "initial", "key", "type", "meaning"), rows)
            lines.append("")
        if section == "cluster":
            for kind, keys in CLUSTER_KEYS.items():
                if keys:
                    lines += [f"### `kind = \"{kind}\"`", ""]
                    lines += _table(("key", "type", "default", "unit", "meaning"),
                                    [(_code(name), key.kind, key.default, key.unit, key.doc)
                                     for name, key in keys.items()])
                    lines.append("")
    return "\n".join(lines)


def _method_options() -> list[str]:
    options = []
    for method in METHODS.values():
        options += [option for option in method.options if option not in options]
    return options


def subcommands(parser: argparse.ArgumentParser) -> dict:
    """Subcommand name → (its parser, its one-line help)."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in action._choices_actions}
    return {name: (sub, helps[name]) for name, sub in action.choices.items()}


def cli_reference() -> str:
    """Every subcommand of ``armillary`` with its arguments and their help, from the parser itself."""
    parser = build_parser()
    lines = ["# Command line", "", "Generated from the argument parser of `armillary` (`armillary <command> "
             "--help` prints the same).", ""]
    for name, (sub, summary) in subcommands(parser).items():
        # a fixed width: the page does not depend on the terminal that builds it
        sub.formatter_class = functools.partial(argparse.HelpFormatter, width=100)
        lines += [f"## `armillary {name}`", "", summary[0].upper() + summary[1:] + ".", "", "```text",
                  sub.format_usage().strip().replace("usage: ", ""), "```", ""]
        rows = []
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            flag = ", ".join(action.option_strings) or action.metavar or action.dest
            takes = "" if action.nargs == 0 else (action.metavar or action.dest.upper())
            rows.append((_code(flag), takes, action.help or ""))
        lines += _table(("argument", "value", "meaning"), rows)
        lines.append("")
    return "\n".join(lines)


def systems_reference() -> str:
    """Every built-in system as ``armillary systems`` lists it: space, parameters, presets, methods."""
    lines = ["# Systems", "", "Generated from the systems' declarations (`armillary systems` prints the same).", ""]
    for system in map(describe_system, SYSTEMS.values()):  # built-ins: no model defaults
        lines += [f"## `{system.name}`", "", system.summary[0].upper() + system.summary[1:] + ".", "",
                  f"Space `{system.space}`: " + ", ".join(f"`{name}` ({', '.join(dims)}, {unit})"
                                                         for name, dims, unit in system.variables) + ".", "",
                  "Methods: " + ", ".join(_code(name) for name in system.methods) + ".", ""]
        lines += _table(("parameter", "shape", "unit", "meaning"),
                        [(_code(name), shape, unit, doc) for name, shape, unit, doc, _ in system.parameters])
        lines.append("")
        if system.presets:
            lines += [f"- preset `{name}`: {doc}" for name, doc in system.presets]
            lines.append("")
    return "\n".join(lines)


def methods_reference() -> str:
    """Every method: order, spaces, options, status codes."""
    lines = ["# Methods", "", "Generated from the methods' declarations.  \"on cuda\": the spaces where the method "
             "runs with `device = \"cuda\"` (one CUDA GPU; see the GPU how-to) in the ensemble mode, and \"system "
             "mode\" where one large pair system on sphere_product runs there too.", ""]
    lines += _table(("method", "order", "spaces", "on cuda", "options", "summary"),
                    [(_code(name), method.order, ", ".join(method.spaces),
                      ", ".join(GPU_METHODS.get(name, ()) + (("system mode",) if method.system_stages else ())) or "–",
                      ", ".join(_code(option) for option in method.options) or "none", method.summary)
                     for name, method in METHODS.items()])
    lines += ["", "## Status codes", "", "Each member's `status` in a result or store:", ""]
    lines += _table(("code", "meaning"), list(STATUS_MEANINGS.items()))
    return "\n".join(lines) + "\n"


def store_reference() -> str:
    """The data variables a store can hold, per space and common to all, with dims and units."""
    lines = ["# Store variables", "", "Generated from the spaces' declarations and the store's layout. Every "
             "store also has `<name>0`, each state variable's initial value over `member`.", ""]
    for space in SPACES.values():
        lines += [f"## Space `{space.name}`", ""]
        rows = [(_code(v.name), "(member, time, " + ", ".join(v.dims) + ")", v.unit, v.long_name)
                for v in space.variables]
        rows += [(_code(d.name), "(member, time)", d.unit, d.long_name)
                 for d in space.diagnostics + space.optional_diagnostics]
        lines += _table(("variable", "dims", "unit", "meaning"), rows)
        lines.append("")
    lines += ["## Every space", ""]
    lines += _table(("variable", "unit", "meaning"), [(_code(name), unit, doc) for name, (unit, doc) in COMMON_ATTRS.items()])
    lines += ["", "## Particles' properties", "", "Coordinates a store of particles keeps beside their state, by "
              "system (constant over time; a diameter or mass that differs member by member is on (member, body)).",
              ""]
    lines += _table(("system", "coordinate", "dims", "unit", "meaning"),
                    [(_code(system.name), _code(name), "(" + ", ".join(dims) + ")", unit, meaning)
                     for system in SYSTEMS.values() for name, (dims, unit, meaning)
                     in getattr(system, "body_property_docs", {}).items()])
    lines += ["", "## Chaos indicators", "", "With the `[analysis]` tables that compute them (every table's shadows "
              "are shared; `exponent` counts `lyapunov_spectrum.count`).", ""]
    lines += _table(("variable", "dims", "unit", "meaning", "kept with"),
                    [(_code(name), "(" + ", ".join(dims) + ")", unit, doc,
                      ", ".join(f"`[analysis] {indicator}`" for indicator, names in INDICATOR_VARIABLES.items()
                                if name in names) or "`sali` and a spectrum of count ≥ 3")
                     for name, (dims, unit, doc) in INDICATOR_ATTRS.items()])
    lines += ["", "## Surfaces of section", "", "With `[analysis] section` (`crossing` counts its `max_crossings`).", ""]
    lines += _table(("variable", "dims", "unit", "meaning"),
                    [(_code(name), "(" + ", ".join(dims) + ")", unit, doc) for name, (dims, unit, doc) in SECTION_ATTRS.items()])
    return "\n".join(lines) + "\n"


def exit_codes_reference() -> str:
    lines = ["# Exit codes", "", "Generated from `armillary.jobs.cli.EXIT_CODES`.", ""]
    lines += _table(("code", "meaning"), list(EXIT_CODES.items()))
    return "\n".join(lines) + "\n"


def reference_pages() -> dict[str, str]:
    """File name → Markdown text of every generated reference page."""
    return {"spec.md": spec_reference(), "cli.md": cli_reference(), "systems.md": systems_reference(),
            "methods.md": methods_reference(), "store.md": store_reference(), "exit-codes.md": exit_codes_reference()}
