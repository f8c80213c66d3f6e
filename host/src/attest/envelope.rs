//! The DSSE envelope (secure-systems-lab/dsse v1.0):
//! `{"payload": <base64>, "payloadType": <type>, "signatures": [{"keyid":
//! <id>, "sig": <base64>}]}`, each signature over PAE(type, payload).

use base64::Engine as _;
use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD as B64};
use serde::{Deserialize, Serialize};

use super::keys::{PublicKey, SigningKey};
use crate::manifest::canonical_json;

/// An in-toto Statement (what an idem manifest is).
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// Signatures looked at in one envelope (one per key; a few keys at most).
const MAX_SIGNATURES: usize = 16;

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    payload: String,
    payload_type: String,
    signatures: Vec<Sig>,
}

#[derive(Serialize, Deserialize)]
struct Sig {
    #[serde(default)]
    keyid: String,
    sig: String,
}

/// DSSE's pre-authentication encoding: what is signed.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// The envelope of the in-toto `payload` signed by `key`, as RFC 8785
/// JSON (one key and one payload always make the same bytes: Ed25519
/// signatures are deterministic).
pub fn sign(key: &SigningKey, payload: &[u8]) -> Vec<u8> {
    let sig = key.sign(&pae(PAYLOAD_TYPE, payload));
    canonical_json(&Envelope {
        payload: B64.encode(payload),
        payload_type: PAYLOAD_TYPE.into(),
        signatures: vec![Sig {
            keyid: key.keyid().into(),
            sig: B64.encode(sig),
        }],
    })
}

/// A checked envelope's contents.
#[derive(Debug)]
pub struct Opened {
    /// The payload (a manifest's bytes).
    pub payload: Vec<u8>,
    /// The key that signed it, when keys were given; else `None`.
    pub keyid: Option<String>,
}

/// The payload of the envelope `bytes` when one of its signatures is by
/// one of `keys` (matched by key id, as securesystemslib matches them) and
/// verifies; with no keys, the payload unchecked. `Err` says why not.
pub fn open(bytes: &[u8], keys: &[PublicKey]) -> Result<Opened, String> {
    let env: Envelope =
        serde_json::from_slice(bytes).map_err(|e| format!("not a DSSE envelope: {e}"))?;
    if env.payload_type != PAYLOAD_TYPE {
        return Err(format!(
            "the envelope's payloadType is `{}`, not {PAYLOAD_TYPE}",
            crate::text::clip_str(&env.payload_type, 80)
        ));
    }
    let payload =
        decode(&env.payload).map_err(|e| format!("the envelope's payload is not base64: {e}"))?;
    if keys.is_empty() {
        return Ok(Opened {
            payload,
            keyid: None,
        });
    }
    let message = pae(&env.payload_type, &payload);
    let mut altered = None;
    for s in env.signatures.iter().take(MAX_SIGNATURES) {
        let sig = decode(&s.sig).unwrap_or_default();
        // A key id names the key (as securesystemslib matches them); a
        // signature without one (DSSE makes it optional) is tried with
        // every key given.
        let candidates = keys
            .iter()
            .filter(|k| s.keyid.is_empty() || k.keyid() == s.keyid);
        for key in candidates {
            if key.verifies(&message, &sig) {
                return Ok(Opened {
                    payload,
                    keyid: Some(key.keyid().to_string()),
                });
            }
            if !s.keyid.is_empty() {
                altered.get_or_insert(format!(
                    "its signature by key {} ({}) does not verify: the envelope was altered after it was signed",
                    short(&s.keyid),
                    key.source
                ));
            }
        }
    }
    if let Some(why) = altered {
        return Err(why);
    }
    let by: Vec<String> = env
        .signatures
        .iter()
        .take(MAX_SIGNATURES)
        .map(|s| short(&s.keyid))
        .collect();
    let given: Vec<String> = keys.iter().map(|k| short(k.keyid())).collect();
    Err(format!(
        "it is signed by key {} and by none of the keys given ({}): another key signed it, or its key id was edited",
        if by.is_empty() {
            "(none)".into()
        } else {
            by.join(", ")
        },
        given.join(", ")
    ))
}

