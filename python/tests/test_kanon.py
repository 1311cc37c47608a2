"""The Python package against the command line: the same summary and bytes,
every input kind, every failure as a clean exception (issue 37).

The command line is found as $KANON_BIN, else target/{debug,release}/kanon of
the repository; without one, the tests that compare with it skip locally and
fail under CI=true.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import kanon

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "configs" / "adult.toml"
ADULT = ROOT / "data" / "adult" / "adult.parquet"


def cli() -> str:
    for candidate in [
        os.environ.get("KANON_BIN"),
        ROOT / "target" / "debug" / "kanon",
        ROOT / "target" / "release" / "kanon",
    ]:
        if candidate and Path(candidate).is_file():
            return str(candidate)
    if os.environ.get("CI") == "true":
        pytest.fail("no kanon binary: set KANON_BIN (CI builds it)")
    pytest.skip("no kanon binary built")


def sha(p: Path) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def summary_lines(text: str) -> list[str]:
    """The summary without its first line (paths) and its timings."""
    return [l for l in text.splitlines()[1:] if not l.strip().startswith("time ")]


@pytest.fixture(scope="module")
def cli_release(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "release.parquet"
    run = subprocess.run(
        [cli(), "anonymize", "--config", str(JOB), "--output", str(out)],
        capture_output=True, text=True, check=True,
    )
    return out, run.stdout


def readme_example() -> str:
    """The README's Python quick start (its first ```python block)."""
    text = (ROOT / "README.md").read_text()
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def test_readme_example_prints_the_cli_summary(cli_release):
    example = readme_example()
    assert len(example.strip().splitlines()) == 5
    # Run as a user would: a fresh interpreter at the repository's root.
    run = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    printed = run.stdout.strip().splitlines()
    _, cli_out = cli_release
    assert summary_lines("\n".join(printed[:-1])) == summary_lines(cli_out)
    assert printed[0].startswith("kanon anonymize: pyarrow.lib.Table -> ")
    assert printed[-1] == "30162"


