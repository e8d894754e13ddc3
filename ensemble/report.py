"""``armillary report``: tables and figures of one or more stores, side by side, as report.md + PNGs."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")  # files only; no display on cluster nodes
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

from armillary.kernels.errors import InvalidInput  # noqa: E402

from .accessor import open_store  # noqa: E402
from .analysis import (  # noqa: E402
    analyse_store, chaos_table, diagnostic_names, escape_map, face_kinetic_energy, headline_diagnostic, kinetic_temperature,
    lyapunov_map, particle_points, particle_radii, particle_trajectories, particle_types, quantile_envelope,
    section_names, section_points, store_plan, sweep_coordinates,
)
from .minima import SAME_MINIMUM_TOLERANCE, distinct_minima, final_energies, is_minimisation, minima_rows  # noqa: E402
from .particles import (  # noqa: E402
    VORONOI_MIN_PARTICLES, coordination_by_type, coordination_figure, msd_by_type, pair_distribution,
    partial_pair_distributions, voronoi_order,
)

#: (column heading, summary key, format) of the headline table
COLUMNS = (
    ("method", "method", "{}"),
    ("members", "members", "{}"),
    ("median max |dE|/|E0|", "median_max_energy_error", "{:.3e}"),
    ("mean |dE|/|E0|", "mean_energy_error", "{:.3e}"),
    ("median drift (1/s)", "median_drift_rate", "{:.2e}"),
    ("median offset", "median_offset", "{:.2e}"),
    ("drift > 3 SE", "significant_drift_fraction", "{:.1%}"),
    ("alpha", "alpha", "{:.3f}"),
    ("alpha 95% CI", ("alpha_low", "alpha_high"), "[{:.3f}, {:.3f}]"),
    ("max constraint err", "max_constraint_error", "{:.2e}"),
    ("max momentum err", "max_momentum_error", "{:.2e}"),
    ("median λ (1/s)", "median_lyapunov", "{:.3g}"),
    ("chaotic", "chaotic_fraction", "{:.1%}"),
    ("failed", "failed_members", "{}"),
)
#: the most samples the per-type mean-square displacement of the report uses (evenly strided): its cost grows as
#: samples² · particles
MSD_SAMPLES = 101


def _with_constraint(summary: dict) -> dict:
    """The summary with ``max_constraint_error``: the maximum of its space's headline diagnostic (NaN: none)."""
    name = summary["constraint_diagnostic"]
    return summary | {"max_constraint_error": np.nan if name is None else summary[f"max_{name}"]}


def _constraint_heading(summaries: list[dict]) -> str:
    """The constraint column's heading: the diagnostic's name when every store shares it."""
    names = {s["constraint_diagnostic"] for s in summaries} - {None}
    return f"max {names.pop()}" if len(names) == 1 else "max constraint err (see below)" if names \
        else "max constraint err"


def _headings(summaries: list[dict]) -> list[str]:
    return ["store"] + [_constraint_heading(summaries) if key == "max_constraint_error" else heading
                        for heading, key, _ in COLUMNS]


def _cell(summary: dict, key, fmt: str) -> str:
    values = [summary[k] for k in key] if isinstance(key, tuple) else [summary[key]]
    if any(isinstance(v, float) and np.isnan(v) for v in values):
        return "–"  # not measured for this store (e.g. no Lyapunov shadows)
    return fmt.format(*values)


def headline_rows(labels: list[str], summaries: list[dict]) -> list[list[str]]:
    return [[label] + [_cell(_with_constraint(s), key, fmt) for _, key, fmt in COLUMNS]
            for label, s in zip(labels, summaries)]


def text_table(labels, summaries) -> str:
    header = _headings(summaries)
    rows = [header] + headline_rows(labels, summaries)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
                     for row in rows)


def markdown_table(labels, summaries) -> str:
    header = _headings(summaries)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in headline_rows(labels, summaries)]
    return "\n".join(lines)


