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

class TableFunction:
    """`anonymize` or `kanon_risk` as a DataFusion FFI table function
    (built with the `datafusion` feature only)."""

    name: str
    def __datafusion_table_function__(self, session: Any) -> Any: ...

def table_functions(allowed_dirs: Optional[List[str]] = None) -> List[TableFunction]:
    """kanon's table functions for `SessionContext.register_udtf` (built with
    the `datafusion` feature only)."""
