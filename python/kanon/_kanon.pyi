"""Type stubs of the native module (crates/python): see kanon/__init__.py."""

from typing import Any, Callable, List, Optional

__version__: str

class Failed(Exception):
    """A kanon command that failed: args are (exit code, message)."""

def run(
    args: List[str],
    data: Optional[Any] = None,
    label: str = "table",
    progress: Optional[Callable[[str, int, Optional[int], str], Any]] = None,
) -> str:
    """Runs a kanon command (`["anonymize", "--config", ...]`), reading `data`
    (an object with `__arrow_c_stream__`) as its input when given; returns
    what it printed. Raises `Failed`, or `KeyboardInterrupt` on Ctrl-C."""

def toml_of(json: str) -> str:
    """The TOML text of a job given as JSON."""
