"""The chips the cost model knows: one parameter set per soc_version.

Every number is either published (the source is named in docs/cost-model.md) or an estimate,
and :attr:`SocSpec.estimates` lists which fields are estimates for each chip.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace

from tunebank.bank.errors import BankError
from tunebank.bank.names import is_plain_name, why_not_plain

KIB = 1024


class UnknownSocError(BankError):
    """A soc_version the cost model has no parameters for."""


@dataclass(frozen=True)
class SocSpec:
    """One chip's AI Core parameters, in the units the cost model uses."""

    soc_version: str
    ai_cores: int  # cube (AI) cores available to one operator
    vector_cores: int  # cores that run vector operators
    freq_ghz: float
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    l1_bytes: int
    ub_bytes: int
    gm_gbps: float  # global memory (HBM or DDR) bandwidth, GB/s, shared by all cores
    l1_to_l0_bytes_per_cycle: int  # per core, L1 -> L0A/L0B
    ub_bytes_per_cycle: int  # per core, GM <-> UB path (MTE2/MTE3)
    vector_fp16_per_cycle: int  # per core, vector unit lanes for fp16
    launch_us: float  # fixed cost of one kernel launch
    issue_cycles: int  # fixed cost of one tile iteration (instruction issue, sync)
    estimates: tuple[str, ...] = ()

    @property
    def cube_macs_per_cycle(self) -> int:
        """One 16x16x16 fp16 cube instruction a cycle: 4096 multiply-adds per core."""
        return 16 * 16 * 16

    def peak_tflops(self) -> float:
        """fp16 cube peak over all AI cores, in TFLOPS (2 flops per multiply-add)."""
        return 2 * self.cube_macs_per_cycle * self.ai_cores * self.freq_ghz / 1000

    def as_dict(self) -> dict[str, object]:
        """Every parameter, for `bank socs --json`."""
        values: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self)}
        values["estimates"] = list(self.estimates)
        values["peak_fp16_tflops"] = round(self.peak_tflops(), 1)
        return values


def _like_910b2(name: str, cores: int) -> SocSpec:
    """A chip of the Ascend 910B/910_93 families: its AI-core count from CANN's banks (their
    file names), twice as many vector cores, and every other figure Ascend910B2's, flagged as
    an estimate (no figure of these chips is published that tunebank has found)."""
    return SocSpec(name, ai_cores=cores, vector_cores=2 * cores, freq_ghz=1.8, l0a_bytes=64 * KIB,
                   l0b_bytes=64 * KIB, l0c_bytes=128 * KIB, l1_bytes=512 * KIB, ub_bytes=192 * KIB,
                   gm_gbps=1600.0, l1_to_l0_bytes_per_cycle=512, ub_bytes_per_cycle=256,
                   vector_fp16_per_cycle=128, launch_us=1.5, issue_cycles=16,
                   estimates=("vector_cores", "freq_ghz", "l0a_bytes", "l0b_bytes", "l0c_bytes",
                              "l1_bytes", "ub_bytes", "gm_gbps", *_COMMON_ESTIMATES))


_COMMON_ESTIMATES = ("l1_to_l0_bytes_per_cycle", "ub_bytes_per_cycle", "vector_fp16_per_cycle",
                     "launch_us", "issue_cycles")

SOCS: dict[str, SocSpec] = {
    spec.soc_version: spec
    for spec in (
        SocSpec("Ascend310", ai_cores=2, vector_cores=2, freq_ghz=0.49, l0a_bytes=64 * KIB,
                l0b_bytes=64 * KIB, l0c_bytes=256 * KIB, l1_bytes=1024 * KIB, ub_bytes=256 * KIB,
                gm_gbps=47.8, l1_to_l0_bytes_per_cycle=512, ub_bytes_per_cycle=128,
                vector_fp16_per_cycle=128, launch_us=3.0, issue_cycles=16,
                estimates=("ai_cores", "freq_ghz", "l0a_bytes", "l0b_bytes", "l0c_bytes",
                           "l1_bytes", "ub_bytes", "gm_gbps", *_COMMON_ESTIMATES)),
        SocSpec("Ascend310P3", ai_cores=8, vector_cores=8, freq_ghz=1.08, l0a_bytes=64 * KIB,
                l0b_bytes=64 * KIB, l0c_bytes=256 * KIB, l1_bytes=1024 * KIB, ub_bytes=256 * KIB,
                gm_gbps=204.8, l1_to_l0_bytes_per_cycle=512, ub_bytes_per_cycle=128,
                vector_fp16_per_cycle=128, launch_us=2.5, issue_cycles=16,
                estimates=("ai_cores", "freq_ghz", "l1_bytes", "gm_gbps", *_COMMON_ESTIMATES)),
        SocSpec("Ascend910A", ai_cores=32, vector_cores=32, freq_ghz=0.98, l0a_bytes=64 * KIB,
                l0b_bytes=64 * KIB, l0c_bytes=256 * KIB, l1_bytes=1024 * KIB, ub_bytes=256 * KIB,
                gm_gbps=1200.0, l1_to_l0_bytes_per_cycle=512, ub_bytes_per_cycle=256,
                vector_fp16_per_cycle=128, launch_us=2.0, issue_cycles=16,
                estimates=("freq_ghz", "l0a_bytes", "l0b_bytes", "l0c_bytes", "l1_bytes",
                           "ub_bytes", "gm_gbps", *_COMMON_ESTIMATES)),
        SocSpec("Ascend910B2", ai_cores=24, vector_cores=48, freq_ghz=1.8, l0a_bytes=64 * KIB,
                l0b_bytes=64 * KIB, l0c_bytes=128 * KIB, l1_bytes=512 * KIB, ub_bytes=192 * KIB,
                gm_gbps=1600.0, l1_to_l0_bytes_per_cycle=512, ub_bytes_per_cycle=256,
                vector_fp16_per_cycle=128, launch_us=1.5, issue_cycles=16,
                estimates=("gm_gbps", *_COMMON_ESTIMATES)),
        *(_like_910b2(name, cores) for name, cores in (
            ("Ascend910B1", 24), ("Ascend910B2C", 24), ("Ascend910B3", 20), ("Ascend910B4", 20),
            ("Ascend910_9372", 20), ("Ascend910_9381", 24), ("Ascend910_9382", 24),
            ("Ascend910_9391", 24), ("Ascend910_9392", 24))),
    )
}


