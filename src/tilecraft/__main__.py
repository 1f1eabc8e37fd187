"""``python -m tilecraft``: the command line (see ``tilecraft.cli``)."""
from tilecraft.cli import app

if __name__ == "__main__":
    app(prog_name="tilecraft")
