"""The one exception type for a user's mistake: bad input, not a bug.

`UserError` (and its subclasses `config.ConfigError` and `registry.UnknownNameError`) carries a
message that names the field and the value. The command line prints it as one line and exits 2;
`reasoning-rl --debug ...` shows the traceback instead. Anything else that escapes a command is a
bug and keeps its traceback.
"""
from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (config, arguments, dataset, model path, run directory): one line, exit 2."""
