"""What grading says of one exercise: an :class:`Outcome`, a :class:`Result` and the detail that explains it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Result(str, Enum):
    """The result column of the grade table."""

    PASSED = "passed"          # the check passed in the student's kernel and again on the saved answers
    FAILED = "failed"          # the check rejected the answer (the detail is its hint)
    ERROR = "error"            # an exception, or the check did not run, or the exercise was not answered
    TIMEOUT = "timeout"        # the kernel was killed before the check ran
    MISSING = "missing"        # the exercise is not in the submission
    UNVERIFIED = "unverified"  # passed in the kernel, but the saved answers could not be checked again


@dataclass(frozen=True)
class Outcome:
    """One exercise's result and its detail (empty when there is nothing to add)."""

    result: Result
    detail: str = ""

    def noting(self, note: str) -> Outcome:
        """The same result, with ``note`` added to the detail after a "; "."""
        return Outcome(self.result, "; ".join(filter(None, [self.detail, note])))

    def as_json(self) -> dict[str, str]:
        return {"result": self.result.value, "detail": self.detail}

    @classmethod
    def from_json(cls, data: dict) -> Outcome:
        """The outcome :meth:`as_json` wrote; ValueError or KeyError for anything else."""
        return cls(Result(data["result"]), str(data["detail"]))


__all__ = ["Outcome", "Result"]
