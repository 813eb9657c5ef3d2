"""The test cluster's certificates, kubeconfig and audit policy (openssl, stdlib)."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

from cluster_build import ClusterError


def openssl(*args: str, cwd: Path) -> None:
    if shutil.which("openssl") is None:
        raise ClusterError("openssl is not installed (needed for the cluster's certificates)")
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClusterError(f"openssl {args[0]} failed: {proc.stderr.strip()}")


def make_pki(pki: Path) -> None:
    """A CA, the API server's serving certificate, an admin client certificate, SA keys."""
    if (pki / ".done").exists():
        return
    pki.mkdir(parents=True, exist_ok=True)
    days = "3650"
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.crt", "-days", days, "-subj", "/CN=draco-test-ca", cwd=pki)
    (pki / "serving.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,IP:10.0.0.1\nextendedKeyUsage=serverAuth\n"
    )
    (pki / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subject, ext in (
        ("apiserver", "/CN=kube-apiserver", "serving.ext"),
        ("admin", "/O=system:masters/CN=draco-admin", "client.ext"),
    ):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                f"{name}.csr", "-subj", subject, cwd=pki)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.crt", "-days", days, "-extfile", ext, cwd=pki)
    openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    (pki / ".done").write_text("")


def write_kubeconfig(path: Path, pki: Path, port: int) -> None:
    def b64(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: draco-test
  cluster:
    server: https://127.0.0.1:{port}
    certificate-authority-data: {b64('ca.crt')}
users:
- name: draco-admin
  user:
    client-certificate-data: {b64('admin.crt')}
    client-key-data: {b64('admin.key')}
contexts:
- name: draco-test
  context: {{cluster: draco-test, user: draco-admin}}
current-context: draco-test
"""
    )


AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ["/readyz*", "/livez*", "/healthz*", "/version", "/openapi*", "/api*"]
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
  verbs: [get, update]
- level: Metadata
"""
