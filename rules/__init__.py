"""lifetime-lint's rules, one per module; installed as `lifetime_lint.rules`."""
