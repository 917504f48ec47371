"""helmdeck's Textual app: talks to the engine only through its public API."""
