//! Which commands a run may start: the approval binds what runs. A human approved a
//! skill's scripts, each by its SHA-256, under a policy; by default a run's command must
//! start one of those scripts ([`command_starts_script`]), never code of the agent's own
//! (inline code, a file or module it passed in, a program of its choice) holding the
//! grants the human gave the scripts. A policy may allow any command
//! ([`RunPolicy::any_command`](super::RunPolicy::any_command)), which its approval
//! request says in words of its own.
//!
//! A command starts a script in one of these forms, the ones public skills write:
//!
//! - the script itself: `scripts/x.sh`, `./scripts/x.sh`, `/skill/scripts/x.sh` (run by
//!   its `#!` line);
//! - an interpreter of [`INTERPRETERS`], by its bare name (found on the jail's `PATH`)
//!   or as `/usr/bin/NAME`, `/bin/NAME` or `/usr/local/bin/NAME`, then options from its
//!   short list of harmless ones, then the script's path: `python scripts/x.py in out`,
//!   `python3 -u scripts/x.py`, `bash scripts/x.sh`, `node scripts/x.js`;
//! - `python -m MODULE` where MODULE is a script of the skill as a module from its root:
//!   `scripts.package_skill` for `scripts/package_skill.py`, or a package's
//!   `scripts/pkg/__main__.py` (the runner finds it from the skill's root, never the
//!   workspace).
//!
//! Only the words before the script are read: every word after it is the script's own
//! argument, whatever it looks like. An interpreter option not on the short list is
//! refused rather than understood: each listed one runs no code but the script's
//! (`-c`, `-e`, `--eval`, `-p`, `-i`, `-` and `-s` read code from the command or stdin;
//! node's `--require`, `--import`, `--loader` and `--env-file` load a file the agent may
//! have passed in; python's `-W` with a dotted category imports a module). `env` is not
//! an interpreter: its assignments (`PYTHONPATH`, `NODE_OPTIONS`, `BASH_ENV`,
//! `LD_PRELOAD`) load code too.

use std::collections::BTreeMap;

use super::{RunError, script_path};
use crate::name::SkillName;

/// The interpreters a command may start a script with: `python`, `python3` and
/// `python3.N`, `node`, `bash`, `sh`. Others (`perl`, `ruby`, `uv run`, `npx`) start a
/// script through its `#!` line (`./scripts/x.pl`), or need the policy's `any_command`.
pub const INTERPRETERS: &[&str] = &["python", "python3", "python3.N", "node", "bash", "sh"];

/// The directories an interpreter may be named in by its absolute path (read-only in the
/// jail, unlike the workspace an agent fills).
const SYSTEM_BINS: &[&str] = &["/usr/bin/", "/bin/", "/usr/local/bin/"];

/// Where the jail shows the skill's files (the runner's `/skill`).
const SKILL_ROOT: &str = "/skill/";

/// Python's one-letter options that take no argument and load no code.
const PYTHON_FLAGS: &str = "bBdEIOPqRsSuvx";
/// Python's `-X` options allowed (they change no code that runs).
const PYTHON_X: &[&str] = &["utf8", "utf8=0", "utf8=1", "dev", "faulthandler", "importtime", "warn_default_encoding"];
/// node's options allowed, as written or before `=VALUE`.
const NODE_OPTIONS: &[&str] = &[
    "--no-warnings",
    "--no-deprecation",
    "--trace-warnings",
    "--trace-deprecation",
    "--trace-uncaught",
    "--throw-deprecation",
    "--pending-deprecation",
    "--enable-source-maps",
    "--experimental-vm-modules",
    "--max-old-space-size=",
    "--stack-size=",
    "--unhandled-rejections=",
    "--experimental-default-type=",
];
/// The shells' one-letter options allowed (`-o NAME` too).
const SHELL_FLAGS: &str = "aCefhnuvx";
/// bash's long options allowed.
const BASH_OPTIONS: &[&str] = &["--norc", "--noprofile", "--posix", "--noediting"];

/// How a command starts one of its skill's scripts ([`command_starts_script`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartedScript {
    /// The script: its path among the skill's files (`scripts/x.py`,
    /// `scripts/pkg/__main__.py`).
    pub script: String,
    /// How the command names it.
    pub form: StartForm,
}

/// How a command names the script it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartForm {
    /// The command's first word is the script, run by its `#!` line.
    Direct,
    /// An interpreter whose word at this index is the script's path.
    Path {
        /// The index of the word.
        at: usize,
    },
    /// `python -m MODULE`: the word at this index is the module, after the word `-m`.
    Module {
        /// The index of the module's word.
        at: usize,
    },
}

/// The interpreter families whose options are read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Python,
    Node,
    Shell,
}

