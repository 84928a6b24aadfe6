//! [`RegistryConfig`]: where the layers and the trust store live, how long the watcher
//! waits, and the size caps of a skill. Every default is documented on its field.

use std::path::PathBuf;
use std::time::Duration;

use skillhost_package::SizeLimits;

/// A skill directory's place in the precedence order. Ordered: `Workspace < User <
/// Bundled < External`, so the smallest layer holding a name wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The project's own skills (`./skills`): shadows everything else.
    Workspace,
    /// Skills the user installed (`skillhost install`): shadows bundled skills.
    User,
    /// Skills shipped with the host.
    Bundled,
    /// Another agent's Agent Skills folder (such as `~/.claude/skills`), served
    /// read-only: each folder's SKILL.md as an instruction-only skill, nothing in it run,
    /// nothing written to it. Shadowed by every other layer.
    External,
}

impl Layer {
    /// `workspace`, `user`, `bundled` or `external`.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Workspace => "workspace",
            Layer::User => "user",
            Layer::Bundled => "bundled",
            Layer::External => "external",
        }
    }
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a [`Registry`](crate::Registry) is set up.
///
/// ```
/// # use skillhost_registry::RegistryConfig;
/// let mut config = RegistryConfig::new("/var/lib/skillhost");
/// config.workspace = Some("skills".into());
/// assert_eq!(config.user, std::path::Path::new("/var/lib/skillhost/user-skills"));
/// ```
#[derive(Clone, Debug)]
pub struct RegistryConfig {
    /// The host's data directory: the trust store is `<data_dir>/trust.db`.
    pub data_dir: PathBuf,
    /// The workspace layer. Default: `None` (no workspace layer).
    pub workspace: Option<PathBuf>,
    /// The user layer, where `install` puts skills; created if missing. Default:
    /// `<data_dir>/user-skills`. Install stages in its parent directory, so keep both on
    /// one file system.
    pub user: PathBuf,
    /// The bundled layer. Default: `None`.
    pub bundled: Option<PathBuf>,
    /// Agent Skills folders of other agents (such as `~/.claude/skills`), each an
    /// [`External`](Layer::External) layer after every other layer, in this order:
    /// read-only, only folders with a SKILL.md, loaded as instruction-only skills whatever
    /// else they hold (a skill.toml, a component, scripts: readable as resources, never
    /// run). Default: empty.
    pub external: Vec<PathBuf>,
    /// Watch the layers and reload changed skills. Default: `true`. A layer directory
    /// that does not exist at start is not watched.
    pub watch: bool,
    /// How long the file system must be quiet before changes are applied. Default:
    /// 150 ms.
    pub debounce: Duration,
    /// Size caps. Default: [`SizeLimits::default`].
    pub limits: SizeLimits,
    /// When [`Registry::open`](crate::Registry::open) loads the skills whose first load
    /// runs their code. Default: [`FirstLoad::Open`].
    pub first_load: FirstLoad,
    /// The audit log each run of a skill's scripts is recorded in
    /// ([`Registry::run`](crate::Registry::run)): its command, exit code or refusal, the
    /// bytes that went in and came out, its duration. Default: `None` (runs are not
    /// audited); the host plugs in its audit log (`Host::open_registry`).
    pub audit: Option<skillhost_store::audit::RunAudit>,
    /// Where the packages skills' scripts declare come from: every `resolved` URL of a
    /// skill's `package-lock.json` must lie on its npm registry (a skill whose lockfile
    /// names another host fails to load, naming the line), a lock resolved from other
    /// sources is stale, and an approval request names both sources. Default:
    /// [`PackageSources::default`](skillhost_core::run::PackageSources) (PyPI,
    /// registry.npmjs.org); `Host::open_registry` sets its sandbox's.
    pub packages: skillhost_core::run::PackageSources,
    /// The stores of trust and usage statistics. Default: `None`, SQLite files in
    /// `data_dir` (`trust.db`, `stats.db`); the host plugs in its [`State`](skillhost_store::State)
    /// (`Host::open_registry`), which may be a PostgreSQL database other hosts share:
    /// then a human's approval, rejection, disable or enable made on any of them applies
    /// here too, as soon as the store tells of it.
    pub state: Option<skillhost_store::State>,
    /// Team mode: exactly the skills a lockfile pins, each with the content hash it pins
    /// ([`Pins`]); a skill the lock does not name, or whose files hash otherwise, does not
    /// load. Default: `None`. [`Registry::set_pins`](crate::Registry::set_pins) changes
    /// it.
    pub pins: Option<Pins>,
}

/// The content hash of each skill a lockfile pins (`skills.lock`), for a registry that
/// serves exactly those bytes and nothing else: the same bytes on every replica.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pins {
    /// The lockfile, named in refusals.
    pub lock: PathBuf,
    /// Skill name → the content hash it must have.
    pub hashes: std::collections::BTreeMap<String, String>,
}

/// When the skills whose first load runs their code (a first listing compiles a
/// component or starts a server) load. Whatever loads without running code (instructions,
/// code whose tool listing an earlier load kept) loads at open, except on demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FirstLoad {
    /// Before [`Registry::open`](crate::Registry::open) returns.
    #[default]
    Open,
    /// In the background after open returns, smallest code first (a server answering
    /// its first request at once); [`Registry::loading`](crate::Registry::loading) names
    /// those still to come.
    Background,
    /// Every skill, whatever its first load runs, only when asked for:
    /// [`Registry::wait_loaded`](crate::Registry::wait_loaded) loads that one skill,
    /// [`Registry::ready`](crate::Registry::ready) all of them; an install or rescan of a
    /// name loads it. For a command about one skill (a run, an install, an approval),
    /// which then reads, hashes and runs no other skill.
    OnDemand,
}

impl RegistryConfig {
    /// A configuration with the defaults above, over `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        let data_dir = data_dir.into();
        Self {
            user: data_dir.join("user-skills"),
            data_dir,
            workspace: None,
            bundled: None,
            external: Vec::new(),
            watch: true,
            debounce: Duration::from_millis(150),
            limits: SizeLimits::default(),
            first_load: FirstLoad::Open,
            audit: None,
            packages: Default::default(),
            state: None,
            pins: None,
        }
    }

    /// The configured layers, in precedence order.
    pub fn layers(&self) -> Vec<(Layer, PathBuf)> {
        let mut layers = Vec::with_capacity(3 + self.external.len());
        if let Some(dir) = &self.workspace {
            layers.push((Layer::Workspace, dir.clone()));
        }
        layers.push((Layer::User, self.user.clone()));
        if let Some(dir) = &self.bundled {
            layers.push((Layer::Bundled, dir.clone()));
        }
        layers.extend(self.external.iter().map(|dir| (Layer::External, dir.clone())));
        layers
    }
}
