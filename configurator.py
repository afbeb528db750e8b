"""
Command-line configuration, nanoGPT style.

    python train.py config/train_shakespeare_char.py --batch_size=32 --compile=False

Every argument is either the path of a config file (a plain Python file of
assignments such as `batch_size = 32`) or a `--key=value` override. They are
applied left to right on top of the caller's defaults, so a later one wins.

Values are parsed as Python literals (ast.literal_eval) and fall back to the raw
string when that fails. Each value must have the type of its default:
  - int is accepted where a float is expected (and converted to float),
  - bools take True/False (or true/false) and nothing else,
  - a str key keeps the raw text when it parses as something else
    (--wandb_run_name=123 gives '123'),
  - a key whose default is None accepts any value.

Mistakes raise ConfigError with one clear message. train.py and sample.py use
configure_globals(globals(), sys.argv[1:]), which prints that message and exits
with status 2.
"""

import ast
import difflib
import sys
import types
from typing import Any


class ConfigError(ValueError):
    """A bad config file, unknown key or badly typed value."""


def _unknown_key(key: str, valid: list[str], where: str) -> ConfigError:
    close = difflib.get_close_matches(key, valid, n=3, cutoff=0.6)
    if close:
        hint = "did you mean " + " or ".join(close) + "?"
    else:
        hint = "valid keys are: " + ", ".join(sorted(valid))
    return ConfigError(f"unknown config key '{key}' ({where}); {hint}")


def _check_type(key: str, value: Any, default: Any, raw: str | None = None) -> Any:
    """Return value converted to the type of default, or raise ConfigError.
    raw is the original command-line text, if the value came from one."""
    if default is None:
        return value
    shown = raw if raw is not None else repr(value)
    expected = type(default)
    if isinstance(default, bool):
        if raw is not None and raw.strip() in ("true", "false"):
            return raw.strip() == "true"
        if isinstance(value, bool):
            return value
    elif isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(default, str):
        if isinstance(value, str):
            return value
        if raw is not None:  # e.g. --wandb_run_name=123 is the name '123'
            return raw
    elif isinstance(value, expected):
        return value
    hint = " (use True or False)" if isinstance(default, bool) else ""
    raise ConfigError(
        f"bad value for '{key}': {shown} is {type(value).__name__}, "
        f"expected {expected.__name__}{hint}"
    )


def _parse_literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _read_config_file(path: str, valid: list[str]) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except FileNotFoundError:
        hint = ""
        if "=" in path and not path.startswith("-"):
            hint = f" (for an override write --{path})"
        raise ConfigError(f"config file not found: {path}{hint}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read config file {path}: {e}") from None
    namespace: dict[str, Any] = {}
    try:
        exec(compile(source, path, "exec"), namespace)
    except Exception as e:
        raise ConfigError(f"error in config file {path}: {type(e).__name__}: {e}") from None
    values = {}
    for name, value in namespace.items():
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue  # __builtins__, private helpers, `import math`
        if name not in valid:
            raise _unknown_key(name, valid, f"in {path}")
        values[name] = value
    return values


def configure(defaults: dict[str, Any], argv: list[str], verbose: bool = True,
              given: set[str] | None = None) -> dict[str, Any]:
    """Apply config files and --key=value overrides in argv, in order, on top of
    defaults. Returns a new dict with every key of defaults. If given is a set, the
    keys that a config file or an override set are added to it."""
    config = dict(defaults)
    valid = list(defaults)
    for arg in argv:
        if arg in ("-h", "--help"):
            listing = "\n".join(f"  --{k}={v!r}" for k, v in defaults.items())
            raise ConfigError("usage: [config_file.py ...] [--key=value ...]; "
                              f"the keys and their defaults are:\n{listing}")
        if not arg.startswith("--"):
            values = _read_config_file(arg, valid)
            if verbose:
                print(f"Overriding config with {arg}:")
                with open(arg, encoding="utf-8") as f:
                    print(f.read())
            for key, value in values.items():
                config[key] = _check_type(key, value, defaults[key])
            if given is not None:
                given.update(values)
            continue
        if "=" not in arg:
            raise ConfigError(f"override {arg} has no value; write it as {arg}=VALUE")
        key, raw = arg[2:].split("=", 1)
        if not key:
            raise ConfigError(f"override {arg} has no key; write it as --key=VALUE")
        if key not in defaults:
            raise _unknown_key(key, valid, f"in {arg}")
        value = _check_type(key, _parse_literal(raw), defaults[key], raw)
        if verbose:
            print(f"Overriding: {key} = {value}")
        config[key] = value
        if given is not None:
            given.add(key)
    return config


def configure_globals(g: dict[str, Any], argv: list[str], skip: tuple[str, ...] = ("ROOT",),
                      given: set[str] | None = None) -> dict[str, Any]:
    """nanoGPT's convention for a script's settings: every public int/float/bool/str/None
    global defined so far (except those in skip) is a config key. Applies argv to them in
    place and returns {key: final value}; given (a set) collects the keys that argv set.
    A bad argument prints one `config error: ...` line to stderr and exits with status 2."""
    keys = [k for k, v in g.items() if not k.startswith("_") and k not in skip
            and isinstance(v, (int, float, bool, str, type(None)))]
    try:
        config = configure({k: g[k] for k in keys}, argv, given=given)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        sys.exit(2)
    g.update(config)
    return config
