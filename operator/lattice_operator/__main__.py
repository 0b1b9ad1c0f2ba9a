"""`python -m lattice_operator` is the `lattice` command."""

from lattice_operator.cli import main

main()
