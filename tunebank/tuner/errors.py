"""The tuner's own refusal: a tune that cannot start (a bad option or file) or resume."""

from tunebank.bank.errors import BankError


class TuneError(BankError):
    """A tune cannot start (bad option) or resume."""