/// What one word before the script is.
enum Word {
    /// An allowed option taking this many words, itself included.
    Option(usize),
    /// `--`: the next word is the script.
    End,
    /// `-m` of python: the next word is a module.
    Module,
    /// Code from the command or stdin, or loaded by the option: refused, saying how.
    Code(String),
    /// An option not on the list.
    Unknown,
    /// The first word that is not an option: the script's.
    Script,
}

/// Whether `command` starts one of the scripts among `files` (the skill's hashed files)
/// in a form described in the module docs; how, or why not: a [`RunError::Refused`]
/// naming `skill`, the command's first words, why, and how a human allows any command.
pub fn command_starts_script(skill: &SkillName, command: &[String], files: &BTreeMap<String, Vec<u8>>) -> Result<StartedScript, RunError> {
    let refuse = |why: String| RunError::Refused {
        skill: skill.clone(),
        reason: format!(
            "{} {why}; its approval covers its scripts, so start one of them (`python scripts/x.py ARGS`, `python -m scripts.x`, `./scripts/x.sh`, `bash scripts/x.sh`, `node scripts/x.js`), or a human lets it run any command with its grants: `skillhost policy {skill} --any-command`, then `skillhost approve {skill}`",
            shown(command)
        ),
    };
    let Some(program) = command.first() else { return Err(refuse("is empty".into())) };
    if let Some(script) = script_of(program, files) {
        return Ok(StartedScript { script, form: StartForm::Direct });
    }
    let Some(family) = interpreter(program) else {
        return Err(refuse(format!(
            "starts `{}`, which is neither one of the skill's scripts nor an interpreter a script may be started with ({})",
            crate::text::one_line(program, 80),
            INTERPRETERS.join(", ")
        )));
    };
    let mut at = 1;
    let mut module = false;
    while let Some(word) = command.get(at) {
        match classify(family, word, command.get(at + 1).map(String::as_str)) {
            Word::Script => break,
            Word::Option(n) => at += n,
            Word::End => {
                at += 1;
                break;
            }
            Word::Module => {
                at += 1;
                module = true;
                break;
            }
            Word::Code(how) => return Err(refuse(format!("runs code that is not one of the skill's scripts ({how})"))),
            Word::Unknown => {
                return Err(refuse(format!(
                    "gives `{program}` the option `{}` before the script, which this host does not allow there (it may load code that is not the skill's)",
                    crate::text::one_line(word, 80)
                )));
            }
        }
    }
    let Some(word) = command.get(at) else {
        return Err(refuse(format!("names none of the skill's scripts after `{program}`")));
    };
    if module {
        return match module_script(word, files) {
            Some(script) => Ok(StartedScript { script, form: StartForm::Module { at } }),
            None => Err(refuse(format!(
                "runs the module `{}`, which is none of the skill's scripts (`scripts.x` is `scripts/x.py` of the skill)",
                crate::text::one_line(word, 80)
            ))),
        };
    }
    match script_of(word, files) {
        Some(script) => Ok(StartedScript { script, form: StartForm::Path { at } }),
        None => Err(refuse(format!(
            "runs `{}`, which is none of the skill's scripts (a file the agent passed in, or a path outside the skill)",
            crate::text::one_line(word, 80)
        ))),
    }
}

/// The first words of `command` as messages show it: each quoted by the text rule, at
/// most three, then how many more.
fn shown(command: &[String]) -> String {
    let mut words: Vec<String> = command.iter().take(3).map(|w| crate::text::quote(w, 60)).collect();
    if command.len() > 3 {
        words.push(format!("(and {} more words)", command.len() - 3));
    }
    format!("the command {}", words.join(" "))
}

/// The script `word` names among `files`: `scripts/x.py`, `./scripts/x.py` or
/// `/skill/scripts/x.py`, a plain path to a file that is a script.
fn script_of(word: &str, files: &BTreeMap<String, Vec<u8>>) -> Option<String> {
    let relative = word.strip_prefix(SKILL_ROOT).or_else(|| word.strip_prefix("./")).unwrap_or(word);
    (super::check_relative(relative).is_ok() && files.contains_key(relative) && script_path(relative)).then(|| relative.to_owned())
}

/// The script `module` names from the skill's root: `a.b` is `a/b.py` or
/// `a/b/__main__.py`.
fn module_script(module: &str, files: &BTreeMap<String, Vec<u8>>) -> Option<String> {
    let identifier = |part: &str| {
        part.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if module.len() > 200 || !module.split('.').all(identifier) {
        return None;
    }
    let path = module.replace('.', "/");
    [format!("{path}.py"), format!("{path}/__main__.py")].into_iter().find(|p| files.contains_key(p))
}

/// The interpreter family of `program`, when it is one of [`INTERPRETERS`].
fn interpreter(program: &str) -> Option<Family> {
    let name = match program.rsplit_once('/') {
        Some((dir, name)) if SYSTEM_BINS.contains(&format!("{dir}/").as_str()) => name,
        Some(_) => return None,
        None => program,
    };
    let python_version = name.strip_prefix("python3.").is_some_and(|v| (1..=2).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_digit()));
    match name {
        "python" | "python3" => Some(Family::Python),
        _ if python_version => Some(Family::Python),
        "node" => Some(Family::Node),
        "bash" | "sh" => Some(Family::Shell),
        _ => None,
    }
}

