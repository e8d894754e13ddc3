"""The ``armillary`` command line; its exit codes are :data:`EXIT_CODES`."""

# The docstring above is the parser's description.  Each command imports what it uses when it runs (the store's
# readers, Numba's kernels, Dask, xarray, matplotlib), so that ``--help`` loads none of them and the commands that
# only read a spec, the registries or a store load no more than they read (tests/test_startup.py).

import argparse
import math
import os
import signal
import sys
import time
from typing import NamedTuple

from armillary import ensemble
from armillary.ensemble.errors import DamagedStore, RunFailed, StoppedWithWorkLeft
from armillary.jobs.slurm import load_site, queue_states
from armillary.jobs.slurm import submit as submit_jobs
from armillary.kernels import InvalidInput

#: random admissible states ``armillary check`` differences a model's potential at
MODEL_CHECK_STATES = 16

SUCCESS, FAILED, BAD_INPUT, INTERRUPTED, STOPPED = 0, 1, 2, 3, 130
#: every exit status of ``armillary`` and what it means (the docs' table is generated from it)
EXIT_CODES = {
    SUCCESS: "success (`verify`: every chunk sound)",
    FAILED: "a run failed (finished segments are kept: run the same command to resume), or a store is damaged "
            "(`verify` lists the chunks; `verify --repair` then `run` recomputes them)",
    BAD_INPUT: "bad input: one line naming the field and the allowed values; nothing was written",
    INTERRUPTED: "a SLURM array task, or a run on MPI ranks, stopped by a signal with work left (its batch script "
                 "requeues it)",
    STOPPED: "`run` interrupted by Ctrl-C (finished segments kept: run again to resume; on MPI ranks, after the "
             "current segment)",
    128 + signal.SIGPIPE: "`run` whose output reader left (a pipe closed): stopped as SIGPIPE would, work kept",
}


def run(args) -> int:
    """Run or resume the spec's ensemble into its store."""
    from armillary.ensemble.launchers import launched_rank
    from armillary.ensemble.runs import run_to_store
    from armillary.ensemble.store import summary

    overrides = _overrides(args)
    spec = ensemble.load_spec(args.spec, **overrides)
    started = time.perf_counter()
    if args.array_index is not None or args.array_size is not None:
        finished = ensemble.run_array_task(spec, args.array_index, args.array_size)
        return SUCCESS if finished else INTERRUPTED
    try:
        run_to_store(spec, overwrite=args.overwrite)
    except KeyboardInterrupt:
        print("armillary: interrupted; run the same command again to resume", file=sys.stderr)
        return STOPPED
    except StoppedWithWorkLeft as stopped:  # every rank of a run on MPI ranks, together
        if launched_rank() == 0:
            print(f"armillary: {stopped}", file=sys.stderr)
        return STOPPED if stopped.signal_number == signal.SIGINT else INTERRUPTED
    except BrokenPipeError:
        raise  # the reader of stdout left: see main
    except (RunFailed, OSError) as error:  # OSError: e.g. the disk is full
        print(f"armillary: run failed: {error}; finished segments are kept, run the same command to resume",
              file=sys.stderr)
        return FAILED
    if launched_rank() != 0:  # one system on MPI ranks: rank 0 reports
        return SUCCESS
    status = summary(spec.store)
    print(f"armillary: {spec.store}: {status['segments_done']}/{status['segments_total']} segments, "
          f"{status['failed_members']} failed members, {time.perf_counter() - started:.1f} s")
    return SUCCESS


