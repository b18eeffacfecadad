"""`python -m lifetime_lint` is the `lifetime-lint` command."""

from lifetime_lint.cli import main

main(prog_name="lifetime-lint")
