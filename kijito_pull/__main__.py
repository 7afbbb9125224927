from kijito_pull.cli.main import main

raise SystemExit(main())
