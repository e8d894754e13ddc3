"""The one exception type for input that Armillary refuses before computing anything."""


class InvalidInput(ValueError):
    """Bad input, refused before any compute.

    ``field`` names the offending argument, parameter or spec key so that a CLI can print a
    one-line message and a test can assert which field was blamed.
    """

    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}")
