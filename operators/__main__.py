"""`python -m operators` runs the same CLI as the `draco` console script."""

from operators.cli.main import main

raise SystemExit(main())
