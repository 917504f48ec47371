"""Certificates and keys for the local control plane (cryptography-based).

One CA signs the apiserver's serving certificate (SANs localhost, 127.0.0.1
and the first service IP) and the admin client certificate (O=system:masters,
as kubeadm's admin.conf). A separate RSA key pair signs service-account tokens.
All files are PEM, written with mode 0600 for keys.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=365)


class _Pem:
    """A PEM file of a :class:`Pki`, by its name in the directory (a read-only attribute)."""

    def __init__(self, name: str):
        self.name = name

    def __get__(self, pki: Pki, owner: type[Pki] | None = None) -> Path:
        return pki.directory / self.name


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files :func:`ensure_pki` writes into one directory."""

    directory: Path

    ca_cert = _Pem("ca.crt")
    ca_key = _Pem("ca.key")
    serving_cert = _Pem("apiserver.crt")
    serving_key = _Pem("apiserver.key")
    admin_cert = _Pem("admin.crt")
    admin_key = _Pem("admin.key")
    sa_key = _Pem("sa.key")
    sa_pub = _Pem("sa.pub")


def _write(path: Path, data: bytes, secret: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if secret else 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _issue(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    server_names: tuple[str, ...] = (),
    client: bool = False,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
    else:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server_names:
        sans: list[x509.GeneralName] = []
        for name in server_names:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                sans.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def ensure_pki(directory: Path, server_names: tuple[str, ...]) -> Pki:
    """Create the CA, serving, admin and service-account files unless present.

    Returns the :class:`Pki` naming them. Existing files are kept so a
    restarted cluster keeps trusting the kubeconfig already handed out.
    """
    pki = Pki(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if all(p.exists() for p in (pki.ca_cert, pki.serving_cert, pki.admin_cert, pki.sa_key)):
        return pki
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "helmdeck-local-ca")])
    ca_cert = _issue(ca_name, ca_key, ca_name, ca_key, ca=True)

    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv_cert = _issue(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        srv_key, ca_name, ca_key, server_names=server_names,
    )
    adm_key = ec.generate_private_key(ec.SECP256R1())
    adm_cert = _issue(
        x509.Name([
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, "helmdeck-admin"),
        ]),
        adm_key, ca_name, ca_key, client=True,
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    pem = serialization.Encoding.PEM
    _write(pki.ca_cert, ca_cert.public_bytes(pem), secret=False)
    _write(pki.ca_key, _key_pem(ca_key), secret=True)
    _write(pki.serving_cert, srv_cert.public_bytes(pem), secret=False)
    _write(pki.serving_key, _key_pem(srv_key), secret=True)
    _write(pki.admin_cert, adm_cert.public_bytes(pem), secret=False)
    _write(pki.admin_key, _key_pem(adm_key), secret=True)
    _write(pki.sa_key, _key_pem(sa_key), secret=True)
    _write(
        pki.sa_pub,
        sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo),
        secret=False,
    )
    return pki


def write_kubeconfig(path: Path, pki: Pki, server: str, context: str) -> None:
    """Write an admin kubeconfig (mode 0600) for ``server``: context ``context``, the CA and the
    admin client certificate inlined. JSON is valid YAML, so no YAML library is needed."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority-data": b64(pki.ca_cert)}}],
        "users": [{"name": "helmdeck-admin", "user": {
            "client-certificate-data": b64(pki.admin_cert),
            "client-key-data": b64(pki.admin_key),
        }}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": "helmdeck-admin"}}],
        "current-context": context,
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(config, fh, indent=2)


@dataclass(frozen=True)
class ServingTls:
    """A fresh CA and a serving certificate it signed (PEM paths)."""

    ca_cert: Path
    cert: Path
    key: Path


def serving_tls(directory: Path, server_names: tuple[str, ...] = ("localhost", "127.0.0.1")) -> ServingTls:
    """Create a new CA and a serving certificate for ``server_names`` in ``directory`` (e.g. for a
    test registry served over HTTPS); keys mode 0600."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "helmdeck-test-ca")])
    ca_cert = _issue(ca_name, ca_key, ca_name, ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _issue(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, server_names[0])]), key, ca_name, ca_key,
                  server_names=server_names)
    out = ServingTls(directory / "ca.crt", directory / "tls.crt", directory / "tls.key")
    pem = serialization.Encoding.PEM
    _write(out.ca_cert, ca_cert.public_bytes(pem), secret=False)
    _write(out.cert, cert.public_bytes(pem), secret=False)
    _write(out.key, _key_pem(key), secret=True)
    return out