def check(args) -> int:
    """Validate a spec as ``run`` would (its system, method, options, sampler, store) and say what a
    run would do; writes nothing."""
    from armillary.kernels.models.checks import GRADIENT_TOLERANCE

    overrides = _overrides(args)
    spec = ensemble.load_spec(args.spec, **overrides)
    plan, create = ensemble.prepare(spec)
    state = "would be created" if create else "holds this spec: a run resumes it"
    print(f"armillary: {args.spec}: valid; {spec.system} / {spec.method}, {spec.members} members × {spec.n_steps} "
          f"steps in {len(plan.chunks)} chunks × {len(plan.segments)} segments ({plan.mode} mode); "
          f"{spec.store} {state}")
    if plan.pair_cost is not None:
        print(plan.pair_cost)
    if spec.device == "cuda":  # checked anywhere, run where the device is (a login node submits to GPU nodes)
        from armillary.ensemble.devices import chosen_devices, probe_cuda  # here: Dask is not for `--help`

        missing, devices = probe_cuda()
        if missing is not None:
            print(f"armillary: execution.device: not here: {missing}")
        elif spec.cluster["kind"] == "local":
            used = chosen_devices(spec.cluster.get("gpus"), devices)
            print(f"armillary: execution.device: cuda: {len(devices)} GPUs visible here ({', '.join(devices)}); a "
                  f"run starts {len(used)} workers, one on each of {', '.join(used)}")
    if spec.model is not None:
        count = min(spec.chunk, spec.members)
        print(f"armillary: model {spec.model}: every expression finite and the inertia positive definite at the "
              f"initial states of members 0–{count - 1}")
        error = plan.model_gradient_error(MODEL_CHECK_STATES)
        print(f"armillary: model {spec.model}: at {MODEL_CHECK_STATES} random admissible states, every expression "
              f"finite, the inertia positive definite, and ∂V/∂q against central differences: largest error "
              f"{error:.2e} (relative; at most {GRADIENT_TOLERANCE:g} passes)")
        if not error <= GRADIENT_TOLERANCE:
            raise InvalidInput("system.model", f"{spec.model}: the derived ∂V/∂q disagrees with central differences of "
                               f"V by {error:.2e}: the potential is not smooth at the states drawn")
    return SUCCESS


def verify(args) -> int:
    """Check every chunk's checksum and every completion record of each store; ``--repair`` marks the
    segments that wrote damaged chunks not done, for ``run`` to recompute."""
    from armillary.ensemble.verify import repair
    from armillary.ensemble.verify import verify as verify_store

    worst = SUCCESS
    for store in args.stores:
        found = verify_store(store)
        print("\n".join(found.summary()))
        if args.repair and found.damaged:
            redo = repair(found)
            count = sum(len(segments) for segments in redo.values())
            print(f"armillary: marked {count} segments of {len(redo)} member chunks not done; `armillary run SPEC "
                  f"--store {store}` recomputes them (bitwise as before)")
            continue
        worst = max(worst, SUCCESS if found.sound else FAILED)
    return worst


def status(args) -> int:
    """Progress of each store: segments, member-steps, failures, throughput, who is running it."""
    from armillary.ensemble.store import summary
    from armillary.kernels import STATUS_MEANINGS

    for store in args.stores:
        s = summary(store)
        until = s["until"]
        size = f"{s['members']} members" if until is None else f"{until['members']} of at most {s['members']} members"
        print(f"{store}: {s['system']} / {s['method']}, {size}")
        print(f"  segments      {s['segments_done']}/{s['segments_total']} "
              f"({s['member_steps_done']:.3e} of {s['member_steps_total']:.3e} member-steps)")
        if until is not None:
            print(f"  until         {until['statistic']} within ± {until['half_width']:g}: {until['members']} members "
                  f"after {until['batches']} batches" + (", stopped: " + ("known" if until["reason"] == "known" else
                                                                        "max_members reached") if until["stopped"]
                                                         else ", running"))
            for interval in until["intervals"]:
                where = ", ".join(f"{name} = {value:g}" for name, value in interval["point"].items()) or "all members"
                print(f"    {where}: {interval['estimate']:.4g} [{interval['low']:.4g}, {interval['high']:.4g}] "
                      f"(± {(interval['high'] - interval['low']) / 2:.3g})")
        print(f"  failed        {s['failed_members']} members (status other than 0, and 8: escaped)")
        for code, count in sorted(s["status_counts"].items()):
            if code:
                print(f"    status {code}: {count} members, {s['status_meanings'].get(code, STATUS_MEANINGS.get(code))}")
        if s["task_seconds"] > 0:
            print(f"  throughput    {s['member_steps_done'] / s['task_seconds']:.3e} member-steps per task-second; "
                  f"{s['write_seconds'] / s['task_seconds']:.1%} of task time writing the store")
        if s["first_done"] is not None and s["last_done"] > s["first_done"]:
            wall = s["last_done"] - s["first_done"]
            print(f"  wall          {wall:.1f} s between the first and last finished segment")
        states = queue_states(store)
        if states:
            print("  slurm         " + ", ".join(f"{job} {state}" for job, state in sorted(states.items())))
        lock = s["lock"]
        if lock and lock["stale"]:
            print(f"  not running: pid {lock['pid']} on {lock['host']} (since {lock['since']}) is gone; the next "
                  "`armillary run` resumes and takes its lock over")
        elif lock:
            print(f"  running: pid {lock['pid']} on {lock['host']} since {lock['since']}")
        elif not states:
            print("  not running")
    return SUCCESS


