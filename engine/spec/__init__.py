"""Package file field groups that have their own module (parsed for :mod:`engine.package`)."""
