"""One tuning task as its events make it, with AOE's repo_summary counts.

Kept apart from the fold (bank/projection.py), with nothing to import, because `bank summary`
reads a task from an SQLite bank without loading the rest of the bank (bank/quick.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskView:
    """One tuning task as derived from its events, with AOE's repo_summary counts."""

    task_id: str
    soc_version: str
    origin: str
    started_at: str
    first_seq: int
    last_seq: int
    tuning_name: str | None = None
    model_name: str | None = None
    model_hash: str | None = None
    job_type: str | None = None
    search_mode: str | None = None
    status: str = "incomplete"
    finished_at: str | None = None
    tuning_time_s: float | None = None
    model_baseline_ms: float | None = None
    model_result_ms: float | None = None
    failed_operators: tuple[str, ...] = ()
    add_num: int = 0
    hit_num: int = 0
    update_num: int = 0
    reserved_num: int = 0
    unsatisfied_num: int = 0
    open_hits: int = 0
    withdrawn_num: int = 0
    """The keys whose entries the task withdrew (``bank import --mirror``): no AOE outcome, so
    outside the repo_summary."""

    @property
    def finished(self) -> bool:
        return self.status != "incomplete"

    @property
    def speed_up_pct(self) -> float | None:
        """The model's speed-up as AOE's performance_improvement gives it, (before - after) /
        after in percent; None unless both model times are recorded."""
        before, after = self.model_baseline_ms, self.model_result_ms
        return (before - after) / after * 100 if before and after else None

    @property
    def total_num(self) -> int:
        return self.add_num + self.hit_num + self.unsatisfied_num

    def repo_summary(self) -> dict[str, int]:
        """The six counts under AOE's field names."""
        return {
            "repo_add_num": self.add_num,
            "repo_hit_num": self.hit_num,
            "repo_reserved_num": self.reserved_num,
            "repo_unsatisfied_num": self.unsatisfied_num,
            "repo_update_num": self.update_num,
            "total_num": self.total_num,
        }

    def invariant_problems(self) -> list[str]:
        """What breaks AOE's two repo_summary equations (empty for a healthy finished task)."""
        problems = []
        if self.hit_num != self.update_num + self.reserved_num:
            problems.append(
                f"task {self.task_id}: repo_hit_num {self.hit_num} != repo_update_num "
                f"{self.update_num} + repo_reserved_num {self.reserved_num}"
            )
        if self.open_hits:
            problems.append(f"task {self.task_id}: {self.open_hits} hit(s) never resolved")
        return problems
