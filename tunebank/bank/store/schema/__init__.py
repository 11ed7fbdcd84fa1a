"""The schema: the SQLModel tables that define it, the DDL a new bank is made with, the hand-
written SQL held to the tables, and the schema version."""
