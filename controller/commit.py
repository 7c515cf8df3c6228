"""Group commit of registry changes: a batch of requests is saved once.

Each save of the state file costs fsyncs; one per request let a backlog of register and
unregister requests hold the control loop back.  So the server opens a group around a batch:
a change is applied in memory at once and recorded with its undo (and what is to happen once
it is durable, e.g. removing a dropped job's files); ``commit`` saves once for the whole group.
On success the after-actions run; on failure every change is undone, newest first, and the
error returned, so the registry is as before the group and every reply in it can say so.
No reply of the group is sent before ``commit`` returned: nothing a client is told was
accepted can be lost.  Without an open group a change is saved on its own, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from . import protocol as P

log = logging.getLogger(__name__)
Action = Callable[[], None]


class GroupCommit:
    def __init__(self, save: Action) -> None:
        self._save = save
        self._open = False
        self._undo: list[Action] = []
        self._after: list[Action] = []
        self._names: set[str] = set()
        self.commits = 0                     # saves of a group (status, tests)

    def begin(self) -> None:
        self._open = True

    @property
    def size(self) -> int:
        """Changes in the open group, not yet saved."""
        return len(self._undo)

    def touched(self, name: str) -> bool:
        """`name` changed in the open group (a second change to it must wait for a commit:
        a dropped job's files are removed only then, and a new one may use the same names)."""
        return name in self._names

    def change(self, name: str, req_id: str | None, undo: Action,
               after: Action | None = None) -> None:
        """A change to job `name` was applied in memory: save it (now, or with the group)."""
        if self._open:
            self._undo.append(undo)
            self._names.add(name)
            if after is not None:
                self._after.append(after)
            return
        try:
            self._save()
        except Exception as exc:
            undo()
            raise P.ProtocolError(P.E_INTERNAL, f"cannot save state: {exc}", req_id) from exc
        if after is not None:
            after()

    def commit(self) -> Exception | None:
        """Save the group's changes once and close it; the error if that failed (then every
        change of the group is undone)."""
        undo, after = self._undo, self._after
        self._open, self._undo, self._after, self._names = False, [], [], set()
        if not undo:
            return None
        try:
            self._save()
        except Exception as exc:
            for act in reversed(undo):
                try:
                    act()
                except Exception:               # undo as much as can be undone
                    log.exception("undoing a change that could not be saved")
            return exc
        self.commits += 1
        for act in after:
            try:
                act()
            except Exception:
                log.exception("after saving the state")
        return None
