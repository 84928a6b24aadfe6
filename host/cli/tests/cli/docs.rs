//! The docs hold: every relative link in README.md, ARCHITECTURE.md, BENCHMARKS.md,
//! tests/ADVERSARIAL.md and docs/*.md names a file of the checkout (and a heading of it,
//! for a `#fragment`); every `skillhost COMMAND` they quote is a command of the binary
//! (read from its own `--help`, so a renamed command fails here); and the configuration
//! reference's block is a config the host reads, while the same block with one unknown key
//! is refused.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Env;

/// The checkout's root.
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Every doc a reader is pointed to, relative to the checkout.
fn docs() -> Vec<PathBuf> {
    let root = checkout();
    let mut files: Vec<PathBuf> =
        ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md", "tests/ADVERSARIAL.md"].iter().map(PathBuf::from).collect();
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("a docs/ folder")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(&root).unwrap().to_owned())
        .collect();
    chapters.sort();
    files.extend(chapters);
    files
}

/// `text` without its fenced code blocks, and those blocks, each as one string.
fn split_fences(text: &str) -> (String, Vec<String>) {
    let (mut prose, mut blocks, mut block) = (String::new(), Vec::new(), None::<String>);
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            match block.take() {
                Some(done) => blocks.push(done),
                None => block = Some(String::new()),
            }
            continue;
        }
        match &mut block {
            Some(code) => code.push_str(&format!("{line}\n")),
            None => prose.push_str(&format!("{line}\n")),
        }
    }
    (prose, blocks)
}

/// GitHub's anchor of a heading: lowercase, punctuation but `-` and `_` dropped, spaces
/// to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown file's headings.
fn anchors(text: &str) -> BTreeSet<String> {
    let (prose, _) = split_fences(text);
    prose.lines().filter_map(|l| l.strip_prefix('#')).map(|l| slug(l.trim_start_matches('#'))).collect()
}

/// The targets of `[text](target)` links in `prose`.
fn links(prose: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = prose;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            found.push(rest[..end].to_owned());
        }
    }
    found
}

#[test]
fn every_relative_link_in_the_docs_names_a_file_and_heading_that_exist() {
    let root = checkout();
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in docs() {
        let text = std::fs::read_to_string(root.join(&doc)).unwrap();
        let (prose, _) = split_fences(&text);
        for target in links(&prose) {
            if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                continue;
            }
            checked += 1;
            let (path, fragment) = target.split_once('#').map_or((target.as_str(), None), |(p, f)| (p, Some(f)));
            let file = if path.is_empty() { root.join(&doc) } else { root.join(doc.parent().unwrap()).join(path) };
            if !file.exists() {
                broken.push(format!("{}: `{target}`: no such file", doc.display()));
                continue;
            }
            if let Some(fragment) = fragment
                && file.extension().is_some_and(|e| e == "md")
                && !anchors(&std::fs::read_to_string(&file).unwrap()).contains(fragment)
            {
                broken.push(format!("{}: `{target}`: no heading with that anchor", doc.display()));
            }
        }
    }
    assert!(checked > 10, "only {checked} relative links found: the parser is wrong");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The commands `skillhost ARGS --help` lists.
