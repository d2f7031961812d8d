"""The one exception type users see: the CLI turns it into a one-line message."""


class OrthotuneError(Exception):
    """A user-facing error: bad input, a missing file, an unknown name."""


class ConfigError(OrthotuneError, ValueError):
    """A value broke a rule; the message states the value and the rule."""


def check(condition: bool, message: str) -> None:
    """Raise `ConfigError(message)` unless `condition` holds."""
    if not condition:
        raise ConfigError(message)