/// Base64 in either alphabet, padded or not (DSSE allows all four).
fn decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    let lenient =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    GeneralPurpose::new(&alphabet::STANDARD, lenient)
        .decode(text)
        .or_else(|_| GeneralPurpose::new(&alphabet::URL_SAFE, lenient).decode(text))
}

/// A key id as messages show it: its first 16 hex digits.
pub fn short(keyid: &str) -> String {
    keyid.chars().take(16).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attest::KeyPair;

    #[test]
    fn pae_is_the_specs() {
        // The DSSE spec's example.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        );
    }

    fn pair() -> (SigningKey, PublicKey) {
        let p = KeyPair::generate().unwrap();
        (
            SigningKey::from_pem(&p.private_pem, "k").unwrap(),
            PublicKey::from_pem(&p.public_pem, "pub.pem").unwrap(),
        )
    }

    #[test]
    fn an_envelope_opens_with_its_key_only_and_not_once_edited() {
        let (sk, pk) = pair();
        let (_, other) = pair();
        let env = sign(&sk, b"{\"a\":1}");
        assert_eq!(env, sign(&sk, b"{\"a\":1}"), "deterministic");
        let o = open(&env, std::slice::from_ref(&pk)).unwrap();
        assert_eq!(o.payload, b"{\"a\":1}");
        assert_eq!(o.keyid.as_deref(), Some(pk.keyid()));
        let e = open(&env, std::slice::from_ref(&other)).unwrap_err();
        assert!(e.contains("by none of the keys given"), "{e}");
        // A payload edited under the signature.
        let mut v: serde_json::Value = serde_json::from_slice(&env).unwrap();
        v["payload"] = B64.encode(b"{\"a\":2}").into();
        let edited = serde_json::to_vec(&v).unwrap();
        let e = open(&edited, std::slice::from_ref(&pk)).unwrap_err();
        assert!(e.contains("does not verify"), "{e}");
        // Another payload type under the same signature.
        let mut v: serde_json::Value = serde_json::from_slice(&env).unwrap();
        v["payloadType"] = "text/plain".into();
        let e = open(&serde_json::to_vec(&v).unwrap(), &[pk]).unwrap_err();
        assert!(e.contains("payloadType"), "{e}");
        assert!(
            open(b"[]", &[])
                .unwrap_err()
                .contains("not a DSSE envelope")
        );
    }

    #[test]
    fn a_signature_without_key_id_and_url_safe_unpadded_base64_open() {
        let (sk, pk) = pair();
        let (other_sk, other) = pair();
        let payload = b"{\"bytes\":\"\xfb\xff\"}";
        let mut v: serde_json::Value = serde_json::from_slice(&sign(&sk, payload)).unwrap();
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        v["payload"] = url.encode(payload).into();
        let sig = B64
            .decode(v["signatures"][0]["sig"].as_str().unwrap())
            .unwrap();
        // Another key's signature first: tried, then the right one.
        let first = other_sk.sign(&pae(PAYLOAD_TYPE, payload));
        v["signatures"] = serde_json::json!([
            {"keyid": "", "sig": url.encode(first)},
            {"sig": url.encode(sig)},
        ]);
        let bytes = serde_json::to_vec(&v).unwrap();
        let o = open(&bytes, std::slice::from_ref(&pk)).unwrap();
        assert_eq!(o.payload, payload);
        assert_eq!(o.keyid.as_deref(), Some(pk.keyid()));
        assert_eq!(
            open(&bytes, std::slice::from_ref(&other))
                .unwrap()
                .keyid
                .as_deref(),
            Some(other.keyid())
        );
        let (_, third) = pair();
        assert!(open(&bytes, &[third]).is_err());
    }
}
