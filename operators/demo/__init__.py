"""`draco demo`: an example cluster, draco's controllers, and a narrated, checked scenario.

Modules: scenario (the objects, as data), api (the demo's own REST calls), steps (act,
wait, check, narrate), narrate (the terminal output), usage (draco's RSS and CPU),
logfile (the controllers' logs to a file), session (one run: cluster, controllers,
steps, summary, cleanup). Sits just below `operators.cli`: the command line hands in
the controllers and the view commands.
"""
