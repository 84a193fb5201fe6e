"""The one error type the data layer raises for bad input."""

from __future__ import annotations


class DataError(ValueError):
    """Bad or unreadable user data. The message names the source and the problem."""

    def __init__(self, source: str, problem: str):
        self.source = str(source)
        self.problem = problem
        super().__init__(f"{self.source}: {problem}")
