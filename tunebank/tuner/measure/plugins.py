"""The plug-in boundary: backends found by name, and everything they answer checked where it
comes in.

A backend is someone else's code. What it returns enters tunebank here and nowhere else:

- the name recorded with every outcome is the entry point's, never what the object says of
  itself (a plug-in calling itself ``sim`` cannot pass its times off as the model's);
- each batch's times are checked: one float per candidate, each ``inf`` (did not run) or a
  positive time of at most :data:`MAX_US`;
- ``chips()`` and ``fit_check()`` are checked alike, and ``fit_check``'s function too, each time
  it answers (in the caller's thread: it is called for every move a search weighs);
- whatever it raises, ``SystemExit`` and ``KeyboardInterrupt`` included, is the plug-in's failure:
  one :class:`~tuner.measure.backend.MeasurementFailed` line naming the backend, the key and the chip;
- a batch that takes longer than ``BackendSettings.timeout_s`` stops the tune the same way
  (tunebank's own ``sim``, plain NumPy in this process, is not timed).

A refused answer stops the tune before anything of that key is recorded; the task stays
unfinished, and ``--reload`` continues it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

import numpy as np

from tunebank.tuner.measure.backend import (
    BackendError,
    BackendSettings,
    KeyWork,
    MeasurementBackend,
    MeasurementFailed,
)
from tunebank.tuner.measure.space import FitCheck

ENTRY_POINTS = "tunebank.backends"
"""The entry point group backends are declared under."""
BUILT_IN = {"sim": "tunebank.tuner.measure.sim:SimBackend"}
"""Backends found even where tunebank's own metadata is not installed (a source checkout)."""
MIN_US = 1e-3
"""The shortest time a backend may report: a nanosecond. No kernel launch is faster, and a 0
would win every comparison it entered."""
MAX_US = 1e9
"""The longest time a backend may report for one run of one candidate: 1,000 s. Beyond it a
number is a unit mistake or a sentinel, and sums of such times overflow the model's total."""


def backend_names() -> list[str]:
    """The names of every backend installed, sorted."""
    return sorted({*BUILT_IN, *(point.name for point in entry_points(group=ENTRY_POINTS))})


def open_backend(name: str, settings: BackendSettings) -> MeasurementBackend:
    """The backend declared as ``name``, made with ``settings``, behind the checks of
    :class:`GuardedBackend`.

    Raises:
        BackendError: no backend of that name, or its factory failed or returned something
            that is not a :class:`MeasurementBackend` with a version.
    """
    declared = [point for point in entry_points(group=ENTRY_POINTS) if point.name == name]
    try:
        if declared:
            factory: Any = declared[0].load()
        elif name in BUILT_IN:
            module, _, attribute = BUILT_IN[name].partition(":")
            factory = getattr(import_module(module), attribute)
        else:
            raise BackendError(f"--backend: no measurement backend {name!r} is installed "
                               f"(installed: {', '.join(backend_names())})")
        backend = factory(settings)
    except BackendError:
        raise
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # the plug-in's, whatever it is
        raise BackendError(f"--backend: backend {name!r} could not start: "
                           f"{type(exc).__name__}: {exc}") from None
    if not isinstance(backend, MeasurementBackend):
        raise BackendError(f"--backend: backend {name!r} made a {type(backend).__name__}, not a "
                           "tunebank.tuner.measure.backend.MeasurementBackend")
    version = getattr(backend, "version", None)
    if not isinstance(version, str) or not version.strip() or len(version) > 100:
        raise BackendError(f"--backend: backend {name!r} declares no version (a text of at most "
                           "100 characters, recorded with every outcome)")
    own = type(backend).__module__ == "tunebank.tuner.measure.sim"  # tunebank's model: numpy, it cannot hang
    return GuardedBackend(name, backend, None if own else settings.timeout_s)