fn commands(args: &[&str]) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_skillhost")).args(args).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let Some(list) = help.split("Commands:\n").nth(1) else { return BTreeSet::new() };
    list.lines()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_skillhost_command_the_docs_quote_exists() {
    let root = checkout();
    let top = commands(&[]);
    assert!(top.contains("serve") && top.contains("approve"), "{top:?}");
    let mut unknown = Vec::new();
    let mut checked = 0;
    for doc in docs() {
        let text = std::fs::read_to_string(root.join(&doc)).unwrap();
        for (at, _) in text.match_indices("skillhost ") {
            // A command as typed: right after a backtick in prose, or in a fenced block at
            // the start of a command line (after `$ `, `| `, `&& ` or `$(`). Prose
            // and code that only name skillhost ("from skillhost import …") are not commands.
            let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
            let prefix = text[line_start..at].trim_end();
            let typed = if in_fence(&text, at) {
                prefix.is_empty() || ["$", "|", "&&", "$("].iter().any(|p| prefix.ends_with(p))
            } else {
                text[..at].ends_with('`')
            };
            if !typed {
                continue;
            }
            let mut words = text[at + "skillhost ".len()..].split(|c: char| c.is_whitespace() || "`'\")".contains(c));
            let Some(command) = words.next() else { continue };
            // An option (`skillhost --help`) or a placeholder is not a command name.
            if !command.starts_with(|c: char| c.is_ascii_lowercase()) || !command.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
                continue;
            }
            checked += 1;
            if !top.contains(command) {
                unknown.push(format!("{}: `skillhost {command}`", doc.display()));
                continue;
            }
            let sub = commands(&[command]);
            if let Some(next) = words.next()
                && !sub.is_empty()
                && !next.is_empty()
                && next.chars().all(|c| c.is_ascii_lowercase())
                && !sub.contains(next)
            {
                unknown.push(format!("{}: `skillhost {command} {next}`", doc.display()));
            }
        }
    }
    assert!(checked > 50, "only {checked} quoted commands found: the parser is wrong");
    unknown.sort();
    unknown.dedup();
    assert!(unknown.is_empty(), "commands the binary does not have:\n{}", unknown.join("\n"));
}

/// Whether byte `at` of `text` is inside a fenced code block.
fn in_fence(text: &str, at: usize) -> bool {
    text[..at].lines().filter(|l| l.trim_start().starts_with("```")).count() % 2 == 1
}

#[test]
fn the_configuration_reference_is_what_the_host_reads() {
    let text = std::fs::read_to_string(checkout().join("docs/configuration.md")).unwrap();
    let (_, blocks) = split_fences(&text);
    let reference = blocks.into_iter().find(|b| b.contains("[sandbox]")).expect("the reference block");
    let env = Env::new();
    let lock = env.data.path().join("empty.lock");
    std::fs::write(&lock, "version = 1\n").unwrap();
    // `outdated` reads the whole config (its `[sources]` for the fetch options) and, with
    // an empty lock, nothing else.
    let read = |config: &str| {
        std::fs::write(env.data.path().join("config.toml"), config).unwrap();
        env.run(&["outdated", "--lock", lock.to_str().unwrap()])
    };
    // The key a `[[sources.verify]]` rule names must exist: one made as the docs say.
    let key = env.data.path().join("team");
    let made = env.run(&["key", "generate", "--out", key.to_str().unwrap()]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    // `[state]` names a PostgreSQL the host connects to, and a file of shared keys; `[team]`
    // a lockfile: a real server, a key made as the docs say, the empty lock.
    let postgres = skillhost::state::cluster::Cluster::start().expect("PostgreSQL starts");
    let keys = env.data.path().join("keys");
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&keys).unwrap();
        writeln!(file, "{}", "5a".repeat(32)).unwrap();
    }
    let url = reference.lines().find_map(|l| l.strip_prefix("url = \"")?.split('"').next()).expect("[state] url");
    let reference = reference
        .replace("/etc/skillhost/team.pub", key.with_extension("pub").to_str().unwrap())
        .replace(url, &postgres.url())
        .replace("/etc/skillhost/keys", keys.to_str().unwrap())
        .replace("/etc/skillhost/skills.lock", lock.to_str().unwrap());
    let out = read(&reference);
    assert!(out.status.success(), "the reference is refused: {}", String::from_utf8_lossy(&out.stderr));
    let typo = reference.replace("allow_hosts =", "allow_host =");
    let line = typo.lines().position(|l| l.starts_with("allow_host =")).expect("the typo's line") + 1;
    let out = read(&typo);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = env.data.path().join("config.toml");
    assert!(
        !out.status.success() && stderr.contains(&format!("{}:{line}:1: unknown key `allow_host`", file.display())),
        "an unknown key was taken, or refused without its file and line: {stderr}"
    );
    assert!(stderr.contains("`verify` or `allow_hosts`"), "the valid keys are named: {stderr}");
}
