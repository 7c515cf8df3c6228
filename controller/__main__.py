"""`python -m tgs.controller` = tgs-controller."""

from .main import main

main()