def _save(fig, path, tight=True):
    """Write ``fig`` as a PNG (120 dpi) and free it; ``tight`` lays it out first (figures made with
    constrained layout pass False)."""
    if tight:
        fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _histogram_figure(path, panels, xlabel):
    """One histogram of per-member values per store, side by side; ``panels`` holds (title, values,
    threshold or None, drawn dashed).  Non-finite values (failed members) are left out."""
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.5), squeeze=False)
    for ax, (title, values, threshold) in zip(axes[0], panels):
        values = values[np.isfinite(values)]
        ax.hist(values, bins=min(50, max(5, values.size // 10)))
        if threshold is not None:
            ax.axvline(threshold, color="k", linestyle="--", linewidth=1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("members")
        ax.set_title(title, fontsize=9)
    _save(fig, path)


def _envelope_figure(path, series, ylabel, title, log=True):
    """Median and 5–95 % band over members, log scale unless ``log`` is False, one colour per store."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, envelope in series:
        t = envelope.time.values
        ax.fill_between(t, envelope.sel(quantile=0.05), envelope.sel(quantile=0.95), alpha=0.25)
        ax.plot(t, envelope.sel(quantile=0.5), label=f"{label} (median, 5–95 %)")
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("time t (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    _save(fig, path)


def write_report(stores: list[str], out: str, damaged: dict | None = None,
                 burn_in: float | None = None, same_minimum: float = SAME_MINIMUM_TOLERANCE) -> tuple[str, list[dict]]:
    """Write ``out``/report.md and its PNGs for ``stores``; returns the headline table (text) and
    the per-store summaries.  ``damaged``: store → its damaged chunks (:class:`ensemble.verify.Damage`),
    read as NaN and listed in the report.  ``burn_in`` (s): drift rates are fitted after it (default:
    over the second half of each run).  Stores of minimisations (fire) get their own report
    (:func:`write_minima_report`, members within ``same_minimum`` of one V counted as one minimum); they are not
    reported beside dynamics."""
    damaged = damaged or {}
    datasets = [open_store(store, [(d.variable, d.chunk) for d in damaged.get(store, ())]) for store in stores]
    labels = [os.path.basename(os.path.normpath(store)) for store in stores]
    minimisations = [is_minimisation(ds) for ds in datasets]
    if any(minimisations) and not all(minimisations):
        raise InvalidInput("stores", "minimisations (method fire) and dynamics have different reports: report "
                           f"{', '.join(label for label, m in zip(labels, minimisations) if m)} on their own")
    if all(minimisations):
        return write_minima_report(stores, labels, datasets, out, damaged, same_minimum)
    analyses = [analyse_store(ds, burn_in) for ds in datasets]
    os.makedirs(out, exist_ok=True)
    summaries = [a["summary"] for a in analyses]
    errors = [a["error"] for a in analyses]
    figures = []

    _envelope_figure(os.path.join(out, "energy_error.png"),
                     [(label, quantile_envelope(e)) for label, e in zip(labels, errors)],
                     "|E(t) − E(0)| / |E(0)|", "Relative energy error over the ensemble")
    figures.append(("energy_error.png", "Relative energy error: median and 5–95 % envelope over members"))

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, analysis, s in zip(labels, analyses, summaries):
        rms = analysis["growth_law"]["rms"]
        t, values = rms.time.values[1:], rms.values[1:]
        ax.loglog(t, values, label=f"{label}: α = {s['alpha']:.2f} [{s['alpha_low']:.2f}, {s['alpha_high']:.2f}]")
        half = t >= t[-1] / 2
        if np.isfinite(s["alpha"]) and half.sum() > 1:
            anchor = np.exp(np.mean(np.log(values[half]) - s["alpha"] * np.log(t[half])))
            ax.loglog(t[half], anchor * t[half] ** s["alpha"], "k--", linewidth=1)
    ax.set_xlabel("time t (s)")
    ax.set_ylabel("ensemble RMS of dE/|E0|")
    ax.set_title("Growth law: RMS ∝ t^α fitted over the second half (dashed)")
    ax.legend(fontsize=8)
    _save(fig, os.path.join(out, "growth_law.png"))
    figures.append(("growth_law.png", "Growth law of the ensemble RMS energy error"))

    _histogram_figure(os.path.join(out, "drift_rates.png"),
                      [(label, a["stats"].drift_rate.values, None) for label, a in zip(labels, analyses)],
                      "energy drift rate (1/s)")
    figures.append(("drift_rates.png", "Distribution of per-member energy drift rates"))

    for name in dict.fromkeys(headline_diagnostic(ds) for ds in datasets if diagnostic_names(ds)):
        series = [(label, quantile_envelope(ds[name])) for label, ds in zip(labels, datasets) if name in ds]
        if series:
            long_name = next(ds[name].attrs.get("long_name", name) for ds in datasets if name in ds)
            _envelope_figure(os.path.join(out, f"{name}.png"), series, long_name, f"Constraint error {name} over "
                             "the ensemble")
            figures.append((f"{name}.png", f"{name} ({long_name}): median and 5–95 % envelope over members"))

    momenta = [(label, quantile_envelope(a["momentum"])) for label, a in zip(labels, analyses)
               if a["momentum"] is not None]
    if momenta:
        _envelope_figure(os.path.join(out, "momentum_error.png"), momenta, "change of momentum map (kg·m²/s)",
                         "Conserved momentum (angular momentum, or its component on the symmetry axis)")
        figures.append(("momentum_error.png", "Error of the conserved momentum map over the ensemble"))
    chaotic = [(label, ds, s) for label, ds, s in zip(labels, datasets, summaries) if "lyapunov" in ds]
    if chaotic:
        figures += lyapunov_figures(chaotic, out)
    figures += indicator_figures([(label, ds) for label, ds in zip(labels, datasets)], out)
    for label, ds in zip(labels, datasets):
        if "spec" in ds.attrs and store_plan(ds).space.path in ds:
            figures.append(path_figure(ds, store_plan(ds).space.path, label, out))
    figures += [section_figure(ds, label, out, section) for label, ds in zip(labels, datasets)
                for section in section_names(ds)]
    figures += [_sweep_map(escape_map(ds).median_escape_time, sweep_coordinates(ds), "median escape time (s)",
                           f"{label}: escape time over the sweep", os.path.join(out, f"{label}_escape_map.png"),
                           f"{label}: median escape time over the swept parameters (blank: none escaped)")
                for label, ds in zip(labels, datasets) if "escape_time" in ds and sweep_coordinates(ds)]
    for label, ds in zip(labels, datasets):  # particle systems (a pair potential), with their state kept
        if "spec" in ds.attrs and store_plan(ds).has_system \
                and getattr(store_plan(ds).system.definition, "pair", None) is not None \
                and all(name in ds for name in store_plan(ds).space.names):
            figures += particle_figures(ds, label, out)

    table = text_table(labels, summaries)
    lines = ["# Armillary report", "", markdown_table(labels, summaries), "",
             "dE/|E0| is the relative energy error (absolute, in J, for members with |E0| < 1e-12: "
             + ", ".join(f"{label}: {s['absolute_members']}" for label, s in zip(labels, summaries)) + "). "
             + ("For forced runs (" + ", ".join(label for label, ds in zip(labels, datasets) if "work" in ds)
                + ") dE is the energy balance error E(t) − E(0) − W(t), W the work the forces did (stored as "
                "`work`): what the forces did is not the integrator's error. " if any("work" in ds for ds in datasets)
                else "")
             + "Drift rate: least-squares slope of dE/|E0| against t per member over the drift window "
             + ("after the burn-in given with --burn-in" if burn_in is not None else "(the second half of the run)")
             + " stated per store below, so that the settling of a bounded error is not read as drift; its "
             "standard error is Newey–West (Bartlett kernel, lag ⌊4 (T/100)^{2/9}⌋), and a drift counts as "
             "significant beyond 3 standard errors. Offset: the mean dE/|E0| over the same window (an offset "
             "is not a drift). α: slope of log RMS(dE/|E0|) over members against log t over the "
             "second half of the run (≈ 0 bounded, ≈ 0.5 random walk, ≈ 1 systematic drift), 95 % interval "
             "from batch means over 20 member groups (none below 40 members). λ: finite-time maximal Lyapunov "
             "exponent at the end of the run (Benettin shadows, 1/s); a member is chaotic when λ > 10 / T.", ""]
    for label, s, store, ds in zip(labels, summaries, stores, datasets):
        lines.append(f"- **{label}** (`{store}`): {s['system']}, {s['method']}, h = {s['dt']:g} s, "
                     f"T = {s['t_end']:g} s; drift window t = {s['drift_window_start']:g}–{s['drift_window_end']:g} s; "
                     f"max |dE|/|E0| over all members {s['max_energy_error']:.3e}"
                     + "; " + ", ".join(f"max {name} {_cell(s, f'max_{name}', '{:.2e}')}"
                                        for name in diagnostic_names(ds)))
    for store in stores:
        if damaged.get(store):
            lines.append(f"- **`{store}` is damaged** (reported with --allow-damaged; these chunks read as NaN): "
                         + "; ".join(str(d) for d in damaged[store]))
    lines.append("")
    for name, caption in figures:
        lines += [f"## {caption}", "", f"![{caption}]({name})", ""]
    with open(os.path.join(out, "report.md"), "w") as handle:
        handle.write("\n".join(lines))
    return table, summaries


#: (column heading, summary key, format) of the headline table of minimisation stores
MINIMA_COLUMNS = (
    ("system", "system", "{}"),
    ("N", "bodies", "{}"),
    ("members", "members", "{}"),
    ("lowest V (J)", "lowest_energy", "{:.9f}"),
    ("reached it", "reached_lowest", "{}"),
    ("minima", "distinct_minima", "{}"),
    ("converged", "converged", "{}"),
    ("not converged", "not_converged", "{}"),
    ("failed", "failed_members", "{}"),
    ("median steps", "median_steps", "{:.0f}"),
)


def minima_summary(ds: xr.Dataset, minima: list) -> dict:
    """The headline numbers of a minimisation store: the lowest V, how many members reached it, the number of
    distinct minima, the members' outcomes and their median number of steps."""
    from armillary.kernels.status import NOT_CONVERGED, OK

    status = ds["status"].values
    lowest = minima[0] if minima else None
    return {"system": ds.attrs.get("system", "?"), "bodies": ds.sizes.get("body", 0), "members": ds.sizes["member"],
            "lowest_energy": lowest.energy if lowest else np.nan,
            "reached_lowest": lowest.members.size if lowest else 0, "distinct_minima": len(minima),
            "converged": int(np.sum(status == OK)), "not_converged": int(np.sum(status == NOT_CONVERGED)),
            "failed_members": int(np.sum(~np.isin(status, (OK, NOT_CONVERGED)))),
            "median_steps": float(np.median(ds["minimisation_steps"].values))}


def write_minima_report(stores: list[str], labels: list[str], datasets: list[xr.Dataset], out: str, damaged: dict,
                        same_minimum: float) -> tuple[str, list[dict]]:
    """report.md of minimisation stores (:mod:`.minima`): per store a headline row, the distinct minima with their
    counts and defects, the spread of the final energies, the best member's Voronoi coordination and the largest
    force's descent; returns the headline table (text) and the per-store summaries."""
    os.makedirs(out, exist_ok=True)
    found = [distinct_minima(ds, same_minimum) for ds in datasets]
    summaries = [minima_summary(ds, minima) for ds, minima in zip(datasets, found)]
    headings = [heading for heading, _, _ in MINIMA_COLUMNS]
    cells = [[_cell(summary, key, fmt) for _, key, fmt in MINIMA_COLUMNS] for summary in summaries]
    widths = [max(len(text) for text in column) for column in zip(["store"] + headings, *([label] + row for label, row
                                                                                          in zip(labels, cells)))]
    table = "\n".join("  ".join(text.ljust(width) for text, width in zip(row, widths))
                       for row in [["store"] + headings] + [[label] + row for label, row in zip(labels, cells)])
    lines = ["# Armillary report: minimisations", "",
             "| store | " + " | ".join(headings) + " |", "|" + "---|" * (len(headings) + 1)]
    lines += ["| " + " | ".join([label] + row) + " |" for label, row in zip(labels, cells)]
    lines += ["", f"Each member's minimum is its V at its last sample; members whose final V lie within "
              f"{same_minimum:g} · |V| of each other (along the sorted energies) reached the same minimum. Defects are "
              "the lowest member's: sites of Voronoi coordination 5, 7 or other ≠ 6, grouped into clusters of "
              "Voronoi neighbours: isolated disclinations (one site), scars (charged clusters of several; their "
              "sizes) and neutral clusters (dislocations: net charge 0).", ""]
    figures = []
    for label, store, ds, minima in zip(labels, stores, datasets, found):
        heads, rows = minima_rows(minima, ds.sizes["member"])
        lines += [f"## {label} (`{store}`)", "", "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        lines += ["| " + " | ".join(row) + " |" for row in rows] + [""]
        if damaged.get(store):
            lines += [f"**Damaged** (reported with --allow-damaged; these chunks read as NaN): "
                      + "; ".join(str(d) for d in damaged[store]), ""]
        figures += minima_figures(ds, label, out, minima)
    for name, caption in figures:
        lines += [f"## {caption}", "", f"![{caption}]({name})", ""]
    with open(os.path.join(out, "report.md"), "w") as handle:
        handle.write("\n".join(lines))
    return table, summaries


def minima_figures(ds: xr.Dataset, label: str, out: str, minima: list) -> list[tuple[str, str]]:
    """The members' final V above the lowest (how the ensemble spread over the minima), the largest tangential
    force over the steps (median and 5–95 % envelope), and the lowest minimum's Voronoi coordination."""
    figures = []
    energies = final_energies(ds)
    finite = energies[np.isfinite(energies)]
    if finite.size:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        above = finite - finite.min()
        ax.hist(above, bins=min(50, max(10, finite.size // 4)))
        ax.set_xlabel("final V − lowest V (J)")
        ax.set_ylabel("members")
        ax.set_title(f"{label}: {len(minima)} distinct minima among {finite.size} members")
        name = f"{label}_minima.png"
        _save(fig, os.path.join(out, name))
        figures.append((name, f"{label}: final energies above the lowest"))
    _envelope_figure(os.path.join(out, f"{label}_largest_force.png"),
                     [(label, quantile_envelope(ds["largest_force"], magnitude=False))],
                     "largest tangential force (J)", f"{label}: descent of the largest tangential force")
    figures.append((f"{label}_largest_force.png", f"{label}: largest tangential force over the minimisation"))
    if minima and minima[0].defects is not None:
        points = particle_points(ds, minima[0].representative, ds.sizes["time"] - 1)
        name = f"{label}_best_coordination.png"
        coordination_figure(points, voronoi_order(points).coordination, os.path.join(out, name))
        defects = minima[0].defects
        figures.append((name, f"{label}: Voronoi coordination of the lowest minimum (member "
                              f"{minima[0].representative}): {defects['z5']} five-fold, {defects['z7']} seven-fold, "
                              f"{minima[0].scars} scars"))
    return figures


def lyapunov_figures(stores: list[tuple[str, xr.Dataset, dict]], out: str) -> list[tuple[str, str]]:
    """Histogram of the members' λ per store (threshold dashed), the running estimate's median and
    5–95 % band over time, and for swept stores the λ map over the sweep grid."""
    figures = []
    _histogram_figure(os.path.join(out, "lyapunov.png"),
                      [(f"{label}: chaotic {summary['chaotic_fraction']:.1%}", ds.lyapunov.values,
                        summary["chaos_threshold"]) for label, ds, summary in stores],
                      "finite-time maximal Lyapunov exponent λ (1/s)")
    figures.append(("lyapunov.png", "Distribution of finite-time maximal Lyapunov exponents (dashed: chaos threshold)"))

    _envelope_figure(os.path.join(out, "lyapunov_running.png"),
                     [(label, quantile_envelope(ds.lyapunov_estimate.isel(time=slice(1, None)), magnitude=False))
                      for label, ds, _ in stores],
                     "running estimate of λ (1/s)", "Convergence of the finite-time Lyapunov exponent", log=False)
    figures.append(("lyapunov_running.png", "Running Lyapunov estimate: median and 5–95 % envelope over members"))

    for label, ds, _ in stores:
        sweeps = sweep_coordinates(ds)
        if not sweeps:
            continue
        figures.append(_sweep_map(lyapunov_map(ds).median_lyapunov, sweeps, "median λ (1/s)",
                                  f"{label}: λ over the sweep", os.path.join(out, f"{label}_lyapunov_map.png"),
                                  f"{label}: median Lyapunov exponent over the swept parameters"))
    return figures


def _sweep_map(grid: xr.DataArray, sweeps: list[str], quantity: str, title: str, path: str,
               caption: str) -> tuple[str, str]:
    """A median over the sweep grid: a line over one sweep coordinate, else a map over the first two (the
    median over the others); saved to ``path``, returned as (file name, caption)."""
    grid = grid.median(sweeps[2:]) if len(sweeps) > 2 else grid
    fig, ax = plt.subplots(figsize=(6, 4.5))
    if grid.ndim == 1:
        grid.plot(ax=ax, marker="o")
        ax.set_ylabel(quantity)
    else:
        grid.plot(ax=ax, x=sweeps[1], y=sweeps[0], cbar_kwargs={"label": quantity})
    ax.set_title(title)
    _save(fig, path)
    return os.path.basename(path), caption


def indicator_figures(stores: list[tuple[str, xr.Dataset]], out: str) -> list[tuple[str, str]]:
    """For stores with a spectrum: each exponent's distribution over members (one histogram panel per
    store); with MEGNO or SALI: their time series for the most regular and the most chaotic members (by
    the final ⟨Y⟩, else the final SALI) and the median; for swept stores with MEGNO, the map of the median
    final ⟨Y⟩ over the first two sweep coordinates."""
    figures = []
    spectra = [(label, ds) for label, ds in stores if "lyapunov_spectrum" in ds]
    if spectra:
        fig, axes = plt.subplots(1, len(spectra), figsize=(6.5 * len(spectra), 4), squeeze=False)
        for ax, (label, ds) in zip(axes[0], spectra):
            values = ds.lyapunov_spectrum.values
            for j in range(values.shape[1]):
                finite = values[:, j][np.isfinite(values[:, j])]
                if finite.size:
                    ax.hist(finite, bins=30, alpha=0.6, label=f"λ{j + 1}: median {np.median(finite):.3g}")
            ax.set_xlabel("finite-time Lyapunov exponent (1/s)")
            ax.set_ylabel("members")
            ax.set_title(f"{label}: Lyapunov spectrum over {values.shape[0]} members")
            ax.legend(fontsize=7)
        _save(fig, os.path.join(out, "spectrum.png"))
        figures.append(("spectrum.png", "Lyapunov spectra: each exponent's distribution over members"))
    series = [(label, ds, name) for label, ds in stores for name in ("megno", "sali") if name in ds]
    if series:
        fig, axes = plt.subplots(1, len(series), figsize=(6.5 * len(series), 4), squeeze=False)
        for ax, (label, ds, name) in zip(axes[0], series):
            values = ds[name].values
            ranking = ds.megno.values[:, -1] if "megno" in ds else -np.log10(ds.sali.values[:, -1])
            order = np.argsort(np.where(np.isfinite(ranking), ranking, np.inf))
            t = ds.time.values
            for members, tag, colour in ((order[:3], "most regular", "tab:blue"), (order[::-1][:3], "most chaotic",
                                                                                    "tab:red")):
                for k, m in enumerate(members):
                    ax.plot(t, values[m], color=colour, linewidth=1, label=f"{tag} (member {m})" if k == 0 else None)
            median = np.full(t.size, np.nan)
            known = np.isfinite(values).any(axis=0)  # MEGNO is NaN before the first renormalisation
            median[known] = np.nanmedian(values[:, known], axis=0)
            ax.plot(t, median, color="black", linewidth=1.5, label="median")
            if name == "sali":
                ax.set_yscale("log")
            ax.set_xlabel("time t (s)")
            ax.set_ylabel("MEGNO ⟨Y⟩" if name == "megno" else "SALI")
            ax.set_title(f"{label}: {'MEGNO (→ 2 regular, ∝ λt/2 chaotic)' if name == 'megno' else 'SALI (→ 0 chaotic)'}")
            ax.legend(fontsize=7)
        _save(fig, os.path.join(out, "megno_sali.png"))
        figures.append(("megno_sali.png", "MEGNO and SALI over time: the most regular and most chaotic members"))
    for label, ds in stores:
        sweeps = sweep_coordinates(ds)
        if "megno_final" not in ds or not sweeps:
            continue
        figures.append(_sweep_map(chaos_table(ds).median_megno, sweeps, "median MEGNO ⟨Y⟩",
                                  f"{label}: MEGNO over the sweep", os.path.join(out, f"{label}_megno_map.png"),
                                  f"{label}: median MEGNO ⟨Y⟩ over the swept parameters (2: regular)"))
    return figures


#: how many members' paths the path figure draws
PATH_MEMBERS = 8


def path_figure(ds: xr.Dataset, name: str, label: str, out: str) -> tuple[str, str]:
    """The planar paths of ``name`` (a (2,) state variable, m) of up to PATH_MEMBERS members spread evenly over
    the ensemble (so over its sweep grid), each labelled with its swept parameters; a dot marks the start."""
    members = ds.sizes["member"]
    chosen = np.unique(np.linspace(0, members - 1, min(PATH_MEMBERS, members)).round().astype(int))
    paths = ds[name].isel(member=chosen).values
    swept = [coord for coord in ds.coords if ds[coord].dims == ("member",) and coord != "member"]
    fig, ax = plt.subplots(figsize=(6.5, 6))
    for index, path in zip(chosen, paths):
        tags = ", ".join(f"{coord} = {ds[coord].values[index]:g}" for coord in swept)
        line, = ax.plot(path[:, 0], path[:, 1], linewidth=1, label=f"member {index}" + (f" ({tags})" if tags else ""))
        ax.plot(path[0, 0], path[0, 1], "o", color=line.get_color(), markersize=3)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel(f"{name} x (m)")
    ax.set_ylabel(f"{name} y (m)")
    ax.set_title(f"{label}: {ds[name].attrs.get('long_name', name)} of {len(chosen)} members")
    ax.legend(fontsize=7)
    figure = f"{label}_{name}_paths.png"
    _save(fig, os.path.join(out, figure))
    return figure, f"{label}: paths of the {name} of {len(chosen)} members (dots: start)"


def section_figure(ds: xr.Dataset, label: str, out: str, section: str) -> tuple[str, str]:
    """The named surface of section: every member's stored crossings in the two recorded components that spread
    most, all members overlaid, coloured by the member's λ (or MEGNO) where the store has it, else by member."""
    points = section_points(ds, section=section)
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    colour = points["colour"] if "colour" in points else points["member"]
    drawn = ax.scatter(points["x"], points["y"], c=colour, s=2, cmap="viridis", linewidths=0)
    fig.colorbar(drawn, ax=ax, label=colour.attrs.get("long_name", "member"))
    ax.set_xlabel(points.attrs["x"])
    ax.set_ylabel(points.attrs["y"])
    ax.set_title(f"{label}: {points.sizes['point']} crossings of {ds.sizes['member']} members", fontsize=9)
    figure = f"{label}_{section}.png"
    _save(fig, os.path.join(out, figure))
    return figure, (f"{label}: surface of section {store_plan(ds).spec.surfaces[section]['expression']} = 0, "
                    f"{points.attrs['x']} against {points.attrs['y']}")


def particle_figures(ds: xr.Dataset, label: str, out: str) -> list[tuple[str, str]]:
    """Kinetic temperature over time and the kinetic-energy map on the 5120-face mesh at five times, for member
    0 of a store of particles on the sphere (a pair potential, e.g. sphere_lj), then the
    :func:`particle_structure_figures` of its unit vectors."""
    from armillary.kernels.geometry import face_mesh

    figures = []
    temperature = kinetic_temperature(ds.isel(member=[0])).compute()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(temperature.time, temperature.isel(member=0))
    ax.set_xlabel("time t (s)")
    ax.set_ylabel("kinetic temperature KE/N (J, k_B = 1)")
    ax.set_title(f"{label}: kinetic temperature (member 0)")
    name = f"{label}_temperature.png"
    _save(fig, os.path.join(out, name))
    figures.append((name, f"{label}: kinetic temperature"))

    centroids = face_mesh(4).centroids
    longitude = np.degrees(np.arctan2(centroids[:, 1], centroids[:, 0]))
    latitude = np.degrees(np.arcsin(centroids[:, 2]))
    samples = sorted({int(round(k * (ds.sizes["time"] - 1) / 4)) for k in range(5)})
    maps = [face_kinetic_energy(ds, index) for index in samples]
    top = max(float(np.max(m)) for m in maps) or 1.0
    fig, axes = plt.subplots(1, len(samples), figsize=(3.4 * len(samples), 3.0), squeeze=False, layout="constrained")
    for ax, index, values in zip(axes[0], samples, maps):
        shown = ax.scatter(longitude, latitude, c=values, s=4, cmap="inferno", vmin=0, vmax=top)
        ax.set_title(f"t = {float(ds.time[index]):g} s", fontsize=9)
        ax.set_xlabel("longitude (°)")
        ax.set_ylabel("latitude (°)")
    fig.colorbar(shown, ax=axes[0].tolist(), label="kinetic energy (J), face + neighbours mean")
    name = f"{label}_kinetic_energy_map.png"
    _save(fig, os.path.join(out, name), tight=False)
    figures.append((name, f"{label}: kinetic-energy map on the 5120-face icosphere (member 0)"))

    return figures + particle_structure_figures(ds, label, out)


def particle_structure_figures(ds: xr.Dataset, label: str, out: str) -> list[tuple[str, str]]:
    """What the particles' unit vectors alone show, for member 0 of a store of particles on the sphere: g(θ) at
    the first and last sample and the Voronoi coordination at the last, from the radical (power) tessellation
    of the particles' discs when the store holds their ``diameter``; for a store with ``particle_type`` also
    the partial g_ab(θ) of each pair of types at the last sample and each type's mean-square geodesic
    displacement (over at most ``MSD_SAMPLES`` samples, evenly strided, every pair of them a time origin)."""
    figures = []
    last = ds.sizes["time"] - 1
    curves = [(np.degrees(theta), g, f"t = {float(ds.time[index]):g} s")
              for index in (0, last) for theta, g in [pair_distribution(particle_points(ds, 0, index))]]
    name = f"{label}_pair_distribution.png"
    _curves_figure(os.path.join(out, name), curves, "geodesic angle θ (°)", "g(θ)",
                   f"{label}: pair-distribution function (member 0)")
    figures.append((name, f"{label}: geodesic pair-distribution function g(θ)"))

    types = particle_types(ds)
    points = particle_points(ds, 0, last)
    if types is not None:
        figures += _type_figures(ds, label, out, *types)
    if len(points) >= VORONOI_MIN_PARTICLES:
        radii = particle_radii(ds)
        order = voronoi_order(points, radii)
        name = f"{label}_coordination.png"
        coordination_figure(points, order.coordination, os.path.join(out, name))
        by_type = "" if types is None else "; by type: " + ", ".join(
            f"{types[1][a]} {counts.get(5, 0)} five-fold, {counts.get(7, 0)} seven-fold"
            for a, counts in coordination_by_type(order.coordination, types[0]).items())
        figures.append((name, f"{label}: {'Voronoi' if radii is None else 'radical (power) tessellation'} "
                              f"coordination at t = {float(ds.time[last]):g} s (member 0): "
                              f"{order.defects['z5']} five-fold, {order.defects['z7']} seven-fold, "
                              f"{order.defects['other']} other, six-fold share {order.six_fold_fraction:.2f}, "
                              f"mean |ψ6| {order.mean_abs_psi6:.2f}, Σ(6 − z) = {order.total_charge}" + by_type))
    return figures


def _curves_figure(path: str, curves: list, xlabel: str, ylabel: str, title: str) -> None:
    """A figure of (x, y, label) curves with a legend, saved to ``path``."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for x, y, name in curves:
        ax.plot(x, y, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    _save(fig, path)


def _type_figures(ds: xr.Dataset, label: str, out: str, ids: np.ndarray, names: list[str]) -> list[tuple[str, str]]:
    """The partial g_ab(θ) at the last sample and the mean-square geodesic displacement of each type (member 0)
    of a store whose particles have type ids ``ids`` named ``names``."""
    last = ds.sizes["time"] - 1
    theta, partials = partial_pair_distributions(particle_points(ds, 0, last), ids)
    pair_name = f"{label}_partial_pair_distribution.png"
    _curves_figure(os.path.join(out, pair_name), [(np.degrees(theta), g, f"{names[a]}–{names[b]}")
                                                  for (a, b), g in partials.items()],
                   "geodesic angle θ (°)", "g_ab(θ)", f"{label}: partial g_ab(θ) at t = {float(ds.time[last]):g} s "
                   "(member 0)")

    stride = max(1, -(-last // (MSD_SAMPLES - 1)))  # ⌈(T − 1)/(MSD_SAMPLES − 1)⌉
    sampled = ds.isel(time=slice(None, None, stride))
    times = sampled.time.values
    msd_name = f"{label}_msd_by_type.png"
    _curves_figure(os.path.join(out, msd_name), [(times[displacement.lags] - times[0], displacement.msd, names[a])
                                                 for a, displacement in msd_by_type(
                                                     particle_trajectories(sampled, members=0), ids).items()],
                   "lag τ (s)", "⟨θ(τ)²⟩ (rad²)", f"{label}: mean-square displacement by type (member 0)")
    return [(pair_name, f"{label}: partial pair-distribution functions g_ab(θ) by type"),
            (msd_name, f"{label}: mean-square geodesic displacement by type, from {times.size} samples "
                       f"(every {stride} saved), each pair of them an origin and a lag")]
