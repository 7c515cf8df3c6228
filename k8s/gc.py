"""When the job of a gone pod may go: after its pod was absent from pod resources long enough.

Not by age: a job goes once the kubelet's pod resources API has not named its shares for
`grace` seconds, counted from the last List that named them (a job no List ever named: from
its creation), and in at least `lists` consecutive successful Lists.

The kubelet starts its pod-resources server before its pod manager is filled (upstream does
so on every restart): for a while List names no pods, or only some. So absence counts only
while the plugin watches one server that has answered. Until the first successful List after
the plugin starts, after a failed List, or after the socket was replaced (a kubelet restart
between two looks), nothing is collected, and the absence of every job counts again from that
List on. A List that lacks the plugin's own pod (when it knows it: --pod-name) is partial, not
a view of the node, and counts like a failed one. The grace (60 s by default) must be longer
than a restarted kubelet takes to list its pods again.

Pure: the caller gives the time (monotonic seconds) and the Lists' contents (jobs.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

GC_LISTS = 3                    # consecutive successful Lists a job must be absent from


@dataclass
class Absence:
    since: float                # absent from (the last List that named it, or its creation)
    lists: int = 0              # consecutive successful Lists without it


@dataclass
class AbsenceClock:
    grace: float
    lists: int = GC_LISTS
    armed_at: float | None = None            # the current server's first successful List
    jobs: dict[str, Absence] = field(default_factory=dict)

    def lost(self) -> None:
        """The pod resources view is gone or partial: no collection until a List succeeds."""
        self.armed_at = None

    def due(self, held: Collection[str], ages: Mapping[str, float] | None,
            now: float) -> list[str]:
        """One successful List named the jobs `held`; `ages` are this plugin's jobs with their
        age in seconds (None: the controller's list was not to be had this time, only `held`
        is recorded). The jobs to remove now."""
        if self.armed_at is None:             # a fresh view: every absence counts from now
            self.armed_at = now
            for a in self.jobs.values():
                a.since, a.lists = now, 0
        names = set(self.jobs) | set(held) | set(ages or ())
        out = []
        for name in names:
            a = self.jobs.get(name)
            if name in held:
                self.jobs[name] = Absence(now)
                continue
            if ages is not None and name not in ages:
                self.jobs.pop(name, None)     # neither held nor registered: nothing to track
                continue
            if a is None:
                if ages is None:
                    continue
                born = now - max(0.0, ages[name])
                a = self.jobs[name] = Absence(max(born, self.armed_at))
            a.lists += 1
            if ages is not None and now - a.since >= self.grace and a.lists >= self.lists:
                out.append(name)
        return sorted(out)

    def forget(self, name: str) -> None:
        self.jobs.pop(name, None)
