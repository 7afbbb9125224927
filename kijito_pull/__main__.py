from kijito_pull.cli.main import console

raise SystemExit(console())
