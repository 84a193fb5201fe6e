"""Continuous monitoring (issue 14): a plan, a fleet that changes over time, auxiliaries retrained each
period, drift signals and alerts, and privacy composed over periods."""