/// What `word` (followed by `next`) is to an interpreter of `family`, before its script.
fn classify(family: Family, word: &str, next: Option<&str>) -> Word {
    if word == "-" {
        return Word::Code("`-` reads code from stdin".into());
    }
    if word == "--" {
        return Word::End;
    }
    if !word.starts_with('-') {
        return Word::Script;
    }
    match family {
        Family::Python => python_option(word, next),
        Family::Node => node_option(word),
        Family::Shell => shell_option(word, next),
    }
}

fn python_option(word: &str, next: Option<&str>) -> Word {
    if word == "-m" {
        return Word::Module;
    }
    if word.starts_with("--") {
        return Word::Unknown;
    }
    let letters = &word[1..];
    for (i, letter) in letters.char_indices() {
        match letter {
            'c' => return Word::Code("`-c` runs the code that follows".into()),
            'i' => return Word::Code("`-i` reads code from stdin after the script".into()),
            'X' | 'W' => {
                let attached = &letters[i + 1..];
                let (value, words) = if attached.is_empty() { (next.unwrap_or_default(), 2) } else { (attached, 1) };
                // A warning category with a dot names a module Python imports to find it.
                let allowed =
                    if letter == 'X' { PYTHON_X.contains(&value) } else { value.split(':').nth(2).is_none_or(|c| !c.contains('.')) };
                return if allowed { Word::Option(words) } else { Word::Unknown };
            }
            _ if PYTHON_FLAGS.contains(letter) => {}
            _ => return Word::Unknown,
        }
    }
    Word::Option(1)
}

fn node_option(word: &str) -> Word {
    let name = word.split_once('=').map_or(word, |(name, _)| name);
    match name {
        "-e" | "--eval" | "-p" | "--print" | "-pe" => Word::Code(format!("`{name}` runs the code that follows")),
        "-i" | "--interactive" => Word::Code("`-i` reads code from stdin".into()),
        "-r" | "--require" | "--import" | "--loader" | "--experimental-loader" | "--env-file" | "--env-file-if-exists" => {
            Word::Code(format!("`{name}` loads a file before the script"))
        }
        _ if NODE_OPTIONS.iter().any(|o| word == *o || (o.ends_with('=') && word.starts_with(o) && word.len() > o.len())) => {
            Word::Option(1)
        }
        _ => Word::Unknown,
    }
}

fn shell_option(word: &str, next: Option<&str>) -> Word {
    if word.starts_with("--") {
        return if BASH_OPTIONS.contains(&word) { Word::Option(1) } else { Word::Unknown };
    }
    let letters = &word[1..];
    for letter in letters.chars() {
        match letter {
            'c' => return Word::Code("`-c` runs the code that follows".into()),
            's' => return Word::Code("`-s` reads code from stdin".into()),
            'i' => return Word::Code("`-i` reads code from stdin".into()),
            'o' if letters == "o" => {
                let name = next.unwrap_or_default();
                return if !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase()) { Word::Option(2) } else { Word::Unknown };
            }
            _ if SHELL_FLAGS.contains(letter) => {}
            _ => return Word::Unknown,
        }
    }
    Word::Option(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> BTreeMap<String, Vec<u8>> {
        [
            "SKILL.md",
            "scripts/x.py",
            "scripts/helper.py",
            "scripts/pkg/__main__.py",
            "scripts/x.sh",
            "scripts/x.js",
            "scripts/data.csv",
            "tool.py",
            "references/a.md",
        ]
        .into_iter()
        .map(|p| (p.to_owned(), Vec::new()))
        .collect()
    }

    fn check(command: &[&str]) -> Result<StartedScript, String> {
        let command: Vec<String> = command.iter().map(|w| (*w).to_owned()).collect();
        command_starts_script(&SkillName::new("tidy").unwrap(), &command, &files()).map_err(|e| e.to_string())
    }

    #[test]
    fn the_forms_public_skills_write_start_a_script() {
        let path = |script: &str, at| Ok(StartedScript { script: script.into(), form: StartForm::Path { at } });
        for (command, expected) in [
            (&["python", "scripts/x.py", "in", "out"][..], path("scripts/x.py", 1)),
            (&["python3", "-u", "-B", "./scripts/x.py", "-c", "x"], path("scripts/x.py", 3)),
            (&["python3.11", "-X", "utf8", "-W", "ignore", "scripts/x.py"], path("scripts/x.py", 5)),
            (&["/usr/bin/python3", "-Wignore::DeprecationWarning", "tool.py"], path("tool.py", 2)),
            (&["bash", "-eu", "-o", "pipefail", "scripts/x.sh", "-c", "rm"], path("scripts/x.sh", 4)),
            (&["sh", "--", "/skill/scripts/x.sh"], path("scripts/x.sh", 2)),
            (&["node", "--no-warnings", "--max-old-space-size=512", "scripts/x.js", "-e", "x"], path("scripts/x.js", 3)),
            (
                &["python", "-m", "scripts.x", "-c", "x"],
                Ok(StartedScript { script: "scripts/x.py".into(), form: StartForm::Module { at: 2 } }),
            ),
            (
                &["python3", "-m", "scripts.pkg"],
                Ok(StartedScript { script: "scripts/pkg/__main__.py".into(), form: StartForm::Module { at: 2 } }),
            ),
            (&["./scripts/x.sh", "a"], Ok(StartedScript { script: "scripts/x.sh".into(), form: StartForm::Direct })),
            (&["scripts/data.csv"], Ok(StartedScript { script: "scripts/data.csv".into(), form: StartForm::Direct })),
        ] {
            assert_eq!(check(command), expected, "{command:?}");
        }
    }

    #[test]
    fn inline_code_other_programs_and_code_loading_options_are_refused_saying_why_and_how_to_allow_them() {
        for (command, says) in [
            (&["python3", "-c", "print(1)"][..], "`-c` runs"),
            (&["python", "-uc", "print(1)"], "`-c` runs"),
            (&["python", "-cprint(1)"], "`-c` runs"),
            (&["python3", "-", "scripts/x.py"], "stdin"),
            (&["python3", "-i", "scripts/x.py"], "`-i`"),
            (&["python3", "-um", "scripts.x"], "the option `-um`"),
            (&["python3", "-W", "ignore::evil.Warning", "scripts/x.py"], "the option `-W`"),
            (&["python3", "-X", "pycache_prefix=/tmp", "scripts/x.py"], "the option `-X`"),
            (&["python3", "--check-hash-based-pycs", "never", "scripts/x.py"], "the option"),
            (&["python3", "evil.py"], "none of the skill's scripts"),
            (&["python3", "references/a.md"], "none of the skill's scripts"),
            (&["python3", "scripts/../evil.py"], "none of the skill's scripts"),
            (&["python3", "-m", "evil"], "the module `evil`"),
            (&["python3", "-m", "scripts.evil"], "the module"),
            (&["python3", "-m", "scripts/x.py"], "the module"),
            (&["python3", "-m"], "names none"),
            (&["python3"], "names none"),
            (&["sh", "-c", "rm -rf /host/data"], "`-c` runs"),
            (&["bash", "-ec", "rm"], "`-c` runs"),
            (&["bash", "-s", "scripts/x.sh"], "stdin"),
            (&["bash", "--rcfile", "evil", "scripts/x.sh"], "the option `--rcfile`"),
            (&["bash", "-o", "/evil", "scripts/x.sh"], "the option `-o`"),
            (&["node", "-e", "1"], "`-e` runs"),
            (&["node", "--eval=1"], "`--eval` runs"),
            (&["node", "-p", "1"], "`-p` runs"),
            (&["node", "--require", "./evil.js", "scripts/x.js"], "loads a file"),
            (&["node", "--import=./evil.mjs", "scripts/x.js"], "loads a file"),
            (&["node", "--env-file=.env", "scripts/x.js"], "loads a file"),
            (&["node", "--inspect", "scripts/x.js"], "the option `--inspect`"),
            (&["/bin/rm", "-rf", "/host/data"], "starts `/bin/rm`"),
            (&["rm", "-f", "x"], "starts `rm`"),
            (&["env", "PYTHONPATH=.", "python3", "scripts/x.py"], "starts `env`"),
            (&["./python3", "scripts/x.py"], "starts `./python3`"),
            (&["/workspace/python3", "scripts/x.py"], "starts `/workspace/python3`"),
            (&["perl", "-e", "1"], "starts `perl`"),
            (&["./evil.sh"], "starts `./evil.sh`"),
            (&["references/a.md"], "starts `references/a.md`"),
        ] {
            let error = check(command).expect_err(&format!("{command:?} was allowed"));
            assert!(error.contains(says), "{command:?}: {error}");
            assert!(error.contains("skill `tidy`: run refused: the command \""), "{command:?}: {error}");
            assert!(error.contains("skillhost policy tidy --any-command"), "{command:?}: {error}");
        }
        let long = check(&["sh", "-c", "a\nb", "x", "y"]).unwrap_err();
        assert!(long.contains(r#"the command "sh" "-c" "a b" (and 2 more words)"#), "{long}");
    }
}
