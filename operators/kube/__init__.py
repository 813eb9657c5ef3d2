"""API writes shared by draco's controllers: an async client, Events, conditions, the tracker feed."""
