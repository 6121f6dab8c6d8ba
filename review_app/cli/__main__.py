"""``python -m review_app.cli``: the Typer application without the light ``inspect`` path."""

from review_app.cli.application import main

if __name__ == "__main__":
    main()
