"""The audit room: the bank checked, and re-derived, from its log alone (``bank verify``, ``bank
rebuild``)."""
