"""The state the runtime keeps, one holder per concern: the release book (per-release state and the
running-action guard), the action gate, who owns a release, and the engine's background tasks."""
