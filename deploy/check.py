"""Checks the deploy/ examples without a cluster, Airflow or systemd.

Usage: python3 deploy/check.py OUT_DIR

- deploy/k8s/*.yaml parse, and the CronJob names what deploy/README.md says
  it relies on (Forbid, the ConfigMap volume, the Secret through envFrom,
  resource requests and limits, no retries, non-root);
- the Airflow DAG is valid Python and names both operators and kanon-job;
- the systemd units are INI files with the keys the README relies on;
- the ConfigMap's job.toml is written to OUT_DIR/job.toml, so the caller
  can check it with `kanon anonymize --dry-run`.

Exits non-zero with the reason on the first failure.
"""

import ast
import configparser
import pathlib
import sys

import yaml

DEPLOY = pathlib.Path(__file__).resolve().parent


def fail(msg: str) -> None:
    sys.exit(f"deploy/check.py: {msg}")


def need(cond: bool, msg: str) -> None:
    if not cond:
        fail(msg)


def check_k8s(out: pathlib.Path) -> None:
    docs = list(yaml.safe_load_all((DEPLOY / "k8s/cronjob.yaml").read_text()))
    kinds = {d["kind"]: d for d in docs if d}
    need(set(kinds) == {"ConfigMap", "CronJob"}, f"cronjob.yaml holds {sorted(kinds)}")
    config_map = kinds["ConfigMap"]
    need("job.toml" in config_map["data"], "the ConfigMap has no job.toml")
    (out / "job.toml").write_text(config_map["data"]["job.toml"])

    cron = kinds["CronJob"]["spec"]
    need(cron["concurrencyPolicy"] == "Forbid", "concurrencyPolicy must be Forbid")
    job = cron["jobTemplate"]["spec"]
    need(job["backoffLimit"] == 0, "backoffLimit must be 0 (kanon's exit code decides retries)")
    pod = job["template"]["spec"]
    need(pod["restartPolicy"] == "Never", "restartPolicy must be Never")
    need(pod["securityContext"]["runAsNonRoot"] is True, "the pod must run as non-root")
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    need(env.get("KANON_JOB") == "/etc/kanon/job.toml", "KANON_JOB must point at the ConfigMap mount")
    need("KANON_OUTPUT" in env, "KANON_OUTPUT is not set")
    secrets = [s["secretRef"]["name"] for s in container["envFrom"] if "secretRef" in s]
    need(secrets == ["kanon-s3"], "credentials must come from the Secret kanon-s3 through envFrom")
    res = container["resources"]
    need({"cpu", "memory"} <= set(res["requests"]), "requests need cpu and memory")
    need("memory" in res["limits"], "a memory limit is needed")
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    need(mounts["job"]["mountPath"] == "/etc/kanon" and mounts["job"]["readOnly"], "job mount")
    volumes = {v["name"]: v for v in pod["volumes"]}
    need(volumes["job"]["configMap"]["name"] == config_map["metadata"]["name"], "job volume")

    secret = yaml.safe_load((DEPLOY / "k8s/secret.example.yaml").read_text())
    need(secret["metadata"]["name"] == "kanon-s3", "the example Secret must be kanon-s3")
    need({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(secret["stringData"]), "secret keys")


def check_airflow() -> None:
    source = (DEPLOY / "airflow/kanon_release_dag.py").read_text()
    tree = ast.parse(source)
    calls = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    need({"DAG", "KubernetesPodOperator", "BashOperator"} <= calls, f"DAG calls {sorted(calls)}")
    need("max_active_runs=1" in source, "the DAG must run one release at a time")
    need('"kanon-job"' in source, "the BashOperator must run kanon-job")


def check_systemd() -> None:
    for name, sections in {
        "kanon-release.service": {"Service": ["Type", "ExecStart", "EnvironmentFile", "User"]},
        "kanon-release.timer": {"Timer": ["OnCalendar", "Persistent"]},
    }.items():
        ini = configparser.ConfigParser(strict=False, interpolation=None)
        ini.optionxform = str
        ini.read_string((DEPLOY / "systemd" / name).read_text())
        for section, keys in sections.items():
            for key in keys:
                need(ini.has_option(section, key), f"{name}: [{section}] {key} is missing")
    cron = (DEPLOY / "systemd/kanon.crontab").read_text()
    need("flock -n" in cron and "kanon-job" in cron, "the crontab must run kanon-job under flock")


def main() -> None:
    if len(sys.argv) != 2:
        fail("usage: python3 deploy/check.py OUT_DIR")
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    check_k8s(out)
    check_airflow()
    check_systemd()
    print("deploy examples ok")


if __name__ == "__main__":
    main()
