//! `skillhost test`: a skill's own tests (`pytest test_server.py`) in a throwaway
//! sandbox with the same profile as production under a probe grant ([`Grant::probe`]: an
//! empty scratch dir at /data, no network, no secrets), since the skill may not be
//! approved, under one hard timeout (30 s by default), then the MCP handshake and
//! `tools/list` of its server.

use std::process::Stdio;
use std::time::Duration;

use skillhost_core::{Grant, SkillCode, SkillSource};
use tokio::io::AsyncReadExt;

use crate::BwrapRuntime;

/// Largest test output kept, bytes (the tail is kept).
const MAX_OUTPUT: usize = 64 << 10;

pub use skillhost_core::{TestReport, TestRun};

impl BwrapRuntime {
    /// Run the tests of a `[server]` skill and check its server (see the module docs).
    /// Never fails: every problem is in the report.
    pub async fn test_skill(&self, source: &SkillSource, grant: Grant, limit: Duration) -> TestReport {
        let skill = grant.skill.to_string();
        let report = |tests: Option<TestRun>, tools: Vec<String>, error: Option<String>| {
            let passed = error.is_none() && tests.as_ref().is_none_or(|t| t.exit_code == Some(0));
            TestReport { skill: skill.clone(), passed, tests, tools, error }
        };
        let work = async {
            let (launch, grant) = match self.prepare(source, grant.clone()) {
                Ok(prepared) => prepared,
                Err(e) => return report(None, vec![], Some(e.to_string())),
            };
            let has_tests = matches!(&source.code, SkillCode::Server { files, .. } if files.contains_key("test_server.py"));
            let mut run = None;
            if has_tests {
                let Some(venv) = &self.inner.venv else {
                    return report(
                        None,
                        vec![],
                        Some(format!("its tests need the managed Python: {}", self.inner.venv_error.as_deref().unwrap_or("no venv"))),
                    );
                };
                let args = ["-m", "pytest", "test_server.py", "-v", "--tb=short", "-p", "no:cacheprovider"];
                let scratch = match tempfile::Builder::new().prefix("test-probe-").tempdir() {
                    Ok(dir) => dir,
                    Err(e) => return report(None, vec![], Some(format!("cannot create the probe scratch dir: {e}"))),
                };
                let (profile, _guards) = match launch.profile(&grant.probe(scratch.path()), false) {
                    Ok(p) => p,
                    Err(e) => return report(None, vec![], Some(e.to_string())),
                };
                let argv: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
                let skillhost_jail::Jailed { command: mut sandbox, confinement: _confinement } =
                    match self.inner.command(&profile, &grant, venv.python().as_os_str(), &argv) {
                        Ok(jailed) => jailed,
                        Err(e) => return report(None, vec![], Some(e.to_string())),
                    };
                let command = format!("python {}", args.join(" "));
                sandbox.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
                let result = sandbox.spawn();
                let mut child = match result {
                    Ok(child) => child,
                    Err(e) => return report(None, vec![], Some(format!("cannot start the sandbox: {e}"))),
                };
                let (mut out, mut err) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
                let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
                let (_, _, status) = tokio::join!(out.read_to_end(&mut stdout), err.read_to_end(&mut stderr), child.wait());
                let mut output = String::from_utf8_lossy(&stdout).into_owned();
                output.push_str(&String::from_utf8_lossy(&stderr));
                if output.len() > MAX_OUTPUT {
                    let mut cut = output.len() - MAX_OUTPUT;
                    while !output.is_char_boundary(cut) {
                        cut += 1;
                    }
                    output.drain(..cut);
                }
                let exit_code = status.ok().and_then(|s| s.code());
                let failed = exit_code != Some(0);
                run = Some(TestRun { command, exit_code, output });
                if failed {
                    return report(run, vec![], Some("its tests failed".into()));
                }
            }
            match self.load_server(source, grant).await {
                Ok(loaded) => report(run, loaded.inner.envelope.tools().iter().map(|t| t.name.clone()).collect(), None),
                Err(e) => report(run, vec![], Some(e.to_string())),
            }
        };
        match tokio::time::timeout(limit, work).await {
            Ok(report) => report,
            Err(_) => TestReport {
                skill: skill.clone(),
                passed: false,
                tests: None,
                tools: vec![],
                error: Some(format!("killed after the hard timeout of {limit:?}")),
            },
        }
    }
}
