"""Entry points: one module per command, each with `register(subparsers)` and `run(args, env)`."""
