"""`python -m isolab.cli`."""

from isolab.cli import main

main()
