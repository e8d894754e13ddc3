"""Per-member status codes: divergence is data, never an exception."""

OK = 0
NON_FINITE = 1  # a NaN or inf appeared in q or ω
VI_STEP_INFEASIBLE = 2  # ‖a_i‖ > 1 in Lee–Leok–McClamroch eq. (29): no real q_{k+1}
NEWTON_FAILED = 3  # an implicit step's Newton solve did not converge (vi: eq. (22); lgvi: F_k)
STEP_SIZE_UNDERFLOW = 4  # rk45 needed a step below its minimum or exceeded max_steps
CHART_SINGULAR = 5  # the Lagrange formulation's Euler-angle chart reached its singularity (|cos θ| < 1e-3)
LIFT_OFF = 6  # a rolling body's normal force reached 0: it would leave the plane (the model no longer holds)
SLIP = 7  # a rolling body needed more friction than the static coefficient μ_s gives: it would slip
ESCAPED = 8  # stopped at the first crossing of a section with stop (kernels.sections): done, not failed
NOT_CONVERGED = 9  # a minimisation (fire) reached its step limit before it converged: stopped, not failed

MEANINGS = {
    OK: "ok",
    NON_FINITE: "non-finite state (NaN or inf)",
    VI_STEP_INFEASIBLE: "explicit VI step infeasible: |a_i| > 1 in eq. (29)",
    NEWTON_FAILED: "Newton iteration of an implicit step did not converge (vi: eq. (22), lgvi: F_k)",
    STEP_SIZE_UNDERFLOW: "adaptive step size underflow or max_steps exceeded",
    CHART_SINGULAR: "the Euler-angle chart of the lagrange formulation reached its singularity (gimbal lock)",
    LIFT_OFF: "lift-off: the normal force of the plane reached 0, so the body would leave it",
    SLIP: "slip: |tangential contact force| exceeded mu_s times the normal force",
    ESCAPED: "escaped: stopped at the first crossing of its escape section (not a failure; its final state is there)",
    NOT_CONVERGED: "not converged: the minimisation reached its step limit (max_steps, or the run's end) before its "
                   "largest tangential force or energy change met the tolerance (not a failure; its last state is "
                   "there)",
}
#: the codes of members that did not fail: still running, or stopped where they were asked to
NOT_FAILED = (OK, ESCAPED, NOT_CONVERGED)
#: the codes of members that stopped where they were asked to, keeping their last state
STOPPED = (ESCAPED, NOT_CONVERGED)
