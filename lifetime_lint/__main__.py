"""`python -m lifetime_lint` is the `lifetime-lint` command (with its fast path)."""

from lifetime_lint.fastpath import main

main(prog_name="lifetime-lint")