def submit(args) -> int:
    """Write the store template and submit one SLURM job array (or, for [execution] ranks > 1, one MPI job) plus a
    dependent report job."""
    spec = ensemble.load_spec(args.spec)
    site = load_site(args.site, args.dry_run, partition=args.partition, time=args.time)
    submit_jobs(spec, site, args.array_size, args.dry_run)
    return SUCCESS


def report(args) -> int:
    """report.md with tables and PNG figures of one or more stores; prints the headline table."""
    from armillary.ensemble.report import write_report
    from armillary.ensemble.store import summary
    from armillary.ensemble.verify import verify as verify_store

    damaged = {}
    for store in args.stores:
        summary(store)  # refuses anything that is not an armillary store, naming it
        found = verify_store(store).damaged
        if found and not args.allow_damaged:
            first = found[0]
            more = f" and {len(found) - 1} more chunks" if len(found) > 1 else ""
            raise InvalidInput(first.variable, f"chunk {first.chunk} of {store} {first.problem} ({first.where}){more}; "
                               f"`armillary verify --repair {store}` then `armillary run` recomputes it, or report "
                               "with --allow-damaged (damaged chunks read as NaN)")
        if found:
            print(f"armillary: warning: {store}: {len(found)} damaged chunks read as NaN: "
                  + "; ".join(str(d) for d in found), file=sys.stderr)
        damaged[store] = found
    if not (args.same_minimum > 0 and math.isfinite(args.same_minimum)):
        raise InvalidInput("--same-minimum", f"must be a finite number > 0, got {args.same_minimum!r}")
    table, _ = write_report(args.stores, args.out, damaged, args.burn_in, args.same_minimum)
    print(table)
    print(f"armillary: wrote {os.path.join(args.out, 'report.md')} and its figures")
    return SUCCESS


def _member_choice(text: str):
    """--member: a member's position (an integer) or "best"."""
    if text == "best":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a member's position (an integer) or 'best', got {text!r}") from None


def export(args) -> int:
    """One member's saved frames as a GSD or extended XYZ file for OVITO or VMD: positions, Voronoi coordination
    and particle ids (``armillary.ensemble.export``)."""
    from armillary.ensemble.accessor import open_store
    from armillary.ensemble.export import WRITERS, default_output, format_of
    from armillary.ensemble.store import summary

    if "://" not in args.store and not os.path.exists(args.store):
        raise InvalidInput("store", f"{args.store!r} does not exist")
    summary(args.store)  # refuses anything that is not an armillary store, naming it
    kind = args.format or format_of(args.output)
    output = args.output or default_output(args.store, kind)
    ds = open_store(args.store)
    if args.member == "best":
        from armillary.ensemble.minima import best_member

        args.member = best_member(ds)
    done = WRITERS[kind](ds, output, member=args.member, every=args.every)
    skipped = f"; skipped {done.skipped} samples with non-finite positions" if done.skipped else ""
    samples = "every saved sample" if args.every == 1 else f"one saved sample in {args.every}"
    print(f"armillary: wrote {done.frames} frames of {done.particles} particles (member {args.member}, {samples}) "
          f"to {done.path} ({kind}){skipped}")
    return SUCCESS


class SystemDescription(NamedTuple):
    """What ``armillary systems`` and the docs' systems page (:func:`.reference.systems_reference`) state of a
    system, read from its declaration in one place."""

    name: str
    summary: str
    space: str
    variables: list[tuple[str, tuple[str, ...], str]]  # (name, dims, unit)
    parameters: list[tuple[str, str, str, str, str]]  # (name, shape, unit, meaning, " = default" of a model's or "")
    presets: list[tuple[str, str]]  # (name, meaning)
    methods: list[str]


def describe_system(definition) -> SystemDescription:
    """A system's name, summary, space and its variables, parameters, presets and methods."""
    from armillary.kernels import methods_for

    return SystemDescription(
        definition.name, definition.summary, definition.space.name,
        [(v.name, v.dims, v.unit) for v in definition.space.variables],
        [(p.name, p.shape, p.unit, p.doc, f" = {p.default}" if definition.model is not None else "")
         for p in definition.parameters],
        [(name, preset().doc) for name, preset in definition.presets.items()], list(methods_for(definition)))


