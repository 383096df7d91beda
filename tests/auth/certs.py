"""Test certificates made on the spot with ``cryptography``: a CA, a server certificate for
``localhost`` / 127.0.0.1 and client certificates (one signed by the CA, one by a stranger CA).
Also a program: ``python -m tests.auth.certs DIR`` writes them as PEM files into DIR (the JVM and
TypeScript auth tests get theirs that way)."""

from __future__ import annotations

import datetime
import ipaddress
import sys
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its key, PEM."""

    cert: bytes
    key: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


class Authority:
    """A throw-away certificate authority."""

    def __init__(self, name: str = "contextengine test CA") -> None:
        self._key = _key()
        self._name = _name(name)
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self._cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, common: str, *, server: bool) -> KeyPair:
        """A leaf certificate: for a server (``localhost``, 127.0.0.1, ::1) or a client."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(ipaddress.ip_address("::1")),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


@dataclass(frozen=True)
class Files:
    """The PEM files of one test PKI."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    #: a client certificate the CA did not sign
    stranger_cert: Path
    stranger_key: Path


def write(directory: Path) -> Files:
    """A fresh CA, server and client certificates written into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = Authority()
    server = ca.issue("localhost", server=True)
    client = ca.issue("test client", server=False)
    stranger = Authority("stranger CA").issue("stranger", server=False)
    files = Files(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        stranger_cert=directory / "stranger.pem",
        stranger_key=directory / "stranger.key",
    )
    files.ca.write_bytes(ca.cert_pem)
    files.server_cert.write_bytes(server.cert)
    files.server_key.write_bytes(server.key)
    files.client_cert.write_bytes(client.cert)
    files.client_key.write_bytes(client.key)
    files.stranger_cert.write_bytes(stranger.cert)
    files.stranger_key.write_bytes(stranger.key)
    return files


if __name__ == "__main__":
    write(Path(sys.argv[1]))
