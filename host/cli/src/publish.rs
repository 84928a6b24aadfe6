//! `skillhost publish PATH oci://REGISTRY/REPO:TAG`: a skill folder (as one tar+gzip
//! layer) or a component (in the layout wasm-pkg-tools use) pushed to an OCI registry,
//! signed in the cosign format with `--sign KEY`; and `skillhost key generate`, a P-256
//! key pair for signing.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use skillhost::source::address::SourceAddr;
use skillhost::source::oci::{self, PushMeta};
use skillhost::source::{Artifact, sign};
use skillhost_package::{SizeLimits, Snapshot};

use crate::app::App;
use crate::sources::SourceArgs;

/// The options of `publish`.
#[derive(clap::Args)]
#[command(after_help = "A folder (SKILL.md, skill.toml, scripts, server code) is one tar+gzip layer of
media type application/vnd.skillhost.skill.folder.v1.tar+gzip; a .wasm component uses
the layout wasm-pkg-tools (wkg) use, so wkg can pull it and skillhost installs what wkg
published. --sign stores a cosign-format signature beside it (cosign verify --key reads
it). Prints the pinned address (oci://…@sha256:…).

Examples:
  skillhost key generate --out team              team.key (secret) and team.pub
  skillhost publish skills/csv-report oci://registry.example.com/team/csv-report:1.0 --sign team.key")]
pub struct PublishArgs {
    /// The skill: a folder (SKILL.md, skill.toml, scripts, server code) or a .wasm file.
    path: PathBuf,
    /// Where: oci://REGISTRY/REPO:TAG.
    target: String,
    /// Sign it with this private key (PEM: `skillhost key generate`, or cosign's own,
    /// opened with COSIGN_PASSWORD); the signature is stored beside it, as cosign does.
    #[arg(long, value_name = "KEY")]
    sign: Option<PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sources: SourceArgs,
}

/// Push the skill and print its pinned address.
pub async fn run(app: &App, args: PublishArgs) -> Result<ExitCode> {
    let SourceAddr::Oci(addr) = args.target.parse()? else {
        bail!("publish goes to an OCI registry: oci://REGISTRY/REPO:TAG (not {})", args.target);
    };
    let key = args.sign.as_deref().map(read_private_key).transpose()?;
    let snapshot = Snapshot::read(&args.path, &SizeLimits::default())?;
    let meta = meta_of(&snapshot, &args.path)?;
    let artifact = match snapshot {
        Snapshot::Wasm { bytes, .. } => Artifact::Component(bytes),
        Snapshot::Folder { files, .. } => Artifact::Folder(files),
    };
    let host = app.host()?;
    let options = args.sources.options(app, &host)?;
    let digest = oci::push(&artifact, &meta, &addr, &options, key.as_ref()).await?;
    let pinned = SourceAddr::Oci(addr.clone()).pinned(&digest);
    let signed_by = key.as_ref().map(|k| k.public().fingerprint().to_owned());
    if args.json {
        outln!(
            "{}",
            serde_json::json!({"name": meta.name, "reference": addr.to_string(), "pinned": pinned.to_string(), "digest": digest, "signed_by": signed_by})
        );
    } else {
        let version = if meta.version.is_empty() { String::new() } else { format!(" {}", meta.version) };
        errln!("published `{}`{version} to {addr}", meta.name);
        outln!("{pinned}");
        if let Some(fingerprint) = signed_by {
            errln!("signed with key {fingerprint}; install with `skillhost install {addr} --verify KEY.pub`");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Name, version and description for the artifact's config: the manifest's, else the
/// SKILL.md frontmatter's.
fn meta_of(snapshot: &Snapshot, path: &Path) -> Result<PushMeta> {
    if let Some(source) = snapshot.source()? {
        let manifest = source.manifest;
        return Ok(PushMeta { name: manifest.name.to_string(), version: manifest.version, description: manifest.description });
    }
    let text = snapshot.skill_md()?.with_context(|| format!("{}: neither skill.toml nor SKILL.md; it is not a skill", path.display()))?;
    let frontmatter = skillhost::registry::parse_skill_md(&text, path)?;
    let version = frontmatter.metadata.get("version").cloned().unwrap_or_default();
    Ok(PushMeta { name: frontmatter.name, version, description: frontmatter.description })
}

/// The private key at `path`, opened with COSIGN_PASSWORD when it is encrypted.
fn read_private_key(path: &Path) -> Result<sign::PrivateKey> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read key {}", path.display()))?;
    let password = std::env::var("COSIGN_PASSWORD").ok();
    Ok(sign::PrivateKey::from_pem(&text, password.as_deref(), path)?)
}

/// `skillhost key ...`
#[derive(clap::Subcommand)]
pub enum KeyCommand {
    /// Make a P-256 key pair for `publish --sign`: PREFIX.key (private, 0600) and
    /// PREFIX.pub (for `install --verify`); neither is overwritten
    Generate {
        /// Where, without the extension.
        #[arg(long, default_value = "skillhost")]
        out: PathBuf,
    },
}

/// Generate a key pair.
pub fn key(command: KeyCommand) -> Result<ExitCode> {
    let KeyCommand::Generate { out } = command;
    let key = sign::PrivateKey::generate();
    let private = out.with_extension("key");
    let public = out.with_extension("pub");
    write_new(&public, key.public().to_pem().as_bytes(), 0o644)?;
    if let Err(e) = write_new(&private, key.to_pem().as_bytes(), 0o600) {
        let _ = std::fs::remove_file(&public);
        return Err(e);
    }
    errln!("wrote {} (keep it secret) and {}", private.display(), public.display());
    outln!("{}", key.public().fingerprint());
    Ok(ExitCode::SUCCESS)
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("cannot create {} (an existing key is never overwritten)", path.display()))?;
    file.write_all(bytes).with_context(|| format!("cannot write {}", path.display()))
}