def print_system(definition) -> None:
    """One system as ``armillary systems`` lists it: name, space and variables, parameters, presets, methods."""
    system = describe_system(definition)
    print(f"{system.name}: {system.summary}")
    print(f"    space {system.space}: " + ", ".join(f"{name} ({', '.join(dims)}) [{unit}]"
                                                  for name, dims, unit in system.variables))
    width = max((len(name) for name, *_ in system.parameters), default=0)
    for name, shape, unit, doc, default in system.parameters:
        print(f"    {name:<{width}} {shape:<8} [{unit}] {doc}{default}")
    for name, doc in system.presets:
        print(f"    preset {name}: {doc}")
    print(f"    methods: {', '.join(system.methods)}")


def systems(args) -> int:
    """Names, state space and variables, parameters, presets and methods of every system; the spaces
    with their samplers; the methods; the status codes.  With ``--model FILE``: the system derived from
    a model file, and what deriving and compiling it cost."""
    from armillary.kernels import METHODS, SPACES, STATUS_MEANINGS, SYSTEMS

    if args.model is not None:
        started = time.perf_counter()
        definition = ensemble.load_model(args.model).definition
        print_system(definition)
        info = definition.model
        how = (f"derived in {info.derive_seconds:.2f} s" if info.derive_seconds else "derivation from the cache")
        print(f"    {how}; loaded in {time.perf_counter() - started:.2f} s; {len(info.text.splitlines())} lines of "
              f"generated kernel code, {definition.name}: the kernels compile on first use and are cached")
        return SUCCESS
    for definition in SYSTEMS.values():
        print_system(definition)
    for space in SPACES.values():
        print(f"space {space.name}: {space.summary}; diagnostics "
              + (", ".join(d.name for d in space.diagnostics) or "none") + "; initial = "
              + ", ".join(["preset", "perturb", "file"]
                          + [f"{name} ({sampler.doc})" for name, sampler in space.samplers.items()]))
    print("methods: " + ", ".join(f"{m.name} (order {m.order}; {', '.join(m.spaces)}"
                                  + "".join(f"; {option} {' | '.join(values)}" for option, values in m.choices.items())
                                  + ")" for m in METHODS.values()))
    print("status codes: " + "; ".join(f"{code} {meaning}" for code, meaning in STATUS_MEANINGS.items()))
    return SUCCESS


def _overrides(args) -> dict:
    """The spec keys ``run`` and ``check`` replace from their command line (:func:`_spec_arguments`)."""
    return {"store": args.store, "members": args.members, "workers": args.workers, "scheduler": args.scheduler,
            "device": args.device}


def _spec_arguments(parser: argparse.ArgumentParser) -> None:
    """The spec and the overrides of its keys, as ``run`` and ``check`` take them."""
    parser.add_argument("spec", help="path of the TOML spec")
    parser.add_argument("--store", help="store path or URL (replaces output.store)")
    parser.add_argument("--members", type=int, help="number of members (replaces ensemble.members)")
    parser.add_argument("--workers", type=int, help="local worker processes (replaces cluster.workers)")
    parser.add_argument("--scheduler", help="address of a running Dask scheduler, tcp://host:port")
    parser.add_argument("--device", help="cpu or cuda: where the members are stepped (replaces execution.device)")


