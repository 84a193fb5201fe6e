"""The paper's "privacy at scale" scenarios (augenstein2020 §6, Table 3; App. C.4, Table 13).

Simulations use few users per round with a small noise multiplier z. Keeping the noise standard
deviation σ = zS/(qN) (and so the utility) fixed while raising z to a target (1.0) needs qN scaled by
the same factor k: the realistic scenario. N is scaled by k as well (q unchanged) unless the overall
populations are given, as in the paper: its realistic N keeps the simulation's share of the overall
population (e.g. 425 of 3,400 simulated users → 250,000 of 2,000,000). The paper reports δ = 1/N for
simulations and δ = 0.01/N for realistic scenarios; Tables 3 and 13 reproduce exactly (tests).
"""

from __future__ import annotations

import dataclasses
import math

from fedgen_debug.privacy.accounting import DPFedAvgPrivacy, PrivacyGuarantee, dp_fedavg_epsilon


@dataclasses.dataclass(frozen=True)
class Scenario:
    params: DPFedAvgPrivacy
    guarantee: PrivacyGuarantee

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self.params), **self.guarantee.as_dict()}


@dataclasses.dataclass(frozen=True)
class ScaledScenarios:
    scale: float
    simulation: Scenario
    realistic: Scenario

    def as_dict(self) -> dict:
        return {"scale": self.scale, "simulation": self.simulation.as_dict(), "realistic": self.realistic.as_dict()}


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def realistic_scenario(simulation: DPFedAvgPrivacy, target_noise_multiplier: float = 1.0,
                       conversion: str | None = None, simulation_delta: float | None = None,
                       realistic_delta: float | None = None,
                       overall_populations: tuple[int, int] | None = None) -> ScaledScenarios:
    """Scales (qN, N) so that z reaches the target at the same σ, and reports (ε, δ) for both.

    `overall_populations` = (simulated, realistic) overall population sizes, e.g. (3400, 2_000_000):
    N then keeps its share of the overall population instead of scaling with qN. The accounting
    convention is the simulation's (the paper's tables: `accounting="paper"`); the conversion by
    default follows it (`accounting.default_conversion`).
    """
    if simulation.noise_multiplier <= 0:
        raise ValueError("the simulation's noise_multiplier must be > 0 to be scaled. Found "
                         f"{simulation.noise_multiplier}.")
    if target_noise_multiplier <= 0:
        raise ValueError(f"target noise multiplier must be > 0. Found {target_noise_multiplier}.")
    scale = target_noise_multiplier / simulation.noise_multiplier
    if overall_populations is None:
        population_scale = scale
    else:
        simulated_overall, realistic_overall = overall_populations
        if not 0 < simulation.population <= simulated_overall or realistic_overall < 1:
            raise ValueError(
                "overall_populations must be (simulated, realistic) sizes with the simulation's N <= "
                f"simulated. Found N={simulation.population}, overall={overall_populations}."
            )
        population_scale = realistic_overall / simulated_overall
    realistic = dataclasses.replace(
        simulation,
        clients_per_round=_round_half_up(simulation.clients_per_round * scale),
        population=_round_half_up(simulation.population * population_scale),
        noise_multiplier=target_noise_multiplier,
    )
    if simulation_delta is None and simulation.population < 2:
        # δ = 1/N is the paper's report for simulations; at N = 1 it is 1, which no guarantee has.
        raise ValueError(f"the simulation's δ defaults to 1/N, not < 1 at N = {simulation.population}: give "
                         "simulation_delta.")
    sim_delta = simulation_delta if simulation_delta is not None else 1.0 / simulation.population
    real_delta = realistic_delta if realistic_delta is not None else 0.01 / realistic.population
    return ScaledScenarios(
        scale=scale,
        simulation=Scenario(simulation, dp_fedavg_epsilon(simulation, sim_delta, conversion)),
        realistic=Scenario(realistic, dp_fedavg_epsilon(realistic, real_delta, conversion)),
    )
