"""Privacy over time for a monitoring plan: every period's releases, as the scenarios would charge them,
composed with what the population's ledger already holds, checked before period 1.

Each period retrains every auxiliary on the devices present in that period (`data.fleet`), and each
retraining is a run of its own with all its releases (for a T4 GAN: the DP quantile thresholds, the DP
selection counts and the training rounds): the records come from the scenarios' own `release_records`,
so the plan is charged for the mechanism that will run, not a parallel estimate. The fleet's membership
is public (simulated from the plan's seed), so each period's population size is known in advance.
"""

from __future__ import annotations

import dataclasses

from fedgen_debug.data.fleet import membership
from fedgen_debug.monitor.plan import Auxiliary, MonitorPlan
from fedgen_debug.privacy.accounting import format_epsilon
from fedgen_debug.privacy.ledger import Ledger, composed_guarantee, population_key


@dataclasses.dataclass(frozen=True)
class BudgetCheck:
    population: str
    budget_epsilon: float
    delta: float
    spent_before: float          # ε of the population's releases already in the ledger
    affordable_periods: int      # how many of the plan's periods fit (all of them, or fewer)
    epsilon_by_period: tuple[float, ...]   # ε composed after each affordable period (and the first that is not)

    @property
    def message(self) -> str:
        return (f"population {self.population}: a budget of ε = {format_epsilon(self.budget_epsilon)} at δ = {self.delta:.2g} "
                f"({format_epsilon(self.spent_before)} spent before) affords {self.affordable_periods} period(s) of this plan")


def period_run(plan: MonitorPlan, auxiliary: Auxiliary, present: int, period: int, primary: str | None = None,
               *, from_scratch: bool = False, out_dir: str | None = None):
    """The scenario run (GANRun / LMRun) that period `period` of `auxiliary` makes on `present` devices:
    its public settings; the data is the plan's, the concat rollout's fraction the period's. Planned
    periods warm-start (period 1 aside); `from_scratch` is a restart, with the first period's rounds. An
    LM reads its vocabulary file from the monitor's copy in `out_dir` (`monitor.inputs`)."""
    privacy = dict(rounds=plan.rounds(period, from_scratch=from_scratch), clients_per_round=min(plan.privacy.clients_per_round, present),
                   noise_multiplier=plan.privacy.noise_multiplier, clip=plan.privacy.clip)
    if auxiliary.kind == "gan":
        from fedgen_debug.training.gan_run import GANRun

        contract = dict(primary_background=plan.primary_background, primary_output=plan.primary_output,
                        primary_scale=plan.primary_scale) if plan.primary else {}
        return GANRun(plan.data, auxiliary.select, preset=auxiliary.preset, seed=plan.seed, primary=primary,
                      **contract, **privacy)
    from fedgen_debug.device.rollout import parse_rollout
    from fedgen_debug.training.lm_run import LMRun

    rollout = parse_rollout(plan.rollout, plan.seed) if plan.rollout else None
    concat = rollout.fraction(period) if rollout is not None and rollout.bug == "concat" else 0.0
    from fedgen_debug.monitor.inputs import period_vocab

    return LMRun(auxiliary.kind.split("-")[0], plan.data, bug_fraction=concat, preset=auxiliary.preset,
                 seed=plan.seed, vocab=period_vocab(plan, auxiliary, out_dir), **privacy)


def present_devices(plan: MonitorPlan, client_ids, period: int) -> tuple[str, ...]:
    return tuple(c for c in sorted(client_ids) if membership(plan.fleet, c).present(period))


def period_records(plan: MonitorPlan, client_ids, period: int, ledger: Ledger | None = None) -> list:
    """Every DP release of `period`, as the scenarios will charge them (placeholder release ids)."""
    from fedgen_debug.runs.secret import RunSecret
    from fedgen_debug.experiments import gan, lm
    from fedgen_debug.training.loop import Population

    present = Population(population_key(plan.data, client_ids, ledger), present_devices(plan, client_ids, period))
    if present.size == 0:
        return []
    records = []
    for auxiliary in plan.auxiliaries:
        run = period_run(plan, auxiliary, present.size, period)
        scenario = gan if auxiliary.kind == "gan" else lm
        records += scenario.release_records(run, present, RunSecret.fresh(), f"period {period}: {auxiliary.name}")
    return records


def check_budget(plan: MonitorPlan, client_ids, ledger: Ledger | None = None, done: int = 0) -> BudgetCheck:
    """How many of the plan's periods the budget affords, counting what the ledger already holds
    (`done` periods already ran: their releases are in the ledger, the check starts after them).

    The budget is the plan's, capped by the ledger's own for the population (the ledger refuses beyond
    it anyway); δ is the ledger's for the population. It counts the planned warm starts: a restart from
    scratch (an auxiliary that had not learned its data) costs the first period's rounds, is charged
    when it happens, and a period it would take over the budget is refused then (`Monitor`)."""
    ledger = ledger or Ledger()
    key = population_key(plan.data, client_ids, ledger)
    before = ledger.records(key)
    size = len(client_ids)
    ledger_budget = ledger.budget(key, size)
    budget = min(plan.budget_epsilon, ledger_budget.epsilon)
    delta = ledger_budget.delta
    # The worst user's releases (overlapping populations' too), at the δ of all the plan's devices.
    spent = composed_guarantee(ledger.total(key).releases, delta).epsilon if before else 0.0
    records, epsilons, affordable = [], [], done
    for period in range(done + 1, plan.periods + 1):
        records += period_records(plan, client_ids, period, ledger)
        epsilon = composed_guarantee(ledger.total(key, *records).releases, delta).epsilon if records or before else 0.0
        epsilons.append(epsilon)
        if epsilon > budget:
            break
        affordable = period
    return BudgetCheck(key, budget, delta, spent, affordable, tuple(epsilons))