def build_parser() -> argparse.ArgumentParser:
    """The ``armillary`` argument parser: its subcommands and their arguments (the docs' CLI page is made from it)."""
    parser = argparse.ArgumentParser(prog="armillary", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run or resume the ensemble of a TOML spec into its Zarr store "
                                     "(under mpiexec -n R or srun: its one system-mode member on R MPI ranks)")
    _spec_arguments(run_parser)
    run_parser.add_argument("--overwrite", action="store_true", help="replace a store that holds a different spec")
    run_parser.add_argument("--array-index", type=int, help="SLURM array task: run the chunks c with c mod size = index")
    run_parser.add_argument("--array-size", type=int, help="SLURM array task: number of tasks in the array")
    run_parser.set_defaults(handler=run)
    submit_parser = commands.add_parser("submit", help="submit the spec to SLURM as one job array (with [execution] "
                                        "ranks > 1: one MPI job of that many tasks) plus a report job")
    submit_parser.add_argument("spec", help="path of the TOML spec")
    submit_parser.add_argument("--array-size", type=int, help="array tasks (default: one per chunk)")
    submit_parser.add_argument("--partition", help="SLURM partition (replaces the site's)")
    submit_parser.add_argument("--time", help="walltime per array task, e.g. 01:00:00 (replaces the site's)")
    submit_parser.add_argument("--site", help="site settings TOML (see slurm/site.example.toml)")
    submit_parser.add_argument("--dry-run", action="store_true",
                               help="print the sbatch scripts, submit nothing (where no SLURM controller answers, "
                                    "the partition goes unchecked, with a warning)")
    submit_parser.set_defaults(handler=submit)
    status_parser = commands.add_parser("status", help="progress, failures and throughput of stores")
    status_parser.add_argument("stores", nargs="+", metavar="STORE")
    status_parser.set_defaults(handler=status)
    report_parser = commands.add_parser("report", help="energy-drift statistics and figures of stores (report.md)")
    report_parser.add_argument("stores", nargs="+", metavar="STORE")
    report_parser.add_argument("--out", default="report", help="directory for report.md and the PNGs (default: report)")
    report_parser.add_argument("--allow-damaged", action="store_true",
                               help="report a store with chunks that fail their checksums (they read as NaN)")
    report_parser.add_argument("--burn-in", type=float, metavar="SECONDS",
                               help="fit drift rates after this time (default: over the second half of each run)")
    report_parser.add_argument("--same-minimum", type=float, default=1e-9, metavar="REL",
                               help="minimisations (fire): members whose final energies lie within REL · |V| of each "
                                    "other reached the same minimum (default: 1e-9)")
    report_parser.set_defaults(handler=report)
    verify_parser = commands.add_parser("verify", help="check every chunk's checksum and completion record; "
                                        "exit 0 only when all is sound")
    verify_parser.add_argument("stores", nargs="+", metavar="STORE")
    verify_parser.add_argument("--repair", action="store_true", help="mark the segments that wrote damaged chunks "
                               "not done, so that `armillary run` recomputes exactly what is needed")
    verify_parser.set_defaults(handler=verify)
    export_parser = commands.add_parser("export", help="write one member's saved frames as a GSD or extended XYZ "
                                        "file for OVITO or VMD (positions, Voronoi coordination, particle ids)")
    export_parser.add_argument("store", metavar="STORE", help="the store's path (its run kept the particles' state "
                               "variables: [output] variables)")
    export_parser.add_argument("--format", choices=("gsd", "xyz"),  # export.FORMATS (not imported: --help stays light)
                               help="file format (default: from the suffix of --output, else gsd)")
    export_parser.add_argument("--output", metavar="PATH", help="file to write (default: the store's path with .zarr "
                               "replaced by .gsd or .xyz); written whole or not at all")
    export_parser.add_argument("--member", type=_member_choice, default=0, metavar="M",
                               help="member to export, its position in the store (default: 0), or 'best': the member "
                                    "with the lowest final energy of a minimisation (fire)")
    export_parser.add_argument("--every", type=int, default=1, metavar="K",
                               help="export every K-th saved sample, from the first (default: 1, all)")
    export_parser.set_defaults(handler=export)
    check_parser = commands.add_parser("check", help="validate a spec as `run` would and say what it would do; "
                                       "writes nothing")
    _spec_arguments(check_parser)
    check_parser.set_defaults(handler=check)
    systems_parser = commands.add_parser("systems", help="list systems, their parameters and presets")
    systems_parser.add_argument("--model", metavar="FILE", help="the system derived from a model file instead")
    systems_parser.set_defaults(handler=systems)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run" and argv is None:  # this process's own command line: it may be one of a launcher's ranks
        from armillary.jobs.rank_supervisor import supervise

        supervise()  # under mpiexec or srun of more than one rank: returns in the rank's working process only
    try:
        return args.handler(args)
    except InvalidInput as error:
        from armillary.ensemble.launchers import launched_rank

        if launched_rank() == 0:  # every rank of a run on MPI ranks refuses the same input: one line, from rank 0
            print(f"armillary: {error}", file=sys.stderr)
        return BAD_INPUT
    except DamagedStore as error:
        print(f"armillary: {error}", file=sys.stderr)
        return FAILED
    except BrokenPipeError:
        # the reader left (``armillary systems | head``): stop quietly, and keep Python from
        # complaining again when it flushes stdout at exit.  A run stopped this way has work left
        # (finished segments kept): it exits as a process killed by SIGPIPE would.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE if args.command == "run" else SUCCESS


if __name__ == "__main__":
    sys.exit(main())
