"""The resolution stage (DESIGN, "Resolution"): package spec -> ``ResolvedRelease``.

``engine.sources.chart`` locates and reads charts; ``engine.resolve.values`` composes values (the one
module that does); ``engine.resolve.release`` puts chart, values and post-render settings together with
their digests.
"""
