"""The plan room: which operators a tune covers and how they group by key (``--tuning-config``,
subgraphs), and what a bank already knows of a model (``bank plan``, ``bank diff --model``,
tuning_result.json)."""
