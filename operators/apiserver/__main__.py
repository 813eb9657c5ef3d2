"""`python -m operators.apiserver`: the embedded API server in the foreground."""

from operators.apiserver.runner import serve_main

raise SystemExit(serve_main())
