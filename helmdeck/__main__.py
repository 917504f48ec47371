from helmdeck.cli import main

raise SystemExit(main())
