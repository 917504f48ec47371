"""What drives reconcile passes: the controller and its work queue, and the triggers that feed it (the
packages folder, valuesFrom objects, chart repositories) through small ports, never the controller; and
the Lease that says whether this engine acts."""
