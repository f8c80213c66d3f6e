//! `idem keygen`: a new Ed25519 key pair for signing manifests, as the
//! PEM files `openssl genpkey -algorithm ed25519` and `openssl pkey
//! -pubout` write.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use serde_json::json;

use super::Out;

#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// Where the private key goes (PKCS#8 PEM, readable by you only); the
    /// public key goes beside it as `<name>.pub.pem`.
    #[arg(long, default_value = "idem-signing.pem")]
    pub out: PathBuf,
}

pub fn keygen(a: KeygenArgs, out: Out) -> Result<ExitCode> {
    let public = public_path(&a.out);
    for p in [&a.out, &public] {
        if p.exists() {
            bail!(
                "{} exists: idem keygen never overwrites a key (move it away, or pass --out NEW.pem)",
                p.display()
            );
        }
    }
    let pair = idem::attest::KeyPair::generate()?;
    write_new(&a.out, pair.private_pem.as_bytes(), 0o600)?;
    write_new(&public, pair.public_pem.as_bytes(), 0o644)?;
    out.emit(
        json!({"privateKey": a.out, "publicKey": public, "keyid": pair.keyid}),
        || {
            println!("private key: {} (keep it secret)", a.out.display());
            println!("public key:  {} (give it to verifiers)", public.display());
            println!("key id:      {}", pair.keyid);
            println!(
                "sign with:   idem run ... --sign-key {}\ncheck with:  idem audit TABLE --key {}",
                a.out.display(),
                public.display()
            );
        },
    );
    Ok(ExitCode::SUCCESS)
}

/// `KEY.pem` -> `KEY.pub.pem`.
fn public_path(private: &std::path::Path) -> PathBuf {
    let stem = private
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "idem-signing".into());
    private.with_file_name(format!("{stem}.pub.pem"))
}

/// Create `path` (never replacing a file) with `mode` and `bytes`.
fn write_new(path: &std::path::Path, bytes: &[u8], mode: u32) -> Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut f = o
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}
