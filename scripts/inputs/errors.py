"""The one error of the input layer: the file or URL, and what is wrong with it."""


class InputError(ValueError):
    """An input that cannot be read within its bounds; `str()` is one line: `<source>: <problem>`."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem
