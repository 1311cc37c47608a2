"""Checks the deploy/ examples without a cluster, Airflow or systemd.

Usage: python3 deploy/check.py OUT_DIR

- deploy/k8s/*.yaml parse, and the CronJob names what deploy/README.md says
  it relies on (Forbid, the ConfigMap volume, the Secret through envFrom,
  resource requests and limits, no retries, non-root);
- the Airflow DAG is valid Python and names both operators and kanon-job;
- the systemd units are INI files with the keys the README relies on;
- the ConfigMap's job.toml is written to OUT_DIR/job.toml, so the caller
  can check it with `kanon anonymize --dry-run`;
- deploy/k8s/distributed.yaml (issue 18) holds a worker Deployment, its
  headless Service, a coordinator Job and its ConfigMap, and names what the
  README's "Distributed runs" relies on: the Service selects the worker pods
  and is headless, the workers run `kanon worker --listen 0.0.0.0:50051`
  behind TCP probes with no credentials, the Job passes `--workers
  dns://SERVICE:PORT` to the entry point without retries, both pods are
  non-root, and the job is block-wise; its job.toml is written to
  OUT_DIR/distributed-job.toml for `kanon anonymize --dry-run` too;
- deploy/k8s/census.yaml (issue 35) holds reader workers with the
  read-only Secret `kanon-s3-read` (and nothing else), their headless
  Service, and a Job running `kanon inspect --workers dns://SERVICE:PORT`
  with the same Secret and no retries; its job.toml is written to
  OUT_DIR/census-job.toml;
- deploy/k8s/scale-out.yaml (issue 35) holds writer workers with the
  Secret `kanon-s3` (and nothing else) and a writable /tmp, their headless
  Service, and a Job running `kanon anonymize --workers dns://SERVICE:PORT`
  with a full-domain job; its job.toml, with its hierarchies, is written to
  OUT_DIR/scale-out-job.toml.

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


def check_distributed(out: pathlib.Path) -> None:
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        try:
            import tomli as tomllib
        except ImportError:
            fail("checking distributed.yaml needs Python 3.11+ (tomllib) or `pip install tomli`")

    name = "distributed.yaml"
    docs = list(yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()))
    kinds = {d["kind"]: d for d in docs if d}
    need(
        len([d for d in docs if d]) == 4 and set(kinds) == {"ConfigMap", "Deployment", "Service", "Job"},
        f"{name} holds {sorted(d['kind'] for d in docs if d)}",
    )

    # The job: block-wise, or the workers would get nothing to do.
    config_map = kinds["ConfigMap"]
    need("job.toml" in config_map["data"], f"{name}: the ConfigMap has no job.toml")
    job_toml = config_map["data"]["job.toml"]
    try:
        spec = tomllib.loads(job_toml)
    except tomllib.TOMLDecodeError as e:
        fail(f"{name}: the ConfigMap's job.toml is not TOML ({e})")
    block_size = spec.get("algorithm", {}).get("block_size")
    need(
        isinstance(block_size, int) and not isinstance(block_size, bool) and block_size > 0,
        f"{name}: the job needs [algorithm] block_size > 0 (its blocks are what the workers cluster)",
    )
    (out / "distributed-job.toml").write_text(job_toml)

    # The workers.
    deployment = kinds["Deployment"]
    need(deployment["metadata"]["name"] == "kanon-worker", f"{name}: the Deployment must be kanon-worker")
    need(deployment["spec"].get("replicas", 1) >= 1, f"{name}: the Deployment needs replicas")
    selector = deployment["spec"]["selector"]["matchLabels"]
    worker_pod = deployment["spec"]["template"]
    pod_labels = worker_pod["metadata"]["labels"]
    need(selector.items() <= pod_labels.items(), f"{name}: the Deployment's selector must match its pod labels")
    worker = worker_pod["spec"]
    need(worker["securityContext"]["runAsNonRoot"] is True, f"{name}: the workers must run as non-root")
    need("terminationGracePeriodSeconds" in worker, f"{name}: the workers need terminationGracePeriodSeconds")
    need(worker.get("automountServiceAccountToken") is False, f"{name}: the workers need no service-account token")
    (container,) = worker["containers"]
    argv = [*container.get("command", []), *container.get("args", [])]
    listen = ["worker", "--listen", "0.0.0.0:50051"]
    need(
        any(argv[i : i + len(listen)] == listen for i in range(len(argv))),
        f"{name}: the worker container must run `kanon worker --listen 0.0.0.0:50051`, not {argv}",
    )
    ports = {p.get("name"): p["containerPort"] for p in container["ports"]}
    need(50051 in ports.values(), f"{name}: the worker container must expose 50051")
    for probe in ("readinessProbe", "livenessProbe"):
        port = container.get(probe, {}).get("tcpSocket", {}).get("port")
        need(port == 50051 or ports.get(port) == 50051, f"{name}: the worker needs a TCP {probe} on 50051")
    res = container["resources"]
    need({"cpu", "memory"} <= set(res["requests"]), f"{name}: worker requests need cpu and memory")
    need("memory" in res["limits"], f"{name}: the workers need a memory limit")
    need(
        not container.get("envFrom")
        and not any("valueFrom" in e for e in container.get("env", []))
        and not any("secret" in v or "projected" in v for v in worker.get("volumes", [])),
        f"{name}: the workers must get no credentials (no envFrom, secret env or Secret volume)",
    )

    # The headless Service the coordinator finds the workers through.
    service = kinds["Service"]
    need(service["spec"].get("clusterIP") == "None", f"{name}: the Service must be headless (clusterIP: None)")
    need(
        service["spec"]["selector"].items() <= pod_labels.items(),
        f"{name}: the Service's selector must match the worker pods' labels",
    )
    service_ports = [p["port"] for p in service["spec"]["ports"]]
    need(50051 in service_ports, f"{name}: the Service must serve port 50051")
    for p in service["spec"]["ports"]:
        target = p.get("targetPort", p["port"])
        need(target == 50051 or ports.get(target) == 50051, f"{name}: the Service must target the workers' 50051")

    # The coordinator.
    job = kinds["Job"]["spec"]
    need(job["backoffLimit"] == 0, f"{name}: backoffLimit must be 0 (kanon's exit code decides retries)")
    pod = job["template"]["spec"]
    need(pod["restartPolicy"] == "Never", f"{name}: restartPolicy must be Never")
    need(pod["securityContext"]["runAsNonRoot"] is True, f"{name}: the coordinator must run as non-root")
    (container,) = pod["containers"]
    need("command" not in container, f"{name}: the coordinator must run the image's entry point (kanon-job)")
    args = container.get("args", [])
    workers = f"dns://{service['metadata']['name']}:50051"
    need(
        any(args[i : i + 2] == ["--workers", workers] for i in range(len(args))),
        f"{name}: the coordinator must pass `--workers {workers}` (the Service's name and port), not {args}",
    )
    for init in pod.get("initContainers", []):
        need(
            service["metadata"]["name"] in " ".join(init.get("command", []) + init.get("args", [])),
            f"{name}: the init container {init['name']} must wait for the Service {service['metadata']['name']}",
        )
    env = {e["name"]: e.get("value") for e in container["env"]}
    need(env.get("KANON_JOB") == "/etc/kanon/job.toml", f"{name}: KANON_JOB must point at the ConfigMap mount")
    need("KANON_OUTPUT" in env, f"{name}: KANON_OUTPUT is not set")
    secrets = [s["secretRef"]["name"] for s in container["envFrom"] if "secretRef" in s]
    need(secrets == ["kanon-s3"], f"{name}: credentials must come from the Secret kanon-s3 through envFrom")
    res = container["resources"]
    need({"cpu", "memory"} <= set(res["requests"]), f"{name}: coordinator requests need cpu and memory")
    need("memory" in res["limits"], f"{name}: the coordinator needs a memory limit")
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    need(mounts["job"]["mountPath"] == "/etc/kanon" and mounts["job"]["readOnly"], f"{name}: job mount")
    volumes = {v["name"]: v for v in pod["volumes"]}
    need(volumes["job"]["configMap"]["name"] == config_map["metadata"]["name"], f"{name}: job volume")


def check_workers(name: str, what: str, kinds: dict, secret: str) -> dict:
    """Checks the Deployment of `kanon worker`s (non-root, the Secret
    `secret` and no other credential, a memory limit) and the headless
    Service over them; returns the workers' container."""
    pod = kinds["Deployment"]["spec"]["template"]
    service = kinds["Service"]
    need(service["spec"].get("clusterIP") == "None", f"{name}: the Service must be headless")
    need(
        service["spec"]["selector"].items() <= pod["metadata"]["labels"].items(),
        f"{name}: the Service must select the {what}",
    )
    spec = pod["spec"]
    need(spec["securityContext"]["runAsNonRoot"] is True, f"{name}: the {what} must run as non-root")
    need(spec.get("automountServiceAccountToken") is False, f"{name}: the {what} need no service-account token")
    (container,) = spec["containers"]
    argv = [*container.get("command", []), *container.get("args", [])]
    need(argv[1:4] == ["worker", "--listen", "0.0.0.0:50051"], f"{name}: the {what} must run `kanon worker`, not {argv}")
    secrets = [e["secretRef"]["name"] for e in container.get("envFrom", []) if "secretRef" in e]
    need(secrets == [secret], f"{name}: the {what} get the Secret {secret} and no other, not {secrets}")
    need(
        not any("valueFrom" in e for e in container.get("env", []))
        and not any("secret" in v or "projected" in v for v in spec.get("volumes", [])),
        f"{name}: the {what} get no other credentials",
    )
    need("memory" in container["resources"]["limits"], f"{name}: the {what} need a memory limit")
    return container


