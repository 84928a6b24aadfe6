//! `skillhost audit` shows the runs of skills' scripts beside their outbound requests: a
//! run through `skillhost run` with its command, exit code and bytes, and a run refused
//! before approval with its refusal, in text and in JSON.

use serde_json::Value;

use crate::Env;

#[test]
fn skillhost_audit_shows_runs_with_their_command_exit_code_and_bytes() {
    let env = Env::new();
    let dir = env.skills.path().join("tally");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: tally\ndescription: Counts lines. Use it in tests.\n---\nRun `sh scripts/count.sh FILE`.\n",
    )
    .unwrap();
    std::fs::write(dir.join("scripts/count.sh"), "#!/bin/sh\nwc -l < \"$1\" > count.txt\nexit 2\n").unwrap();
    let inputs = tempfile::tempdir().unwrap();
    let input = inputs.path().join("lines.txt");
    std::fs::write(&input, "a\nb\nc\n").unwrap();
    let command = ["sh", "scripts/count.sh", "in.txt"];
    let input_arg = format!("{}=in.txt", input.display());
    let run = |env: &Env| env.run(&[&["run", "-i", &input_arg, "tally", "--"][..], &command[..]].concat());

    let refused = run(&env);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("skillhost approve tally"), "{refused:?}");
    assert!(env.run(&["approve", "tally", "--yes"]).status.success());
    let out = run(&env);
    assert_eq!(out.status.code(), Some(2), "the script's exit code: {}", String::from_utf8_lossy(&out.stderr));

    let text = String::from_utf8_lossy(&env.run(&["audit"]).stdout).into_owned();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(" tally ")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].contains(r#"run          "sh" "scripts/count.sh" "in.txt" refused: "#), "{text}");
    assert!(lines[0].contains("skillhost approve tally"), "{text}");
    // In: the input's 6 bytes. Out: count.txt ("3\n"); the input, left as it came, is
    // not returned, nor counted, again.
    assert!(lines[1].contains(r#""sh" "scripts/count.sh" "in.txt" exit 2 in=6 out=2 "#), "{text}");

    let out = env.run(&["audit", "--json", "--skill", "tally", "--limit", "1"]);
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "the newest only: {rows:?}");
    let row = &rows[0];
    assert_eq!(row["record"], "run", "{row}");
    assert_eq!((&row["outcome"]["kind"], &row["outcome"]["detail"]), (&Value::from("exit"), &Value::from(2)), "{row}");
    assert_eq!((row["bytes_in"].as_u64(), row["bytes_out"].as_u64()), (Some(6), Some(2)), "{row}");
    assert!(row["duration_ms"].as_f64().unwrap() > 0.0, "{row}");
}
