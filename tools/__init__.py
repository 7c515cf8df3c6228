"""User-facing commands: tgs-run, tgsctl, tgs-inject."""