def test_the_notebook_in_docs_runs(monkeypatch, capsys):
    """docs/python.md: its cells, in order, in one namespace, at the root."""
    pytest.importorskip("polars")
    pytest.importorskip("duckdb")
    cells = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "python.md").read_text(), re.S)
    assert len(cells) >= 5
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    for cell in cells:
        exec(compile(cell, "docs/python.md", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "k-anonymity (k = 20)" in printed and "satisfies" in printed
    assert "3 " in printed  # the refused job's exit code


def test_same_bytes_as_the_cli_for_the_same_job_and_seed(cli_release, tmp_path):
    cli_out, cli_summary = cli_release
    out = tmp_path / "py.parquet"
    release = kanon.anonymize(None, JOB, output=out)
    assert sha(out) == sha(cli_out)
    assert summary_lines(release.summary) == summary_lines(cli_summary)
    # The certificate beside it, too, but for where it says the files are.
    assert release.certificate["job_hash"] == kanon.anonymize(None, JOB).certificate["job_hash"]


def test_a_table_in_memory_gives_the_cli_release(cli_release, tmp_path):
    cli_out, _ = cli_release
    out = tmp_path / "mem.parquet"
    kanon.anonymize(pq.read_table(ADULT), JOB, output=out)
    assert pq.read_table(out).equals(pq.read_table(cli_out))
    # The bytes differ only in the input's fingerprint: the hash of the Arrow
    # stream given, not of the Parquet footer.
    ours, theirs = pq.ParquetFile(out).metadata.metadata, pq.ParquetFile(cli_out).metadata.metadata
    assert {k for k in ours if ours[k] != theirs.get(k)} == {b"kanon.input.fingerprint"}


def inputs():
    table = pq.read_table(ADULT)
    yield "pyarrow.Table", lambda: table
    yield "pyarrow.RecordBatchReader", lambda: pa.RecordBatchReader.from_batches(
        table.schema, table.to_batches(max_chunksize=1000))
    yield "pandas", lambda: pytest.importorskip("pandas").read_parquet(ADULT)
    yield "polars", lambda: pytest.importorskip("polars").read_parquet(ADULT)
    yield "duckdb", lambda: pytest.importorskip("duckdb").sql(f"SELECT * FROM '{ADULT}'")
    yield "datafusion", lambda: pytest.importorskip("datafusion").SessionContext().read_parquet(str(ADULT))


@pytest.mark.parametrize("kind,make", list(inputs()), ids=[k for k, _ in inputs()])
def test_every_arrow_input_gives_the_same_release(kind, make, cli_release):
    cli_out, _ = cli_release
    release = kanon.anonymize(make(), JOB)
    expected = pq.read_table(cli_out)
    got = release.table
    # pandas and polars may widen or re-type columns; the values must agree.
    assert got.num_rows == expected.num_rows
    for name in expected.column_names:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), (kind, name)


def test_a_dict_job_and_keyword_settings():
    job = tomllib.loads(JOB.read_text())
    for a in job["attributes"]:
        if "hierarchy" in a:
            a["hierarchy"] = str(ROOT / a["hierarchy"])
    job.pop("output")
    job["input"]["path"] = str(ADULT)
    by_dict = kanon.anonymize(None, job)
    by_file = kanon.anonymize(None, JOB)
    assert by_dict.table.equals(by_file.table)
    # Keyword sections on a dict job, and as overrides of a job file.
    stronger = kanon.anonymize(None, job, privacy={"k": 20})
    assert stronger.metrics["verified"]["smallest_class"] >= 20
    assert kanon.anonymize(None, JOB, privacy={"k": 20}).table.equals(stronger.table)


def test_overrides_may_not_weaken_a_job_file():
    with pytest.raises(kanon.BadInput) as e:
        kanon.anonymize(None, JOB, privacy={"k": 2})
    assert e.value.code == 2
    assert "weaken" in str(e.value) and "privacy.k" in str(e.value)
    assert kanon.anonymize(None, JOB, privacy={"k": 2}, weaken_privacy=True).metrics["privacy"]


def test_failures_are_exceptions_with_the_cli_codes(tmp_path):
    with pytest.raises(kanon.BadInput, match="cannot read job file") as e:
        kanon.anonymize(None, tmp_path / "missing.toml")
    assert e.value.code == 2
    with pytest.raises(kanon.Unsatisfiable) as e:
        kanon.anonymize(pq.read_table(ADULT).slice(0, 50), JOB, privacy={"k": 100},
                        output=tmp_path / "u.parquet")
    assert e.value.code == 3 and not (tmp_path / "u.parquet").exists()
    out = tmp_path / "once.parquet"
    kanon.anonymize(None, JOB, output=out)
    with pytest.raises(kanon.OutputExists) as e:
        kanon.anonymize(None, JOB, output=out)
    assert e.value.code == 5
    with pytest.raises(kanon.BadInput, match="not a section"):
        kanon.anonymize(None, JOB, k=5)
    with pytest.raises(TypeError, match="Arrow"):
        kanon.anonymize([1, 2, 3], JOB)
    with pytest.raises(kanon.BadInput, match="column"):
        kanon.anonymize(pa.table({"x": [1, 2, 3]}), JOB)
    with pytest.raises(kanon.BadInput, match="no rows"):
        kanon.anonymize(pq.read_table(ADULT).slice(0, 0), JOB)


def test_messages_name_no_value(tmp_path):
    # A row whose age is text: the message names the column, never the value.
    table = pq.read_table(ADULT).slice(0, 100)
    ages = table.column("age").cast(pa.string()).to_pylist()
    ages[7] = "SECRET-AGE-1234"
    bad = table.set_column(table.schema.get_field_index("age"), "age", pa.array(ages))
    with pytest.raises(kanon.KanonError) as e:
        kanon.anonymize(bad, JOB)
    assert "SECRET-AGE-1234" not in str(e.value)
    assert "age" in str(e.value)


def test_verify_report_and_risk(tmp_path):
    release = kanon.anonymize(None, JOB)
    assert "satisfies k-anonymity (k = 10)" in kanon.verify(release)
    html = kanon.report(release, output=tmp_path / "r.html")
    assert html.lstrip().lower().startswith("<!doctype html") and (tmp_path / "r.html").is_file()
    qi = ["age", "sex", "race"]
    in_memory = kanon.risk(pq.read_table(ADULT), quasi_identifiers=qi)
    from_file = kanon.risk(ADULT, quasi_identifiers=qi)
    assert in_memory["rows"] == from_file["rows"] == 30162
    assert in_memory["risk"] == from_file["risk"]


def test_verify_fails_on_a_tampered_release(tmp_path):
    out = tmp_path / "t.parquet"
    kanon.anonymize(None, JOB, output=out)
    table = pq.read_table(out)
    pq.write_table(table.slice(0, 5), tmp_path / "few.parquet")
    with pytest.raises(kanon.VerificationFailed) as e:
        kanon.verify(tmp_path / "few.parquet", JOB)
    assert e.value.code == 1


def test_progress_callback():
    seen = []
    kanon.anonymize(None, JOB, progress=lambda step, done, total, msg: seen.append(step))
    # Adult runs in well under a second: the callback may see no step at
    # all, but whatever it sees is a step of the run.
    assert set(seen) <= {"pass 1/2", "algorithm", "pass 2/2"}


@pytest.mark.skipif(sys.platform != "linux", reason="SIGINT to the process")
def test_ctrl_c_stops_the_job_and_writes_nothing(tmp_path, monkeypatch):
    # Python turns SIGINT into KeyboardInterrupt only when it inherits the
    # default disposition; a shell's background job (`ci/run &`) inherits
    # SIGINT ignored. Install the notebook's handler for this test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_stops_the_job(tmp_path, monkeypatch)
    finally:
        signal.signal(signal.SIGINT, previous)


def _ctrl_c_stops_the_job(tmp_path, monkeypatch):
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    (barrier / "before-commit.wait").write_text("")
    monkeypatch.setenv("KANON_TEST_BARRIER", str(barrier))
    out = tmp_path / "never.parquet"

    def press_ctrl_c():
        for _ in range(600):
            if (barrier / "before-commit").exists():
                break
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        kanon.anonymize(None, JOB, output=out)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(("never", ".never", "_never"))]
    # The next job runs: the interrupt does not outlive its job.
    monkeypatch.delenv("KANON_TEST_BARRIER")
    assert kanon.anonymize(None, JOB).table.num_rows == 30162


