"""Widgets of the helmdeck app, one per module."""
