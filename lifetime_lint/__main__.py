"""`python -m lifetime_lint` is the `lifetime-lint` command (with its fast path)."""

from lifetime_lint.fastpath import program

program(prog_name="lifetime-lint")
