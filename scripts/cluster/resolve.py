"""The one resolver of a job name: which run a verb (cancel, why, logs, jobs, the console) may touch.

A name is a workflow's name or a run id. It is resolved only among the runs of namespaces where the
caller may do the verb's action, asked of the API server (access.py), never by who a label says
submitted it: the submitter is shown, as information, in a refusal. So:

- a name that matches only runs the caller may not act on resolves to nothing (and is never acted on);
- a name that matches more than one run the caller may act on (a workflow named like another run's id,
  one run id in two namespaces) is refused, every candidate named, rather than one picked;
- an access review the API server cannot answer refuses the lookup (AccessUnknown, as a `Unresolved`).

Pure apart from the reviewer it is handed: it takes the runs already read, so every verb and the console
resolve through this one function.
"""

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from offhours.scripts.cluster.access import AccessReviewer, AccessUnknown, Action

CANDIDATES_NAMED = 20  # an ambiguity names every candidate up to this many, then how many more


class Copy(Protocol):
    """One workflow of a run."""

    @property
    def name(self) -> str:
        """The workflow's name."""
        ...

    @property
    def user(self) -> str:
        """Who its labels say submitted it (information only)."""
        ...


class Run(Protocol):
    """One run: its namespace, id and workflows (offhours.scripts.pool.model.RunView is one)."""

    @property
    def namespace(self) -> str:
        """The namespace its workflows are in."""
        ...

    @property
    def run_id(self) -> str:
        """The run id."""
        ...

    @property
    def copies(self) -> Sequence[Copy]:
        """Its workflows, oldest first."""
        ...


R = TypeVar("R", bound=Run)


class Unresolved(RuntimeError):
    """The name resolves to no run the caller may act on, or to more than one: one line saying which."""


class NoSuchJob(Unresolved):
    """No run of that name in the namespaces where the caller may act."""


class AmbiguousJob(Unresolved):
    """More than one run the caller may act on has that name; the message names each."""


def matches(runs: Iterable[R], name: str) -> list[R]:
    """Return every run with a workflow named `name` or the run id `name` (any namespace, any submitter)."""
    return [r for r in runs if r.run_id == name or any(c.name == name for c in r.copies)]


def candidate_text(run: Run) -> str:
    """Return one candidate as a refusal names it: namespace/run id, its workflows, and who a label says submitted it."""
    users = sorted({c.user for c in run.copies if c.user})
    by = f"; submitter label: {', '.join(users)}" if users else ""
    return f"{run.namespace}/{run.run_id} (workflows {', '.join(c.name for c in run.copies)}{by})"


def permitted(runs: Iterable[R], action: Action, access: AccessReviewer) -> list[R]:
    """Return the runs in namespaces where the caller may do `action` (one review per namespace)."""
    runs = list(runs)
    allowed = {ns for ns in sorted({r.namespace for r in runs}) if _may(access, ns, action)}
    return [r for r in runs if r.namespace in allowed]


def resolve(runs: Iterable[R], name: str, action: Action, access: AccessReviewer, where: str = "", hint: str = "") -> R:
    """Return the one run named `name` that the caller may do `action` on; Unresolved otherwise (see the module).

    `where`: where the runs were read (named when none matches); `hint`: what the caller's tool offers then.
    """
    found = matches(runs, name)
    mine = permitted(found, action, access)
    who = access.who() or "you"
    place = f" in {where}" if where else ""
    if not mine:
        others = sorted({r.namespace for r in found})
        if others:
            raise NoSuchJob(f"{name!r} matches no offhours job that {who} may {action.described()} on: it names "
                            f"{len(found)} job(s) in namespace(s) {', '.join(others)} where {who} may not; "
                            "nothing was touched")
        raise NoSuchJob(f"no offhours job {name!r}{place}" + (f" ({hint})" if hint else ""))
    distinct = {(r.namespace, r.run_id): r for r in mine}
    if len(distinct) > 1:
        named = [candidate_text(r) for r in distinct.values()]
        more = f", and {len(named) - CANDIDATES_NAMED} more" if len(named) > CANDIDATES_NAMED else ""
        raise AmbiguousJob(f"{name!r} names {len(named)} jobs: {'; '.join(named[:CANDIDATES_NAMED])}{more}; "
                           "name one by its workflow name (and -n its namespace); nothing was touched")
    return mine[0]


def _may(access: AccessReviewer, namespace: str, action: Action) -> bool:
    try:
        return access.may(namespace, action)
    except AccessUnknown as err:
        raise Unresolved(f"cannot tell whether {access.who() or 'you'} may {action.described()} in namespace "
                         f"{namespace}: {err}; nothing was touched") from None