def with_cores(spec: SocSpec, cores: int | None, option: str = "--aicore-num") -> SocSpec:
    """``spec`` on ``cores`` of its AI cores (AOE's ``--aicore_num``; ``None``: all of them),
    its vector cores in the same proportion.

    Raises:
        UnknownSocError: ``cores`` is not between 1 and the chip's count.
    """
    if cores is None or cores == spec.ai_cores:
        return spec
    if isinstance(cores, bool) or not 1 <= cores <= spec.ai_cores:
        raise UnknownSocError(f"{option}: {cores} is not between 1 and {spec.soc_version}'s "
                              f"{spec.ai_cores} AI cores")
    vector = max(1, spec.vector_cores * cores // spec.ai_cores)
    return replace(spec, ai_cores=cores, vector_cores=vector)


def full_cores(spec: SocSpec) -> int:
    """How many AI cores ``spec``'s chip has (``spec`` may use fewer: :func:`with_cores`)."""
    known = SOCS.get(spec.soc_version)
    return known.ai_cores if known is not None else spec.ai_cores


def get_soc(soc_version: str) -> SocSpec:
    """The parameters of ``soc_version``.

    Raises:
        UnknownSocError: the cost model does not know this chip; the message lists those it
            knows, or names the chip meant where only the case differs.
    """
    if soc_version not in SOCS:
        check_soc_name(soc_version)
    return SOCS[soc_version]


def check_soc_name(soc_version: str, in_bank: Iterable[str] = (), *,
                   allow_unknown: bool = False, option: str = "--soc-version", hint: str = "") -> str:
    """``soc_version`` if every command should accept it: a plain name (see
    :func:`bank.names.is_plain_name`), and a chip of :data:`SOCS`, one the bank
    already holds, or with ``allow_unknown`` any other name. A name that differs from one of
    those only in case is refused with the name meant, whatever ``allow_unknown`` says: AOE's
    names are case-sensitive, and a bank must not hold one chip under two names. ``hint``
    closes the message for an unknown name: what the asking command offers for it, if anything.

    Raises:
        UnknownSocError: the name is not accepted; the message says what is.
    """
    if not is_plain_name(soc_version):  # a chip is a folder of AOE's tree: never a path
        raise UnknownSocError(f"{option}: the chip {why_not_plain(soc_version)}")
    known = set(SOCS) | set(in_bank)
    if soc_version in known:
        return soc_version
    meant = sorted(name for name in known if name.casefold() == soc_version.casefold())
    if meant:
        raise UnknownSocError(f"{option}: no chip is named {soc_version!r}; did you mean "
                              f"{meant[0]!r}? (chip names are case-sensitive)")
    if allow_unknown:
        return soc_version
    raise UnknownSocError(f"{option}: unknown soc_version {soc_version!r}; known: "
                          f"{', '.join(sorted(known))}" + (f" ({hint})" if hint else ""))


def check_socs(in_bank: Iterable[str], names: Iterable[str | None], *,
               allow_unknown: bool = False, hint: str = "") -> None:
    """Refuse a chip name that no command should take: not one `bank socs` lists nor one of
    ``in_bank`` (the bank's chips) unless ``allow_unknown``, or one of those in the wrong case
    (see :func:`check_soc_name`). What an import checks before it writes.

    Raises:
        UnknownSocError: a name is refused.
    """
    held = set(in_bank)
    for name in sorted({name for name in names if name is not None}):
        check_soc_name(name, held, allow_unknown=allow_unknown, hint=hint)
