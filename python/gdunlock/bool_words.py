"""The words of on and off that settings take, in variables and calls."""
_BOOL_WORDS = {"on": True, "true": True, "yes": True, "1": True,
               "off": False, "false": False, "no": False, "0": False}


def parse_bool(text):
    """True or False for ON/OFF, TRUE/FALSE, YES/NO, 1/0 in any case (the
    words kvikio and the C library take); None for anything else."""
    return _BOOL_WORDS.get(str(text).lower()) if text is not None else None


def env_bool(environ, name, unset_value):
    """The boolean variable name of environ; unset_value where it is unset,
    empty or not a boolean (as the C library reads its own)."""
    value = parse_bool(environ.get(name, ""))
    return unset_value if value is None else value
