//! What `install`, `publish`, `sync` and `outdated` share for remote sources: the fetch
//! options (caps, progress on a terminal, registry credentials, the staging directory),
//! the keys signatures are verified with (`--verify` and `[[sources.verify]]` of the host
//! config, [`skillhost::HostConfig::verify_keys`]) and where `skills.lock` is.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use skillhost::Host;
use skillhost::source::{Caps, FetchOptions, FetchProgress, KeyPolicy, lock, oci, sign};

use crate::app::App;

/// The options every remote-source command takes.
#[derive(clap::Args, Clone, Debug)]
pub struct SourceArgs {
    /// A public key (PEM, as `cosign generate-key-pair` or `skillhost key generate`
    /// writes) one of which must have signed an OCI skill; repeatable.
    #[arg(long, value_name = "KEY.pub")]
    verify: Vec<PathBuf>,
    /// The lockfile to keep [default: SKILLHOST_LOCK, else DATA_DIR/skills.lock, beside
    /// the user layer].
    #[arg(long, value_name = "FILE")]
    lock: Option<PathBuf>,
    /// Allow plain HTTP to a registry or index that is not on loopback (unprotected:
    /// anyone on the path can change what you download).
    #[arg(long)]
    allow_http: bool,
    /// Credentials for an OCI registry from a skillhost secret holding `USER:PASSWORD`
    /// (`REGISTRY=SECRET`, repeatable) [default: the docker config file,
    /// ~/.docker/config.json, else anonymous].
    #[arg(long, value_name = "REGISTRY=SECRET")]
    registry_secret: Vec<String>,
    /// Longest a whole download may take.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = crate::app::parse_duration)]
    timeout: Duration,
}

impl SourceArgs {
    /// The defaults, with `lock` as the lockfile (`serve` in team mode).
    pub fn for_lock(lock: PathBuf) -> Self {
        Self { verify: Vec::new(), lock: Some(lock), allow_http: false, registry_secret: Vec::new(), timeout: Duration::from_secs(120) }
    }

    /// Where the lockfile is.
    pub fn lock_path(&self, app: &App) -> PathBuf {
        self.lock.clone().unwrap_or_else(|| default_lock(app))
    }

    /// The fetch options: caps, progress, credentials, staging under the data dir.
    pub fn options(&self, app: &App, host: &Host) -> Result<FetchOptions> {
        let caps = app.config()?.source_caps(Caps { timeout: self.timeout, allow_http: self.allow_http, ..Caps::default() })?;
        let mut auth = oci::Auth::docker_default().context("cannot read the docker config file for registry credentials")?;
        for pair in &self.registry_secret {
            let (registry, secret) = pair.split_once('=').with_context(|| format!("--registry-secret `{pair}` is not REGISTRY=SECRET"))?;
            let value = host
                .secrets()
                .secret(secret)
                .with_context(|| format!("secret `{secret}` is not set; set it with `skillhost secret set {secret}` (USER:PASSWORD)"))?;
            let (user, password) = value.trim_end().split_once(':').with_context(|| format!("secret `{secret}` is not USER:PASSWORD"))?;
            auth.insert(registry, user, password);
        }
        let staging = app.data_dir.join("staging");
        Ok(FetchOptions { caps, progress: Arc::new(Bar::default()), verify_keys: Vec::new(), auth, staging })
    }

    /// The keys signatures must verify with: `--verify` for every OCI source, and the
    /// host config's rules for the addresses under their prefix.
    pub fn keys(&self, app: &App) -> Result<KeyPolicy> {
        let mut keys = KeyPolicy::default();
        for path in &self.verify {
            keys.always(read_public_key(path)?);
        }
        app.config()?.verify_keys(&mut keys)?;
        Ok(keys)
    }
}

/// The lockfile when no `--lock` is given: `SKILLHOST_LOCK`, else `DATA_DIR/skills.lock`.
pub fn default_lock(app: &App) -> PathBuf {
    std::env::var_os("SKILLHOST_LOCK").map(PathBuf::from).unwrap_or_else(|| app.data_dir.join(lock::LOCK_FILE))
}

/// The public key at `path`.
pub fn read_public_key(path: &Path) -> Result<sign::PublicKey> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read key {}", path.display()))?;
    Ok(sign::PublicKey::from_pem(&text, path)?)
}

/// Download progress on stderr when it is a terminal (hidden otherwise).
#[derive(Default)]
struct Bar {
    bar: parking_lot::Mutex<Option<(String, indicatif::ProgressBar)>>,
}

impl FetchProgress for Bar {
    fn bytes(&self, what: &str, done: u64, total: Option<u64>) {
        let mut slot = self.bar.lock();
        if slot.as_ref().is_none_or(|(current, _)| current != what) {
            if let Some((_, old)) = slot.take() {
                old.finish_and_clear();
            }
            let bar = indicatif::ProgressBar::new(total.unwrap_or(0));
            let template = if total.is_some() { "{msg} {bytes}/{total_bytes} [{elapsed}]" } else { "{spinner} {msg} {bytes} [{elapsed}]" };
            bar.set_style(indicatif::ProgressStyle::with_template(template).expect("valid template"));
            bar.set_message(format!("downloading {}", skillhost::text::one_line(what, 80)));
            *slot = Some((what.to_owned(), bar));
        }
        if let Some((_, bar)) = slot.as_ref() {
            bar.set_position(done);
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if let Some((_, bar)) = self.bar.lock().take() {
            bar.finish_and_clear();
        }
    }
}