def check_coordinator(name: str, kinds: dict, command: str, secret: str) -> None:
    """Checks the coordinator Job over the workers of `kinds`: `kanon
    COMMAND --workers dns://SERVICE:50051`, no retries, non-root, the
    Secret `secret` only, and the job from the ConfigMap."""
    service = kinds["Service"]
    job = kinds["Job"]["spec"]
    need(job["backoffLimit"] == 0, f"{name}: backoffLimit must be 0")
    pod = job["template"]["spec"]
    need(pod["restartPolicy"] == "Never", f"{name}: restartPolicy must be Never")
    need(pod["securityContext"]["runAsNonRoot"] is True, f"{name}: the coordinator must run as non-root")
    (container,) = pod["containers"]
    args = container["args"]
    workers = f"dns://{service['metadata']['name']}:50051"
    need(args[0] == command, f"{name}: the Job must run `kanon {command}`, not {args}")
    need(
        any(args[i : i + 2] == ["--workers", workers] for i in range(len(args))),
        f"{name}: the Job must pass `--workers {workers}`, not {args}",
    )
    secrets = [e["secretRef"]["name"] for e in container.get("envFrom", []) if "secretRef" in e]
    need(secrets == [secret], f"{name}: the coordinator gets {secret} only, not {secrets}")
    volumes = {v["name"]: v for v in pod["volumes"]}
    need(
        volumes["job"]["configMap"]["name"] == kinds["ConfigMap"]["metadata"]["name"],
        f"{name}: the job volume must be the ConfigMap",
    )


