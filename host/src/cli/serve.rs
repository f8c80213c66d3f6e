//! `idem serve`: the multi-tenant HTTP service.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use clap::Args;

use idem::serve::Service;
use idem::serve::config::ServeConfig;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The service's config (listen address, state dir, tenants).
    #[arg(long, required_unless_present = "hash_token")]
    pub config: Option<PathBuf>,
    /// Print the sha256 of the token read from stdin (for token-sha256 in
    /// the config) and exit.
    #[arg(long)]
    pub hash_token: bool,
    /// Compiled-code cache directory (default: $IDEM_CACHE_DIR or ~/.cache/idem).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
}

pub fn serve(a: ServeArgs) -> Result<ExitCode> {
    if a.hash_token {
        return hash_token();
    }
    let path = a.config.ok_or_else(|| anyhow!("--config is required"))?;
    let cfg = ServeConfig::load(&path).map_err(|e| anyhow!(e))?;
    let cache = a.cache_dir.or_else(idem::sandbox::default_cache_dir);
    let svc = Arc::new(Service::new(&cfg, cache).map_err(|e| anyhow!(e))?);
    // Runs execute on these threads, never on the runtime below.
    let workers = svc.start_workers(cfg.workers);
    // The HTTP side (accepting, connections, handlers, their blocking
    // work on its blocking threads) on the process's one runtime, which
    // the runs' table I/O shares.
    let rt = idem::runtime::shared()?;
    rt.block_on(idem::serve::conn::serve(svc.clone(), &cfg))?;
    for w in workers {
        let _ = w.join();
    }
    eprintln!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// `--hash-token`: the sha256 (hex) of the token on stdin's first line.
fn hash_token() -> Result<ExitCode> {
    use sha2::Digest as _;
    let mut token = String::new();
    std::io::stdin().read_line(&mut token)?;
    let token = token.trim_end_matches(['\n', '\r']);
    if token.is_empty() {
        bail!("no token on stdin");
    }
    println!("{}", hex::encode(sha2::Sha256::digest(token.as_bytes())));
    Ok(ExitCode::SUCCESS)
}
