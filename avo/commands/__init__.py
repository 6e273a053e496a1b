"""The `avo` subcommands: flag parsing and printing only; the work is in the packages they call. Nothing outside the
CLI imports these (tests/test_layers.py holds it).

One module per command family, each with `register(app)`: evolve (and evolve_folder for --kernel DIR), bench (and
bench_folder), runs (runs, show, diff, rollback, export, import), replay, report, serve, profile (profile, inspect),
docs, doctor.
"""