def check_census(out: pathlib.Path) -> None:
    name = "census.yaml"
    docs = [d for d in yaml.safe_load_all((DEPLOY / "k8s/census.yaml").read_text()) if d]
    kinds = {d["kind"]: d for d in docs}
    need(
        sorted(kinds) == ["ConfigMap", "Deployment", "Job", "Service"],
        f"{name} holds {sorted(kinds)}",
    )
    (out / "census-job.toml").write_text(kinds["ConfigMap"]["data"]["job.toml"])
    read_key = "kanon-s3-read"

    check_workers(name, "readers", kinds, read_key)
    check_coordinator(name, kinds, "inspect", read_key)


def check_scale_out(out: pathlib.Path) -> None:
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib

    name = "scale-out.yaml"
    docs = [d for d in yaml.safe_load_all((DEPLOY / "k8s/scale-out.yaml").read_text()) if d]
    kinds = {d["kind"]: d for d in docs}
    need(
        sorted(kinds) == ["ConfigMap", "Deployment", "Job", "Service"],
        f"{name} holds {sorted(kinds)}",
    )
    data = kinds["ConfigMap"]["data"]
    job = tomllib.loads(data["job.toml"])
    need(
        job["algorithm"]["name"] in ("datafly", "incognito"),
        f"{name}: the workers write only for full-domain algorithms, not {job['algorithm']['name']}",
    )
    # The hierarchies mounted at /etc/kanon, written beside the job.
    text = data["job.toml"]
    for key, value in data.items():
        if key.endswith(".csv"):
            (out / f"scale-out-{key}").write_text(value)
            text = text.replace(f"/etc/kanon/{key}", str(out / f"scale-out-{key}"))
    need("/etc/kanon/" not in text, f"{name}: every hierarchy the job names must be in the ConfigMap")
    (out / "scale-out-job.toml").write_text(text)
    key = "kanon-s3"

    container = check_workers(name, "writers", kinds, key)
    mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
    need("/tmp" in mounts, f"{name}: the writers need a writable /tmp to spill to (read-only root)")
    check_coordinator(name, kinds, "anonymize", key)


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
    check_distributed(out)
    check_census(out)
    check_scale_out(out)
    check_airflow()
    check_systemd()
    print("deploy examples ok")


if __name__ == "__main__":
    main()
