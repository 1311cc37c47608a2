"""A daily kanon release from Airflow (deploy/README.md).

Two forms of the same task; keep the one that fits your Airflow:

- ``kanon_release_pod``: the kanon image on Kubernetes
  (KubernetesPodOperator), the job file from the ConfigMap ``kanon-job`` and
  S3 credentials from the Secret ``kanon-s3``, as deploy/k8s/cronjob.yaml;
- ``kanon_release_bash``: the ``kanon`` binary on the Airflow worker
  (BashOperator) through the same entry point script.

kanon's exit code tells Airflow what happened (deploy/README.md): 0 is a
verified release, 2 a bad job or input, 3 an unsatisfiable privacy model,
4 a storage failure worth a retry, 5 a release already there. Only 4 is
retried here, by ``retries`` on an I/O failure; anything else fails the task
and nothing is published (kanon writes a release only after verifying it).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from kubernetes.client import models as k8s

RELEASE = "s3://lake/releases/adult/release_date={{ ds }}/"

with DAG(
    dag_id="kanon_adult_release",
    schedule="30 2 * * *",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 0},
    tags=["kanon", "anonymisation"],
) as dag:
    kanon_release_pod = KubernetesPodOperator(
        task_id="kanon_release_pod",
        name="kanon-adult-release",
        image="registry.example.com/kanon:latest",
        # The image's entry point is kanon-job (deploy/entrypoint.sh).
        env_vars={
            "KANON_JOB": "/etc/kanon/job.toml",
            "KANON_OUTPUT": RELEASE,
            "KANON_TIMEOUT": "6000",
        },
        env_from=[k8s.V1EnvFromSource(secret_ref=k8s.V1SecretEnvSource(name="kanon-s3"))],
        volumes=[
            k8s.V1Volume(
                name="job",
                config_map=k8s.V1ConfigMapVolumeSource(name="kanon-job"),
            )
        ],
        volume_mounts=[k8s.V1VolumeMount(name="job", mount_path="/etc/kanon", read_only=True)],
        container_resources=k8s.V1ResourceRequirements(
            requests={"cpu": "2", "memory": "1536Mi"},
            limits={"memory": "6Gi"},
        ),
        execution_timeout=timedelta(hours=2),
        get_logs=True,
        on_finish_action="delete_pod",
    )

    kanon_release_bash = BashOperator(
        task_id="kanon_release_bash",
        bash_command="kanon-job",
        env={
            "KANON_JOB": "/etc/kanon/job.toml",
            "KANON_OUTPUT": RELEASE,
            "KANON_TIMEOUT": "6000",
        },
        append_env=True,
        execution_timeout=timedelta(hours=2),
    )
