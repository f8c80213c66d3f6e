"""The independent side of idem's signed attestations: securesystemslib's
DSSE support (PyPI; it shares no code with idem) and pyca/cryptography's
Ed25519 keys, in the PEM files openssl writes.

  dsse_check.py keygen PRIVATE.pem PUBLIC.pem
      a key pair made by cryptography (PKCS#8 / SPKI PEM, as `openssl
      genpkey -algorithm ed25519` and `openssl pkey -pubout` write them)
  dsse_check.py verify ENVELOPE.json PUBLIC.pem
      verify idem's envelope; print {"keyid", "payloadSha256", "payloadType"}
      (exit 1 with the reason when it does not verify)
  dsse_check.py sign MANIFEST.json PRIVATE.pem OUT.json
      wrap a manifest in an envelope signed by securesystemslib

The key id is computed here, independently: the sha256 of the public key's
SubjectPublicKeyInfo DER, in hex.
"""

import hashlib
import json
import sys

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.dsse import Envelope
from securesystemslib.signer import CryptoSigner, SSlibKey

PAYLOAD_TYPE = "application/vnd.in-toto+json"


def keyid(public_key):
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()


def sslib_key(public_key):
    return SSlibKey.from_crypto(public_key, keyid=keyid(public_key), scheme="ed25519")


def keygen(private_path, public_path):
    key = Ed25519PrivateKey.generate()
    with open(private_path, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    with open(public_path, "wb") as f:
        f.write(
            key.public_key().public_bytes(
                serialization.Encoding.PEM,
                serialization.PublicFormat.SubjectPublicKeyInfo,
            )
        )
    print(json.dumps({"keyid": keyid(key.public_key())}))


def verify(envelope_path, public_path):
    with open(public_path, "rb") as f:
        public = serialization.load_pem_public_key(f.read())
    with open(envelope_path) as f:
        env = Envelope.from_dict(json.load(f))
    try:
        accepted = env.verify([sslib_key(public)], 1)
    except Exception as e:  # securesystemslib's VerificationError
        print(f"does not verify: {e}", file=sys.stderr)
        sys.exit(1)
    print(
        json.dumps(
            {
                "keyid": sorted(accepted)[0],
                "payloadType": env.payload_type,
                "payloadSha256": hashlib.sha256(env.payload).hexdigest(),
            }
        )
    )


def sign(manifest_path, private_path, out_path):
    with open(private_path, "rb") as f:
        private = serialization.load_pem_private_key(f.read(), password=None)
    with open(manifest_path, "rb") as f:
        payload = f.read()
    signer = CryptoSigner(private, sslib_key(private.public_key()))
    env = Envelope(payload, PAYLOAD_TYPE, {})
    env.sign(signer)
    with open(out_path, "w") as f:
        json.dump(env.to_dict(), f)


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    {"keygen": keygen, "verify": verify, "sign": sign}[cmd](*args)
