"""What an operator declares, as Flux's api/: the Package types, their field groups, dependsOn, and the
loader, the one reader of package files."""
