"""Throwaway PKI: CAs, serving certificates, client certificates, service-account keys."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=30)


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        cert.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        key.chmod(0o600)
        return cert, key


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


_SKEW = datetime.timedelta(minutes=5)


def _now() -> datetime.datetime:
    """A few minutes ago: certificates start early, for clocks a little behind ours."""
    return datetime.datetime.now(datetime.UTC) - _SKEW


def make_ca(
    common_name: str, validity: datetime.timedelta = _VALIDITY
) -> tuple[KeyPair, ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed CA valid from a few minutes ago (clock skew) for `validity` from now."""
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_now() + _SKEW + validity)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
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
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)), key, cert


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    sans: list[x509.GeneralName] | None = None,
    not_after: datetime.datetime | None = None,
) -> KeyPair:
    key = _key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(not_after or _now() + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        # Which CA key signed it, for verifiers holding several CAs (during a rotation).
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def serving_cert(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    hosts: tuple[str, ...] = (),
    not_after: datetime.datetime | None = None,
) -> KeyPair:
    """A server certificate for localhost, 127.0.0.1 and `hosts` (names or IP addresses),
    valid until `not_after` (default: 30 days)."""
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    return _leaf(
        ca_key,
        ca_cert,
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "127.0.0.1")]),
        ExtendedKeyUsageOID.SERVER_AUTH,
        sans,
        not_after,
    )


def client_cert(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    user: str,
    groups: tuple[str, ...] = (),
) -> KeyPair:
    """A client certificate: CN is the user name, O entries are the groups."""
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    return _leaf(ca_key, ca_cert, x509.Name(attrs), ExtendedKeyUsageOID.CLIENT_AUTH)


def service_account_keys() -> tuple[bytes, bytes]:
    """(private key PEM, public key PEM) for signing service-account tokens."""
    key = _key()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _key_pem(key), public


# -- reading certificates back ------------------------------------------------------------


class CertificateError(ValueError):
    """PEM data that is not what it should be (no certificate, no key, a foreign key type)."""


def load_certificates(pem: bytes) -> list[x509.Certificate]:
    """Every certificate of a PEM bundle, in order."""
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise CertificateError(f"not a PEM certificate bundle: {exc}") from None
    return list(certs)


def load_private_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(f"not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertificateError(f"an {type(key).__name__}, not an EC key")
    return key


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex()


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """`ca` signed `cert` (names and signature checked)."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def key_matches(key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> bool:
    def spki(public: object) -> bytes:
        assert isinstance(public, ec.EllipticCurvePublicKey)
        return public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    public = cert.public_key()
    return isinstance(public, ec.EllipticCurvePublicKey) and spki(public) == spki(key.public_key())


def subject_names(cert: x509.Certificate) -> frozenset[str]:
    """The DNS names and IP addresses of a certificate's subjectAltName."""
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return frozenset()
    ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    return frozenset(sans.get_values_for_type(x509.DNSName)) | ips


class ServerTLS:
    """A server's TLS context whose certificate can be replaced while it serves: new
    handshakes get the new certificate, connections already open keep theirs."""

    def __init__(self, directory: Path) -> None:
        import ssl

        self.context = ssl.create_default_context(purpose=ssl.Purpose.CLIENT_AUTH)
        self._directory = directory
        self._loaded: KeyPair | None = None
        self._count = 0
        self._previous: tuple[Path, Path] | None = None

    @property
    def loaded(self) -> KeyPair | None:
        return self._loaded

    def load(self, pair: KeyPair) -> tuple[Path, Path]:
        """Load a certificate and key (PEM) into the context; the files it was loaded from
        (kept: a server that reads them at start, like kopf's, finds them unchanged)."""
        self._count += 1
        cert, key = pair.write(self._directory, f"serving-{self._count}")
        self.context.load_cert_chain(str(cert), str(key))
        self._loaded = pair
        if self._previous is not None:  # the first pair stays, the ones between go
            for path in self._previous:
                path.unlink(missing_ok=True)
        self._previous = (cert, key) if self._count > 1 else None
        return cert, key
