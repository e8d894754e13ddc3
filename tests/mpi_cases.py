"""What tests/test_mpi.py runs under ``mpiexec -n R``: the specs of its stores, and the migration and halo check.

``python tests/mpi_cases.py run DIR NAME …`` runs each named spec of :func:`spec_text` into DIR/NAME.zarr, in one
process per rank (the kernels load once for all of them), through :func:`armillary.ensemble.runs.run_to_store`, what
``armillary run`` calls.  ``python tests/mpi_cases.py halos OUT`` moves 2000 hot particles across the patches' borders
for 30 rebuilds, checking at each that every id is held once and that the full-row gradient of every particle is the
one of the same configuration on one rank, bit for bit; it writes "ok" and the counts to OUT (rank 0).
"""

import sys

import numpy as np

PARTICLES = 2000
SIGMA = float(np.sqrt(0.8 * 4.0 * np.pi / PARTICLES))  # ρ* = 0.8
#: the runs' steps and segments: 50 steps in 2 segments, a rebuild every few steps (skin 0.1σ at T = 1)
STEPS, SEGMENT = 50, 25

SYSTEMS = {
    "lj": f'''name = "sphere_lj"
params = {{ epsilon = 1.0, sigma = {SIGMA!r}, cutoff = {2.5 * SIGMA!r} }}''',
    # two types of LJ, 20 chains of 10 with bonds and bending angles among free particles; B's own friction (by id,
    # not by a rank's row: langevin's per-particle factors)
    "mixture": f'''name = "sphere_mixture"
[system.params]
pair = "lj"
composition = {{ A = 0.5, B = 0.5 }}
types = {{ A = {{ sigma = {SIGMA!r} }}, B = {{ sigma = {0.9 * SIGMA!r}, mass = 2.0, friction = 40.0 }} }}
bond_types = {{ b = {{ style = "harmonic", k = {400.0 / SIGMA ** 2!r}, r0 = {SIGMA!r} }} }}
angle_types = {{ bend = {{ style = "cosine", k = 2.0 }} }}
polymers = {{ count = 20, length = 10, bond = "b", angle = "bend", ring = false }}''',
}
METHODS = {"vi": 'method = "vi"', "langevin": 'method = "langevin"\ntemperature = 1.0\nfriction = 20.0'}


def spec_text(name: str, store: str, ranks: int = 1, threads_per_rank: int = 1, members: int = 1) -> str:
    """The spec "<system>-<method>" (e.g. "lj-vi") of 2000 particles, ``members`` members in chunks of one (each in
    the system mode), STEPS steps of 0.002σ (√(m/ε) = σ) in segments of SEGMENT, its store ``store``, on ``ranks``
    ranks of ``threads_per_rank`` threads each."""
    system, method = name.split("-")
    dt = 0.002 * SIGMA
    placement = "polymers" if system == "mixture" else "fibonacci"
    return f'''[system]
{SYSTEMS[system]}
[integrator]
{METHODS[method]}
dt = {dt!r}
t_end = {STEPS * dt!r}
save_every = 5
checkpoint_every = {SEGMENT}
skin = {0.1 * SIGMA!r}
[ensemble]
members = {members}
chunk = 1
initial = "particles"
particles = {PARTICLES}
placement = "{placement}"
temperature = 1.0
seed = 5
[output]
store = "{store}"
variables = ["energy", "temperature", "q", "omega"]
[execution]
ranks = {ranks}
threads_per_rank = {threads_per_rank}
'''


def stored_arrays(store: str) -> dict:
    """Every data array and checkpoint slot (``_progress/slot_*``: what a resume starts from) of a store, by name."""
    import zarr

    group = zarr.open_group(store, mode="r")
    arrays = {name: array[...] for name, array in group.arrays()}
    arrays.update({f"_progress/{name}": array[...] for name, array in group["_progress"].arrays()
                   if name.startswith("slot_")})
    return arrays


def assert_same_bits(store: str, reference: str) -> None:
    """The two stores hold the same arrays, equal bit for bit (NaN where NaN)."""
    got, expected = stored_arrays(store), stored_arrays(reference)
    assert set(got) == set(expected) and "_progress/slot_q" in got
    differ = [name for name in expected if not np.array_equal(got[name], expected[name], equal_nan=True)]
    assert not differ, f"{store} differs from {reference} in {differ}"


