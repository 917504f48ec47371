"""Leaf helpers every layer uses; nothing here imports the rest of engine/."""
