"""The plugin's side of go-plugin's AutoMTLS: a fresh self-signed
certificate for every process, shaped like the one go-plugin's own
generateCert makes (CN and DNS name "localhost", a CA usable for client
and server auth), so the host, which puts it in its RootCAs, accepts it.
Made with the `cryptography` package (Debian's python3-cryptography)."""

from __future__ import annotations

import dataclasses
import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# go-plugin's validity: 262980 hours (30 years).
_VALIDITY = datetime.timedelta(hours=262980)


@dataclasses.dataclass(frozen=True)
class ServerCert:
    cert_pem: bytes
    key_pem: bytes
    #: The certificate, DER: go-plugin's handshake line carries it in base64.
    der: bytes


def new_server_cert() -> ServerCert:
    """An ECDSA P-256 key and a self-signed certificate for "localhost"."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "localhost"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "agentkernel"),
        ]
    )
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(seconds=30))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=True,
                key_agreement=True,
                key_cert_sign=True,
                content_commitment=False,
                data_encipherment=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return ServerCert(
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        der=cert.public_bytes(serialization.Encoding.DER),
    )