def run_specs(directory: str, names: list[str]) -> None:
    """Run the named specs into ``directory``, and write there (reads-<rank>.json) the most particles whose state
    this rank read from a store (initial values and checkpoint slots) and made (initial states)."""
    import json

    from armillary.ensemble import parse_spec
    from armillary.ensemble.launchers import launched_rank
    from armillary.ensemble.plan import Plan
    from armillary.ensemble.runs import run_to_store
    from armillary.ensemble.store import RunStore

    most = {"read": 0, "made": 0}

    def counted(method, key, particles):
        def wrapper(*args, **options):
            value = method(*args, **options)
            most[key] = max(most[key], particles(args, value))
            return value
        return wrapper

    state_names = ("q", "omega", "q0", "omega0")
    RunStore.read = counted(RunStore.read, "read",
                            lambda args, value: value.shape[1] if args[1] in ("q0", "omega0") else 0)
    RunStore.read_checkpoint = counted(RunStore.read_checkpoint, "read", lambda args, values: max(
        [values[name].shape[1] for name in state_names if name in values], default=0))
    Plan.initial_state = counted(Plan.initial_state, "made", lambda args, state: state["q"].shape[1])
    for name in names:
        run_to_store(parse_spec(spec_text(name, f"{directory}/{name}.zarr")), stream=open("/dev/null", "w"))
    with open(f"{directory}/reads-{launched_rank()}.json", "w") as handle:
        json.dump(most, handle)


def check_halos(out: str) -> None:
    """Every id held exactly once after each rebuild, and each particle's gradient the one-rank gradient's bits."""
    from armillary.ensemble.mpi import MpiExchange, world
    from armillary.kernels import domain, get_system
    from armillary.kernels import neighbours as nb
    from armillary.kernels.geometry import fibonacci_sphere

    exchange = MpiExchange(world())
    system = get_system("sphere_lj", epsilon=1.0, sigma=SIGMA, cutoff=2.5 * SIGMA)
    coef = np.ascontiguousarray(system.definition.coefficients(system.broadcast(1, PARTICLES), PARTICLES).T)
    kernels = domain.compiled_domain_kernels("vi", "sphere_lj")
    list_range = 2.8 * SIGMA
    per_axis = nb.grid_cells_per_axis(PARTICLES, list_range)
    rng = np.random.default_rng(11)  # every rank draws the same moves
    q = fibonacci_sphere(PARTICLES)

    def records(positions, first, stop):
        rows = np.zeros((stop - first, domain.RECORD_COLUMNS))
        rows[:, 0:3] = rows[:, 3:6] = positions[first:stop]
        rows[:, 9] = 1.0
        rows[:, -1] = np.arange(first, stop)
        return rows

    cuts = domain.id_cuts(PARTICLES, exchange.size)
    patch = domain.Patch(records(q, cuts[exchange.rank], cuts[exchange.rank + 1]), PARTICLES, exchange, kernels, False)
    alone = domain.SingleRank()
    held = []
    for build in range(30):
        # hot particles: each moves about 0.6 of a cell a rebuild, across the patches' borders
        step = rng.normal(scale=0.6 * 2.0 / per_axis, size=q.shape)
        q = q + step - np.sum(step * q, axis=1, keepdims=True) * q
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        mine = patch.ids[:patch.owned]
        patch.q_next[:patch.owned, :, 0] = q[mine]
        patch.rebuild(per_axis, list_range)
        owned = np.concatenate(exchange.allgather(patch.ids[:patch.owned]))
        assert np.array_equal(np.sort(owned), np.arange(PARTICLES)), f"rebuild {build}: ids held {len(owned)} times"
        held.append(patch.owned)
        patch.gradient(coef)
        gradient = np.empty((PARTICLES, 3))
        pieces = exchange.allgather((patch.ids[:patch.owned], patch.grad[:, :, 0]))
        for ids, rows in pieces:
            gradient[ids] = rows
        one = domain.Patch(records(q, 0, PARTICLES), PARTICLES, alone, kernels, False)
        one.rebuild(per_axis, list_range)
        one.gradient(coef)
        reference = np.empty((PARTICLES, 3))
        reference[one.ids[:one.owned]] = one.grad[:, :, 0]
        assert np.array_equal(gradient, reference), f"rebuild {build}: the gradient differs from one rank's"
    if exchange.rank == 0:
        with open(out, "w") as handle:
            handle.write(f"ok {exchange.size} {min(held)} {max(held)}\n")


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run_specs(sys.argv[2], sys.argv[3:])
    else:
        check_halos(sys.argv[2])