class GuardedBackend(MeasurementBackend):
    """A plug-in's backend, its every answer checked (see the module's docstring)."""

    def __init__(self, name: str, inner: MeasurementBackend, timeout_s: float | None) -> None:
        self.name = name  # the entry point's name: what the user chose, not what it claims
        self.version = inner.version
        self.noise = float(inner.noise) if _number(inner.noise) else 0.0
        self.repeats = int(inner.repeats) if _number(inner.repeats) else 1
        self.inner = inner
        self.timeout_s = timeout_s

    def measure(self, key: KeyWork, candidates: np.ndarray,
                rng: np.random.Generator) -> np.ndarray:
        where = f"key {key.repo_key} on {key.soc.soc_version}"
        times = self._call(lambda: self.inner.measure(key, candidates, rng), f"measuring {where}")
        return checked_times(times, len(candidates), f"backend '{self.name}' measuring {where}")

    def chips(self) -> frozenset[str] | None:
        found = self._call(self.inner.chips, "listing its chips", BackendError)
        if found is None:
            return None
        if isinstance(found, str | bytes) or not isinstance(found, Iterable):
            raise BackendError(f"backend '{self.name}': chips() returned a "
                               f"{type(found).__name__}, not a set of chip names or None")
        names = list(found)
        if not all(isinstance(chip, str) for chip in names):
            raise BackendError(f"backend '{self.name}': chips() returned something other than "
                               "chip names")
        return frozenset(names)

    def fit_check(self, key: KeyWork) -> FitCheck | None:
        where = f"key {key.repo_key} on {key.soc.soc_version}"
        found = self._call(lambda: self.inner.fit_check(key), f"checking the fit of {where}",
                           BackendError)
        if found is None:
            return None
        if not isinstance(found, FitCheck) or not callable(found.check):
            raise BackendError(f"backend '{self.name}': fit_check() for {where} returned a "
                               f"{type(found).__name__}, not a tunebank.tuner.measure.space.FitCheck or None")
        knobs = len(key.space.knobs)
        if not isinstance(found.knobs, frozenset | set | tuple | list) or \
                not all(isinstance(k, int) and 0 <= k < knobs for k in found.knobs):
            raise BackendError(f"backend '{self.name}': fit_check() for {where} names knobs "
                               f"outside the key's {knobs}")
        return FitCheck(self._checked_fit(found.check, where), found.knobs)

    def _checked_fit(self, check: Callable[[np.ndarray], np.ndarray],
                     where: str) -> Callable[[np.ndarray], np.ndarray]:
        def fits(candidates: np.ndarray) -> np.ndarray:
            try:  # called for every move a search weighs: in this thread, not timed
                answer = check(candidates)
            except (Exception, SystemExit) as exc:  # Ctrl-C here is the user's
                raise MeasurementFailed(f"backend '{self.name}' failed checking the fit of "
                                        f"{where}: {type(exc).__name__}: {exc}") from None
            found = np.asarray(answer) if isinstance(answer, np.ndarray | list | tuple) else None
            if found is None or found.shape != (len(candidates),) or found.dtype.kind not in "bi":
                raise MeasurementFailed(
                    f"backend '{self.name}' checking the fit of {where}: its check returned "
                    f"{_described(answer)}, not one true or false per candidate")
            return found.astype(bool)

        return fits

    def _call(self, work: Callable[[], Any], doing: str,
              error: type[BackendError] = MeasurementFailed) -> Any:
        """``work()`` in a thread of its own, waited on for at most ``timeout_s`` (in this
        thread when there is none: tunebank's own model, for which a thread per batch cost a
        fifth of a tune's time); whatever it raises, or its not answering in time, becomes
        ``error`` naming the backend."""
        answer: list[Any] = []
        failure: list[BaseException] = []

        def run() -> None:
            try:
                answer.append(work())
            except BaseException as exc:  # SystemExit too: the plug-in's failure
                failure.append(exc)

        if self.timeout_s is None:  # in this thread, where Ctrl-C is the user's, not a failure
            try:
                answer.append(work())
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # SystemExit too
                failure.append(exc)
            return self._answer(answer, failure, doing, error)
        worker = threading.Thread(target=run, name=f"backend-{self.name}", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        if worker.is_alive():  # a hung device: the thread is left behind, the tune is not
            raise error(f"backend '{self.name}' {doing}: no answer within {self.timeout_s:g} s "
                        "(--measure-timeout)")
        return self._answer(answer, failure, doing, error)

    def _answer(self, answer: list[Any], failure: list[BaseException], doing: str,
                error: type[BackendError]) -> Any:
        """What ``_call``'s work returned, or its failure as ``error``."""
        if failure:
            exc = failure[0]
            if isinstance(exc, BackendError):
                raise exc
            raise error(f"backend '{self.name}' failed {doing}: {type(exc).__name__}: {exc}") \
                from exc if isinstance(exc, Exception) else None
        return answer[0]


def checked_times(found: Any, count: int, where: str) -> np.ndarray:
    """A batch's times as float64 if each is ``inf`` or a positive time within
    [:data:`MIN_US`, :data:`MAX_US`], one per candidate.

    Raises:
        MeasurementFailed: anything else, naming ``where`` and what was wrong.
    """
    array = np.asarray(found) if isinstance(found, np.ndarray | list | tuple) else None
    if array is None or array.dtype.kind not in "iuf":
        raise MeasurementFailed(f"{where}: returned {_described(found)}, not an array of "
                                "times in microseconds")
    if array.shape != (count,):
        raise MeasurementFailed(f"{where}: returned times of shape {array.shape} for {count} "
                                "candidate(s): one time per candidate is expected")
    times = array.astype(np.float64)
    good = np.isposinf(times) | ((times >= MIN_US) & (times <= MAX_US))
    if not good.all():
        index = int(np.flatnonzero(~good)[0])
        raise MeasurementFailed(
            f"{where}: returned {float(times[index])!r} us for candidate {index}: a time must be "
            f"between {MIN_US:g} and {MAX_US:g} us, or inf for a candidate that did not run")
    return times


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and \
        bool(np.isfinite(value)) and value >= 0


def _described(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of {value.dtype}"
    return f"a {type(value).__name__}"
