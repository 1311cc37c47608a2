"""kanon: k-anonymity, l-diversity and t-closeness for Arrow tables.

The functions run kanon's own commands (the Rust engine and the very code
path of the ``kanon`` command line): the same job file, the same checks,
verification before anything is written, and the same bytes for the same
job and seed. Tables come in through the Arrow C stream interface
(``__arrow_c_stream__``: pyarrow, polars, DuckDB; pandas through pyarrow)
without a copy, and releases come back as ``pyarrow.Table``.

    import kanon, polars as pl
    people = pl.read_parquet("people.parquet")
    release = kanon.anonymize(people, "configs/adult.toml")
    print(release)            # the summary the command line prints
    release.table             # a pyarrow.Table, verified before it was written

A job is a TOML file (``job="configs/adult.toml"``), a dict with the job
file's sections (``job={"privacy": {"k": 5}, "attributes": [...]}``), or
keyword settings with the job file's section names
(``privacy={"k": 10}``): on a job file these are overrides, which may not
weaken its privacy unless ``weaken_privacy=True`` (as on the command line).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _kanon

__version__: str = _kanon.__version__

__all__ = [
    "anonymize",
    "verify",
    "risk",
    "report",
    "register",
    "Release",
    "KanonError",
    "VerificationFailed",
    "BadInput",
    "Unsatisfiable",
    "StorageError",
    "OutputExists",
    "TimedOut",
    "InternalError",
]

PathLike = Union[str, "os.PathLike[str]"]
Job = Union[PathLike, Mapping[str, Any], None]
Progress = Callable[[str, int, Optional[int], str], Any]


class KanonError(Exception):
    """A kanon command that failed; ``code`` is the command line's exit code
    for the same failure, ``message`` what it prints."""

    code: int = 0

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class VerificationFailed(KanonError):
    """Exit code 1: a release does not meet the job's privacy model."""


class BadInput(KanonError, ValueError):
    """Exit code 2: the job, a setting or the data is wrong (the message names
    the setting, column or file, and the fix)."""


class Unsatisfiable(KanonError):
    """Exit code 3: no release of this data meets the job's privacy model."""


class StorageError(KanonError):
    """Exit code 4: a file or object could not be read or written."""


class OutputExists(KanonError):
    """Exit code 5: the output exists (pass ``overwrite=True`` to replace it)."""


class TimedOut(KanonError):
    """Exit code 124: the job ran past its ``timeout``; nothing was written."""


class InternalError(KanonError):
    """Exit code 70: a bug in kanon; nothing was written."""


_BY_CODE = {
    1: VerificationFailed,
    2: BadInput,
    3: Unsatisfiable,
    4: StorageError,
    5: OutputExists,
    70: InternalError,
    124: TimedOut,
}


def _run(
    args: List[str],
    data: Any = None,
    label: str = "table",
    progress: Optional[Progress] = None,
) -> str:
    try:
        return _kanon.run(args, data, label, progress)
    except _kanon.Failed as e:
        code, message = e.args
        raise _BY_CODE.get(code, KanonError)(message, code) from None


def _arrow_source(data: Any) -> Tuple[Any, str]:
    """The object to stream from, and its name in messages."""
    kind = f"{type(data).__module__}.{type(data).__qualname__}"
    if hasattr(data, "__arrow_c_stream__"):
        return data, kind
    if type(data).__module__.startswith("pandas"):
        import pyarrow as pa

        return pa.Table.from_pandas(data, preserve_index=False), kind
    raise TypeError(
        f"kanon reads Arrow tables: pass a pyarrow Table or RecordBatchReader, a "
        f"polars or pandas DataFrame, a DuckDB relation, or a path; got {kind}"
    )


def _flatten(prefix: str, value: Any) -> List[Tuple[str, Any]]:
    if isinstance(value, Mapping):
        out: List[Tuple[str, Any]] = []
        for k, v in value.items():
            out.extend(_flatten(f"{prefix}.{k}", v))
        return out
    return [(prefix, value)]


def _merge(base: Dict[str, Any], extra: Mapping[str, Any]) -> Dict[str, Any]:
    for k, v in extra.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), Mapping):
            base[k] = _merge(dict(base[k]), v)
        else:
            base[k] = v
    return base


