"""`python -m mrtr_trio ...`: the `mrtr-trio` command, for when the console script is not on
`PATH` (a virtual environment that is not activated; `sys.executable` in a client's launch
parameters)."""

from ._cli import main

if __name__ == "__main__":
    main()
