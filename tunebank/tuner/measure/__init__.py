"""The measure room: the chips, the search space of a key on one, the cost model, and the
measurement backends (the contract, the built-in ``sim``, plug-ins)."""
