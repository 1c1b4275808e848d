"""``python -m toolledger``: the same command as the ``toolledger`` script."""

from .cli import main

if __name__ == "__main__":
    main(prog_name="toolledger")