def test_a_release_without_output_lives_with_its_object():
    release = kanon.anonymize(None, JOB)
    path = Path(release.path)
    assert path.is_file()
    del release
    import gc

    gc.collect()
    assert not path.exists()


def with_datafusion():
    datafusion = pytest.importorskip("datafusion")
    if not hasattr(kanon._kanon, "table_functions"):
        if os.environ.get("CI") == "true":
            pytest.fail("CI builds the package with --features datafusion")
        pytest.skip("kanon built without the datafusion feature")
    return datafusion


def test_register_in_a_datafusion_python_session(cli_release):
    datafusion = with_datafusion()
    cli_out, _ = cli_release
    ctx = datafusion.SessionContext()
    ctx.register_parquet("adult", str(ADULT))
    kanon.register(ctx, allowed_dirs=[ROOT])
    got = ctx.sql(f"""SELECT * FROM anonymize('adult', 'config = "{JOB}"')""").to_arrow_table()
    expected = pq.read_table(cli_out)
    assert got.column_names == expected.column_names
    rows = lambda t: sorted(map(repr, zip(*(t.column(c).to_pylist() for c in t.column_names))))
    assert rows(got) == rows(expected)
    risk = ctx.sql("SELECT \"rows\", smallest_class FROM kanon_risk('adult', 'qi = [\"age\", \"sex\"], k = 5')").to_pylist()
    assert risk[0]["rows"] == 30162
    # A failure is an exception, not a crash; no value in it.
    with pytest.raises(Exception, match="not found"):
        ctx.sql(f"""SELECT * FROM anonymize('nope', 'config = "{JOB}"')""").collect()
    with pytest.raises(Exception, match="k"):
        ctx.sql("SELECT * FROM anonymize('adult', 'qi = [\"age\"], k = 100000')").collect()


def test_register_refuses_files_outside_the_allowed_directories(tmp_path):
    datafusion = with_datafusion()
    ctx = datafusion.SessionContext()
    ctx.register_parquet("adult", str(ADULT))
    kanon.register(ctx, allowed_dirs=[tmp_path])
    with pytest.raises(Exception, match="allow"):
        ctx.sql(f"""SELECT * FROM anonymize('adult', 'config = "{JOB}"')""").collect()