def _job_args(job: Job, settings: Mapping[str, Any], workdir: Path) -> List[str]:
    """``--config`` and ``--set`` arguments for a job file, a dict job or
    keyword settings."""
    for name, value in settings.items():
        if not isinstance(value, Mapping) and name != "attributes":
            raise BadInput(
                f"keyword setting `{name}` is not a section of the job file: pass "
                f"sections as dicts, e.g. privacy={{'k': 5}} or algorithm={{'name': 'mondrian'}}",
                2,
            )
    if job is None or isinstance(job, Mapping):
        doc = _merge(json.loads(json.dumps(dict(job or {}))), settings)
        path = workdir / "job.toml"
        path.write_text(_kanon.toml_of(json.dumps(doc)))
        return [f"--config={path}"]
    args = [f"--config={os.fspath(job)}"]
    for section, value in settings.items():
        if section == "attributes":
            raise BadInput(
                "`attributes` cannot be overridden on a job file (they are a list of "
                "tables): edit the file, or pass the whole job as a dict",
                2,
            )
        for key, v in _flatten(section, value):
            args.append(f"--set={key}={json.dumps(v)}")
    return args


class _Scratch:
    """A temporary directory that lives as long as its owner."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="kanon-"))
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.path), True)


class Release:
    """A verified release: ``table`` (a ``pyarrow.Table``), the ``certificate``
    and ``metrics`` the command line writes, the ``summary`` it prints, and
    where it was written (``path``; a temporary directory removed with this
    object when no ``output`` was given)."""

    def __init__(self, path: str, summary: str, metrics: Dict[str, Any], job_args: List[str],
                 scratch: _Scratch) -> None:
        self.path = path
        self.summary = summary
        self.metrics = metrics
        self._job_args = job_args
        self._scratch = scratch
        self._table: Any = None

    @property
    def table(self) -> Any:
        """The release as a ``pyarrow.Table`` (read from the written, verified files)."""
        if self._table is None:
            if (Path(self.path) / "_delta_log").is_dir():
                # A Delta table's directory also holds files its log removed.
                try:
                    import deltalake
                except ImportError:
                    raise ImportError(
                        f"{self.path} is a Delta table: install deltalake to read it "
                        "(pip install deltalake), or read it with your lakehouse engine"
                    ) from None
                self._table = deltalake.DeltaTable(self.path).to_pyarrow_table()
            else:
                import pyarrow.parquet as pq

                self._table = pq.read_table(self.path)
        return self._table

    @property
    def certificate(self) -> Optional[Dict[str, Any]]:
        """The release certificate (what was checked, by whom, on which input),
        from the release's manifest; ``None`` for a Delta table, whose
        certificate is in its commit."""
        p = Path(self.path)
        for manifest in (p / "_kanon_release.json", p.with_name(f"_{p.name}.kanon_release.json")):
            if manifest.is_file():
                return json.loads(manifest.read_text()).get("certificate")
        return None

    @property
    def risk(self) -> Optional[Dict[str, Any]]:
        """Re-identification risk before and after (the metrics' ``risk``)."""
        return self.metrics.get("risk")

    def __str__(self) -> str:
        return self.summary

    def __repr__(self) -> str:
        rows = self.metrics.get("report", {}).get("rows_out")
        return f"<kanon.Release {self.path} rows={rows}>"


def anonymize(
    data: Any = None,
    job: Job = None,
    *,
    output: Optional[PathLike] = None,
    overwrite: bool = False,
    report: Optional[PathLike] = None,
    weaken_privacy: bool = False,
    memory: Optional[str] = None,
    timeout: Optional[float] = None,
    progress: Optional[Progress] = None,
    **settings: Any,
) -> Release:
    """Anonymises ``data`` by ``job`` and returns the verified :class:`Release`.

    ``data``: any object with ``__arrow_c_stream__`` (pyarrow Table or
    RecordBatchReader, polars DataFrame, DuckDB relation), a pandas DataFrame,
    a path or URL (read as ``--input``), or ``None`` for the job's
    ``input.path``. ``job``: a TOML file, a dict of the job file's sections,
    or ``None`` with the sections as keyword ``settings``.
    ``output``: where to write the release (default: a temporary directory
    kept while the ``Release`` lives). ``progress(step, done, total, message)``
    is called as the job advances. Ctrl-C stops the job with nothing written.
    Raises a :class:`KanonError` subclass carrying the command line's message
    and exit code.
    """
    scratch = _Scratch()
    job_args = _job_args(job, settings, scratch.path)
    out = os.fspath(output) if output is not None else str(scratch.path / "release.parquet")
    metrics_path = scratch.path / "metrics.json"
    args = ["anonymize", *job_args, f"--output={out}", f"--metrics-json={metrics_path}"]
    if overwrite:
        args.append("--overwrite")
    if report is not None:
        args.append(f"--report={os.fspath(report)}")
    if weaken_privacy:
        args.append("--weaken-privacy")
    if memory is not None:
        args.append(f"--memory={memory}")
    if timeout is not None:
        args.append(f"--timeout={timeout}")
    source, label = None, "table"
    if isinstance(data, (str, os.PathLike)):
        args.append(f"--input={os.fspath(data)}")
    elif data is not None:
        source, label = _arrow_source(data)
    summary = _run(args, source, label, progress)
    metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() else {}
    return Release(out, summary, metrics, job_args, scratch)


def _release_and_job(release: Union[Release, PathLike], job: Job,
                     settings: Mapping[str, Any], scratch: _Scratch) -> Tuple[str, List[str]]:
    """Where a release is, and the job arguments to check it by: the
    release's own job unless another is given."""
    if isinstance(release, Release):
        if job is None and not settings:
            return release.path, release._job_args
        return release.path, _job_args(job, settings, scratch.path)
    return os.fspath(release), _job_args(job, settings, scratch.path)


def verify(release: Union[Release, PathLike], job: Job = None, *,
           trusted_key: Optional[str] = None, **settings: Any) -> str:
    """Re-checks a published release against the job's privacy model (as
    ``kanon verify``) and returns its report; raises :class:`VerificationFailed`
    when it does not hold. ``job`` defaults to the release's own."""
    scratch = _Scratch()
    path, job_args = _release_and_job(release, job, settings, scratch)
    args = ["verify", *job_args, f"--input={path}"]
    if trusted_key is not None:
        args.append(f"--trusted-key={trusted_key}")
    return _run(args)


def risk(
    data: Any,
    quasi_identifiers: Sequence[str],
    *,
    k: Optional[int] = None,
    population: Optional[PathLike] = None,
    population_size: Optional[int] = None,
    threshold: Optional[float] = None,
) -> Dict[str, Any]:
    """The re-identification risk of ``data`` on ``quasi_identifiers`` (as
    ``kanon inspect --json``): prosecutor, journalist and marketer risk,
    population uniqueness, rows at risk. ``data`` as for :func:`anonymize`."""
    args = ["inspect", "--json", "--qi=" + ",".join(quasi_identifiers)]
    if k is not None:
        args.append(f"--k={k}")
    if population is not None:
        args.append(f"--population={os.fspath(population)}")
    if population_size is not None:
        args.append(f"--population-size={population_size}")
    if threshold is not None:
        args.append(f"--threshold={threshold}")
    if isinstance(data, (str, os.PathLike)):
        return json.loads(_run([*args, "--", os.fspath(data)]))
    source, label = _arrow_source(data)
    return json.loads(_run([*args, "--", label], source, label))


def report(release: Union[Release, PathLike], job: Job = None, *,
           output: Optional[PathLike] = None, input: Optional[PathLike] = None,
           **settings: Any) -> str:
    """The HTML release report (as ``kanon report``): written to ``output``
    when given, and returned as a string."""
    scratch = _Scratch()
    path, job_args = _release_and_job(release, job, settings, scratch)
    out = os.fspath(output) if output is not None else str(scratch.path / "report.html")
    args = ["report", *job_args, f"--output={out}"]
    if input is not None:
        args.append(f"--input={os.fspath(input)}")
    args += ["--", path]
    _run(args)
    return Path(out).read_text()


def register(ctx: Any, *, allowed_dirs: Optional[Sequence[PathLike]] = None) -> None:
    """Registers ``anonymize(table, options)`` and ``kanon_risk(table, options)``
    in a datafusion-python ``SessionContext``: kanon-datafusion's own table
    functions, through DataFusion's FFI (a ``datafusion_table_function``
    capsule), so ``ctx.sql("SELECT * FROM anonymize('adult', '...')")`` plans,
    verifies and streams the release in kanon's library. ``table`` names a
    table or view registered in ``ctx`` (subqueries as arguments need kanon's
    relation planner, which the FFI cannot carry). Options may name files
    (``config``, hierarchies) under ``allowed_dirs`` only (default: the current
    directory).

    Needs the package built with DataFusion:
    ``MATURIN_PEP517_ARGS="--features datafusion" pip install ./python``.
    """
    if not hasattr(_kanon, "table_functions"):
        raise ImportError(
            "this kanon was built without DataFusion, so kanon.register is not available; "
            'reinstall it with MATURIN_PEP517_ARGS="--features datafusion" pip install ./python'
        )
    from datafusion.user_defined import TableFunction

    dirs = None if allowed_dirs is None else [os.fspath(d) for d in allowed_dirs]
    for f in _kanon.table_functions(dirs):
        ctx.register_udtf(TableFunction(f.name, f, ctx))
