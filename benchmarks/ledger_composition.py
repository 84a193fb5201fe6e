"""Benchmark: composing a population's ledger as the app's Privacy page does (the total, ε per run, ε
after every release), with the per-event RDP cache against the same compositions recomputed from
scratch by dp_accounting's accountant (what every composition did before), in the same run:

  .venv/bin/python benchmarks/ledger_composition.py [--releases 24] [--distinct-events 3]

The ledger is a monitor's: each release is a DP-FedAvg run (qN of N users sampled without replacement,
T rounds) whose noise multiplier cycles through --distinct-events values. Prints seconds and the ratio.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from fedgen_debug.app.privacy_page import epsilon_over_time, epsilon_per_run
from fedgen_debug.privacy import accounting
from fedgen_debug.privacy.ledger import Ledger, PrivacyRecord


def _records(releases: int, distinct: int) -> list[PrivacyRecord]:
    population, size = "synthetic-text:seed=0", 400
    return [PrivacyRecord(population, size, "replace-one", (accounting.DPFedAvgPrivacy(
        20, size, 1.0 + 0.25 * (i % distinct), 50).dp_event(),), f"period {i}", f"period{i}/training",
        source=f"runs/monitor/period-{i // 2}") for i in range(releases)]


def _page(ledger: Ledger) -> float:
    start = time.perf_counter()
    total = ledger.total(ledger.populations()[0])
    epsilon_per_run(total.releases, total.guarantee.delta)
    epsilon_over_time(list(total.releases), total.guarantee.delta)
    return time.perf_counter() - start


class _Uncached:
    """Every composition through a fresh accountant, as before the cache (the cached function, unwrapped)."""

    def __enter__(self):
        self.saved = accounting.rdp_of_event
        accounting.rdp_of_event = accounting._cached_rdp_of_event.__wrapped__  # noqa: SLF001

    def __exit__(self, *exc):
        accounting.rdp_of_event = self.saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", type=int, default=24)
    parser.add_argument("--distinct-events", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        ledger = Ledger(home)
        ledger.set_budget("*", float("inf"), reason="benchmark")
        ledger.spend(_records(args.releases, args.distinct_events))
        with _Uncached():
            before = _page(ledger)
        accounting._cached_rdp_of_event.cache_clear()  # noqa: SLF001 — a cold cache, as a fresh app process
        cold = _page(ledger)
        warm = _page(ledger)
    print(f"ledger: {args.releases} releases, {args.distinct_events} distinct DP-FedAvg events "
          f"(RDP at {len(accounting.RDP_ORDERS)} orders)")
    print(f"Privacy page compositions, recomputed per composition: {before:8.2f} s")
    print(f"with the per-event cache, cold (a fresh process):     {cold:8.2f} s  ({before / cold:.0f}× faster)")
    print(f"with the per-event cache, warm (a rerun):             {warm:8.2f} s  ({before / warm:.0f}× faster)")


if __name__ == "__main__":
    main()