def test_every_failure_of_every_function_is_a_clean_exception(tmp_path):
    table = pq.read_table(ADULT)
    # Storage: the output's directory is a file.
    (tmp_path / "file").write_text("")
    with pytest.raises(kanon.KanonError) as e:
        kanon.anonymize(table, JOB, output=tmp_path / "file" / "x.parquet")
    assert e.value.code in (2, 4) and "file" in e.value.message
    # The time limit: exit code 124, nothing written.
    with pytest.raises(kanon.TimedOut) as e:
        kanon.anonymize(table, JOB, output=tmp_path / "late.parquet", timeout=1e-6)
    assert e.value.code == 124 and not (tmp_path / "late.parquet").exists()
    with pytest.raises(kanon.BadInput, match="--timeout"):
        kanon.anonymize(table, JOB, timeout=-1)
    # The next job has no time limit left over.
    assert kanon.anonymize(table, JOB).table.num_rows == 30162
    with pytest.raises(kanon.BadInput, match="not a valid kanon job|unknown field"):
        kanon.anonymize(table, {"privacy": {"k": 5}, "nonsense": {"x": 1}})
    with pytest.raises(kanon.BadInput):
        kanon.anonymize(table, None, privacy={"k": 5})
    with pytest.raises(kanon.BadInput, match="cannot be overridden"):
        kanon.anonymize(table, JOB, attributes=[])
    with pytest.raises(kanon.BadInput, match="nope"):
        kanon.risk(table, quasi_identifiers=["nope"])
    with pytest.raises(kanon.KanonError, match="missing"):
        kanon.verify(tmp_path / "missing.parquet", JOB)
    with pytest.raises(kanon.KanonError, match="missing"):
        kanon.report(tmp_path / "missing.parquet", JOB)
    with pytest.raises(TypeError):
        kanon.risk(object(), quasi_identifiers=["age"])


def test_a_generator_behind_a_record_batch_reader_streams_in(cli_release):
    cli_out, _ = cli_release
    table = pq.read_table(ADULT)

    def batches():
        yield from table.to_batches(max_chunksize=4096)

    reader = pa.RecordBatchReader.from_batches(table.schema, batches())
    got = kanon.anonymize(reader, JOB).table
    assert got.equals(pq.read_table(cli_out))


def test_differential_privacy_draws_from_the_key_as_the_cli_does(tmp_path, monkeypatch):
    """SafePub (issue 36): with the same KANON_DP_KEY, seed and input the
    Python release is the command line's, byte for byte; it verifies, and
    its input fingerprint is keyed."""
    job = ROOT / "configs" / "adult-differential-privacy.toml"
    key = "python-test-key-of-differential-privacy-0123456789"
    by_cli = tmp_path / "cli.parquet"
    subprocess.run(
        [cli(), "anonymize", "--config", str(job), "--output", str(by_cli)],
        capture_output=True, text=True, check=True,
        env={**os.environ, "KANON_DP_KEY": key},
    )
    monkeypatch.setenv("KANON_DP_KEY", key)
    by_python = tmp_path / "python.parquet"
    release = kanon.anonymize(None, job, output=by_python)
    assert sha(by_python) == sha(by_cli)
    details = release.metrics["details"]
    assert details["randomness"] == "keyed" and details["k"] == 119
    assert 0 < release.table.num_rows < 30162
    assert release.metrics["input_fingerprint"].startswith("hmac-sha256:")
    assert "differential privacy" in kanon.verify(by_python, job)


def test_delta_presence_publishes_the_study_as_the_cli_does(tmp_path):
    """Delta-presence (issue 36): a population handed over as a pyarrow
    table gives the command line's rows; only study records leave, never
    the subset column; verify recounts the population and says so."""
    job = ROOT / "configs" / "adult-delta-presence.toml"
    population = pq.read_table(ROOT / "data" / "adult" / "adult-presence.parquet")
    by_cli = tmp_path / "cli.parquet"
    subprocess.run(
        [cli(), "anonymize", "--config", str(job), "--output", str(by_cli)],
        capture_output=True, text=True, check=True,
    )
    by_python = tmp_path / "python.parquet"
    release = kanon.anonymize(population, job, output=by_python)
    assert "in_study" not in release.table.column_names
    study = sum(population["in_study"].to_pylist())
    assert 0 < release.table.num_rows <= study
    assert release.table.equals(pq.read_table(by_cli))
    assert "delta-presence" in kanon.verify(by_python, job)
