"""Every key of the run spec: its TOML type, default, unit and meaning, declared once.

The spec's reader (:mod:`.spec`) refuses to read a key that is not declared here or by the registry that
owns it (a method's options, a space's samplers, a cluster kind's keys), and the docs' spec reference is
generated from these declarations (:mod:`armillary.jobs.reference`), so the reference cannot drift from
what the reader accepts.  :data:`STATISTICS` declares what ``[ensemble] until`` can stop on, for the reader to
check and for :mod:`.analysis` to compute.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpecKey:
    """One spec key: ``kind`` its TOML type as a reader says it, ``default`` what applies when it is absent
    (text: "required", a value, or how it is derived), ``unit`` (empty for none), ``doc`` its meaning and
    allowed values."""

    kind: str
    default: str
    unit: str
    doc: str


#: ``section.key`` → its declaration; a method's options, a space's sampler keys and a cluster kind's keys
#: are declared by their own registries (see the module docstring)
SPEC_KEYS: dict[str, SpecKey] = {
    "system.name": SpecKey("string", "required (unless model)", "", "a built-in system; `armillary systems` lists "
                           "them"),
    "system.preset": SpecKey("string", "none", "", "parameter values and the initial state of a paper example of the "
                             "system (its presets are listed by `armillary systems`)"),
    "system.model": SpecKey("string", "none", "", "instead of name and preset: a model file (path relative to the "
                            "spec); its `initial_state(p)`, if any, is the preset"),
    "system.model_source": SpecKey("string", "written by armillary", "", "the model file's text, which the stored "
                                   "spec carries beside model; not written by users"),
    "system.params": SpecKey("table", "the preset's or the system's defaults", "the parameter's",
                             "parameter values by name; a value may be a sweep `{ values = [...] }` or "
                             "`{ linspace = [a, b, n] }`, and `\"name[k]\"` sweeps component k alone"),
    "integrator.method": SpecKey("string", "required", "", "the method; those that support the system's space "
                                 "(another is refused, listing them)"),
    "integrator.dt": SpecKey("number > 0", "required", "s", "the step (rk45: the first step, and the unit of time "
                             "of steps)"),
    "integrator.t_end": SpecKey("number > 0", "required", "s", "the end of the run, a whole number of steps"),
    "integrator.save_every": SpecKey("integer > 0", "1", "steps", "steps between saved samples"),
    "integrator.checkpoint_every": SpecKey("integer > 0", "≈ 10000, a multiple of save_every", "steps",
                                           "steps per task segment (the unit of restart), a multiple of save_every"),
    "integrator.skin": SpecKey("\"auto\" or number > 0", "\"auto\"", "m", "system-parallel runs: the Verlet skin "
                               "(chord) of the neighbour lists, rebuilt when a particle has moved half of it; "
                               "\"auto\" sets it at each rebuild by a measured cost model (Methods, molecular "
                               "dynamics)"),
    "integrator.active.speed": SpecKey("number > 0", "required (with active)", "rad/s", "brownian: the particles' "
                                       "self-propulsion speed v₀ along their headings (on the unit sphere)"),
    "integrator.active.rotational_diffusion": SpecKey("number ≥ 0", "required (with active)", "rad²/s", "brownian: "
                                                      "the headings' rotational diffusion D_r about q"),
    "execution.device": SpecKey("string", "\"cpu\"", "", "where the members are stepped: cpu, or cuda (one CUDA GPU "
                                "per process, one thread per member; its methods and options so far are on the "
                                "GPU page, and a machine without a GPU is refused)"),
    "execution.fma": SpecKey("boolean", "true", "", "device cuda: whether NVVM may fuse a·b + c into one multiply-add "
                             "(rounding once where the CPU rounds twice: results agree with the CPU to round-off); false "
                             "compiles without, each product and sum rounded as on the CPU (the results are still "
                             "not the CPU's bits: measured on an H200; see the GPU how-to)"),
    "execution.ranks": SpecKey("integer ≥ 1", "1", "MPI ranks", "one system-mode member (a pair potential with a "
                               "cutoff, on the CPU) split over this many ranks, each owning a patch of the sphere: "
                               "what `armillary submit` asks SLURM for (`--ntasks`); `mpiexec -n R armillary run` "
                               "and `srun armillary run` take the launcher's count. The results are the same bits "
                               "on any number of ranks; needs mpi4py (`pip install 'armillary[mpi]'`)"),
    "execution.threads_per_rank": SpecKey("integer ≥ 1", "the CPUs of a rank (NUMBA_NUM_THREADS)", "threads",
                                          "runs on ranks: each rank's kernel threads, and a SLURM task's "
                                          "`--cpus-per-task`"),
    "ensemble.members": SpecKey("integer ≥ 1", "required (unless until)", "", "number of members (at most 10⁹; with sweeps a "
                                "multiple of the number of grid points)"),
    "ensemble.seed": SpecKey("integer ≥ 0", "0", "", "member i's random numbers depend only on (seed, i)"),
    "ensemble.initial": SpecKey("string", "preset", "", "preset | perturb | file, or a sampler of the space "
                                "(uniform on every space, particles on (S²)ⁿ, headings and tilts on SE(3))"),
    "ensemble.scale": SpecKey("number > 0", "1e-3", "the state's", "perturb: std of the tangent Gaussian, applied "
                              "by the space's retraction"),
    "ensemble.omega_scale": SpecKey("number ≥ 0", "1.0", "rad/s or m/s", "uniform, headings, tilts: std of the "
                                    "velocity Gaussian"),
    "ensemble.path": SpecKey("string", "none (required with initial = \"file\")", "", "file: a .npz with <name>0 "
                             "of each state variable (with a member axis, or one state for all), a finished "
                             "store (its end state), or particles on a sphere: a GSD file (HOOMD-blue, `armillary "
                             "export`; its last frame) or extended XYZ, whose particle types (matched to "
                             "system.params.types by name) and diameters a sphere_mixture run takes"),
    "ensemble.chunk": SpecKey("integer ≥ 1", "min(members, 1000); with until gcd(batch, 1000)", "members",
                              "members per task"),
    "ensemble.until": SpecKey("table", "none (members fixes the size)", "", "stop when the answer is known: add "
                              "`batch` members to every sweep point at a time until the 95 % interval of "
                              "`statistic` at every point is within ± `half_width`; replaces `members`"),
    "ensemble.until.statistic": SpecKey("string", "required", "", "median_lyapunov | chaotic_fraction (both need "
                                        "[analysis] lyapunov) | median_megno ([analysis] megno) | median_drift "
                                        "(energy drift rate after half the run)"),
    "ensemble.until.half_width": SpecKey("number > 0", "required", "the statistic's", "the interval's half width "
                                         "to reach at every sweep point"),
    "ensemble.until.batch": SpecKey("integer ≥ 1", "1000", "members per sweep point", "members added per point "
                                    "between two evaluations of the rule, a multiple of ensemble.chunk"),
    "ensemble.until.max_members": SpecKey("integer ≥ 1", "1000000", "members", "the most the run may grow to "
                                          "(all points together), a multiple of batch × sweep points"),
    "output.store": SpecKey("string", "required", "", "the Zarr store: a directory (relative to the working "
                            "directory) or an fsspec URL"),
    "output.variables": SpecKey("list of strings", "energy and the space's diagnostics", "", "what the store keeps "
                                "over time: the space's state variables, energy, its diagnostics, min_separation "
                                "(systems with encounters), temperature (system-parallel runs)"),
    "cluster.kind": SpecKey("string", "local", "", "local | address | slurm (registered by armillary.jobs)"),
    "cluster.workers": SpecKey("integer ≥ 1", "every CPU", "processes", "local: worker processes, one thread each "
                               "(device cpu)"),
    "cluster.gpus": SpecKey("integer ≥ 1", "every visible GPU", "devices", "local, device cuda: how many of the "
                            "node's GPUs (CUDA_VISIBLE_DEVICES, else all) the run uses, one worker process pinned to "
                            "each (workers applies to device cpu)"),
    "cluster.scheduler": SpecKey("string", "required with kind = \"address\"", "", "address: a running Dask "
                                 "scheduler started with TLS, tls://host:port (Armillary sends work only over "
                                 "connections that are encrypted and authenticated)"),
    "cluster.tls_ca_file": SpecKey("string", "Dask's distributed.comm.tls.ca-file", "", "address: the certificate "
                                   "authority (PEM file) the scheduler's certificate is signed by"),
    "cluster.tls_cert": SpecKey("string", "Dask's distributed.comm.tls.client.cert", "", "address: this client's "
                                "certificate (PEM file; may hold the key too)"),
    "cluster.tls_key": SpecKey("string", "Dask's distributed.comm.tls.client.key (else in tls_cert)", "",
                               "address: this client's private key (PEM file, readable by you alone)"),
    "cluster.dashboard": SpecKey("string", "127.0.0.1", "", "local: the address the Dask dashboard listens on: "
                                 "127.0.0.1 (this machine only; from elsewhere through an SSH tunnel), an address "
                                 "of this machine, or 0.0.0.0 (every interface: anyone who reaches it sees the "
                                 "run)"),
    "analysis.lyapunov": SpecKey("table", "none (no shadows)", "", "carry a Benettin shadow of every member "
                                 "(fixed-step methods): `{ d0, renormalise_every }`; stores `lyapunov` and "
                                 "`lyapunov_estimate`"),
    "analysis.lyapunov.d0": SpecKey("number in (0, 0.01)", "1e-8", "the state's", "the shadow's distance after "
                                    "each renormalisation"),
    "analysis.lyapunov.renormalise_every": SpecKey("integer ≥ 1", "10", "steps", "steps between renormalisations"),
    "analysis.lyapunov_spectrum": SpecKey("table", "none", "", "the first `count` Lyapunov exponents from `count` "
                                          "shadows orthogonalised together (Gram–Schmidt in the space's metric, "
                                          "fixed order): `{ count, d0, renormalise_every }`; stores "
                                          "`lyapunov_spectrum` (member, exponent) and `lyapunov_spectrum_estimate` "
                                          "(member, time, exponent)"),
    "analysis.lyapunov_spectrum.count": SpecKey("integer in [1, tangent dimension]", "required", "exponents",
                                                "how many exponents (shadows); the tangent dimension is 4n on (S²)ⁿ, "
                                                "6n on SO(3)ⁿ"),
    "analysis.lyapunov_spectrum.d0": SpecKey("number in (0, 0.01)", "1e-8", "the state's",
                                             "as analysis.lyapunov.d0 (every indicator shares the shadows: equal "
                                             "values)"),
    "analysis.lyapunov_spectrum.renormalise_every": SpecKey("integer ≥ 1", "10", "steps",
                                                            "as analysis.lyapunov.renormalise_every"),
    "analysis.megno": SpecKey("table", "none", "", "MEGNO ⟨Y⟩(t) from the first shadow's log-growth increments "
                              "(Cincotta & Simó 2000): `{ d0, renormalise_every }`; stores `megno` (member, time) "
                              "and `megno_final` (member)"),
    "analysis.megno.d0": SpecKey("number in (0, 0.01)", "1e-8", "the state's", "as analysis.lyapunov.d0"),
    "analysis.megno.renormalise_every": SpecKey("integer ≥ 1", "10", "steps", "as analysis.lyapunov.renormalise_every"),
    "analysis.sali": SpecKey("table", "none", "", "SALI of two deviation vectors (Skokos 2001; at least 2 "
                             "shadows), and GALI_k with a spectrum of count = k ≥ 3: `{ d0, renormalise_every }`; "
                             "stores `sali` (and `gali`) (member, time)"),
    "analysis.sali.d0": SpecKey("number in (0, 0.01)", "1e-8", "the state's", "as analysis.lyapunov.d0"),
    "analysis.sali.renormalise_every": SpecKey("integer ≥ 1", "10", "steps", "as analysis.lyapunov.renormalise_every"),
    "analysis.section": SpecKey("table", "none", "", "a surface of section (every method): every crossing of "
                                "`expression` through zero in `direction` is located inside its step, to the method's "
                                "order, and its time and state stored: `{ expression, direction, record, "
                                "max_crossings }`; stores `section_time` (member, crossing), `section_<variable>` "
                                "(member, crossing, …) and `section_count` (member)"),
    "analysis.section.expression": SpecKey("string", "required (unless the model file defines the section's "
                                           "function)", "", "a scalar Python expression over the space's "
                                           "state variables, indexed (`q[0][0]`, `Omega[0][1]`, `R[0][2][2]`), and "
                                           "the system's parameters `p.<name>` (`p.l[0]`), with + − × ÷ **, sin, "
                                           "cos, tan, exp, log, sqrt, atan2, abs, … and pi; without it, a model "
                                           "file's function of the section's name, e.g. `def section(q, omega, p)`"),
    "analysis.section.direction": SpecKey("string", "up", "", "up (from below zero to zero or above) | down | both"),
    "analysis.section.record": SpecKey("list of strings", "every state variable", "", "the state variables stored "
                                       "at each crossing"),
    "analysis.escape": SpecKey("table", "none", "", "an escape (every method): the time of each member's first "
                               "crossing of `expression` through zero in `direction`, located as a section's; with "
                               "`stop` the member stops there, status 8 (escaped, not failed), keeping the state "
                               "located there: `{ expression, direction, stop }`; stores `escape_time` (member)"),
    "analysis.escape.expression": SpecKey("string", "required", "", "as analysis.section.expression"),
    "analysis.escape.direction": SpecKey("string", "up", "", "up | down | both, as analysis.section.direction"),
    "analysis.escape.stop": SpecKey("true or false", "true", "", "stop each member at its escape, so that an "
                                    "escape-time map costs only the time to escape"),
    "analysis.section.max_crossings": SpecKey("integer ≥ 1", "1000", "crossings", "crossings stored per member; "
                                              "later ones are counted in `section_count`, not stored"),
    "analysis.sections": SpecKey("table of tables", "none", "", "several named surfaces of section, each "
                                 "`[analysis.sections.<name>]` with the keys of analysis.section (the name a "
                                 "lower-case identifier); each stores `section_<name>_time`, `section_<name>_<variable>` "
                                 "and `section_<name>_count`, over one `crossing` dimension as long as the largest "
                                 "max_crossings"),
}


def section_prefix(name: str) -> str:
    """The prefix of a surface of section's store variables: ``section_`` for ``[analysis] section`` (named
    "section"), ``section_<name>_`` for each of ``[analysis] sections``."""
    return "section_" if name == "section" else f"section_{name}_"


#: what ``[ensemble] until`` can stop on: statistic → (the per-member quantity it is taken of, the store
#: variable that quantity needs, its kind: the median of the values or the fraction of true flags)
STATISTICS = {
    "median_lyapunov": ("finite-time maximal Lyapunov exponent λ (1/s)", "lyapunov", "median"),
    "chaotic_fraction": ("λ above the chaos threshold, 10 / t_end", "lyapunov", "fraction"),
    "median_megno": ("MEGNO ⟨Y⟩ at the end of the run", "megno_final", "median"),
    "median_drift": ("energy drift rate (1/s) after the burn-in, half the run", "energy", "median"),
}
