"""One module per `cudaperf` subcommand, each with `add_parser(subparsers)` and `run(args, open_cluster)`;
`pipeline/cli.py` imports them by name. A command reads its arguments and config, calls the layers below
and prints; the work itself lives in those layers."""
