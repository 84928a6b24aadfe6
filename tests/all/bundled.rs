//! Every bundled skill through the library API: each tool's declared examples run (an
//! example that fails is a bug an agent would hit first), and the answers are right.

use fixtures::{CSV_SUMMARY, Guest, MINIMAL_SKILL, TEXT_TOOLS, UNIT_CONVERT};
use serde_json::{Value, json};
use skillhost::DirectSkill;

use crate::{call, ok, test_host};

/// Write the CSV files the csv-summary examples refer to into its data dir.
fn csv_data(t: &fixtures::TestHost) {
    let data = t.data_dir("csv-summary");
    std::fs::create_dir_all(data.join("exports")).unwrap();
    let mut sales = String::from("region,amount,paid\n");
    for i in 0..150 {
        sales.push_str(&format!("{},{},{}\n", ["north", "south", "east"][i % 3], i * 10, i % 2 == 0));
    }
    std::fs::write(data.join("sales.csv"), sales).unwrap();
    std::fs::write(data.join("exports/data.tsv"), "a\tb\n1\tx\n2\ty\n").unwrap();
}

async fn load(t: &fixtures::TestHost, guest: Guest) -> DirectSkill {
    let skill = t.host.load_path_granted(&guest.folder(t.skills.path())).await.expect("bundled skill loads");
    assert!(
        skill.source.instructions.as_deref().is_some_and(|md| md.starts_with("---\nname: ")) || guest.dir.contains("minimal"),
        "bundled skills carry SKILL.md"
    );
    skill
}

#[tokio::test]
async fn every_declared_example_runs() {
    let t = test_host();
    csv_data(&t);
    for guest in [TEXT_TOOLS, CSV_SUMMARY, UNIT_CONVERT, MINIMAL_SKILL] {
        let skill = load(&t, guest).await;
        assert!(!skill.skill.tools().is_empty());
        for tool in skill.skill.tools() {
            assert!(!tool.description.is_empty(), "{} has a description", tool.name);
            assert!(!tool.examples.is_empty(), "{} has an example", tool.name);
            for example in &tool.examples {
                if let Err(e) = call(&skill, &tool.name, example.clone()).await {
                    panic!("{}: example {example} failed: {e}", tool.name);
                }
            }
        }
    }
}

#[tokio::test]
async fn text_tools_answers() {
    let t = test_host();
    let skill = load(&t, TEXT_TOOLS).await;
    let stats = ok(&skill, "text_stats", json!({"text": "one two three\nfour"})).await;
    assert_eq!((stats["words"].clone(), stats["lines"].clone()), (json!(4), json!(2)), "{stats}");
    let out = ok(&skill, "convert_case", json!({"text": "userAccountId", "to": "snake"})).await;
    assert_eq!(out["text"], "user_account_id");
    let out = ok(&skill, "slugify", json!({"text": "Crème Brûlée: A Guide!"})).await;
    assert_eq!(out["text"], "creme-brulee-a-guide");
    let out = ok(&skill, "json_query", json!({"json": "{\"a\": {\"b/c\": [10, 20]}}", "pointer": "/a/b~1c/1"})).await;
    assert_eq!(out["value"], 20, "{out}");
    let out = ok(&skill, "base64", json!({"text": "aGVsbG8=", "direction": "decode"})).await;
    assert_eq!(out["text"], "hello");
    let err = call(&skill, "json_format", json!({"json": "{broken", "layout": "pretty"})).await.unwrap_err();
    assert!(err.is_tool_error(), "{err}");
    let err = call(&skill, "text_stats", json!({"txt": "typo"})).await.unwrap_err();
    assert_eq!(err.code(), "invalid_input", "{err}");
}

#[tokio::test]
async fn unit_convert_answers() {
    let t = test_host();
    let skill = load(&t, UNIT_CONVERT).await;
    let out = ok(&skill, "convert", json!({"value": 100, "from": "°C", "to": "°F"})).await;
    assert_eq!(out["value"].as_f64(), Some(212.0), "{out}");
    let out = ok(&skill, "convert", json!({"value": 1, "from": "GiB", "to": "MB"})).await;
    assert!((out["value"].as_f64().unwrap() - 1073.741824).abs() < 1e-3, "{out}");
    let err = call(&skill, "convert", json!({"value": 1, "from": "kilometre", "to": "parsec-ish"})).await.unwrap_err();
    assert_eq!(err.code(), "invalid_input", "{err}");
    let out =
        ok(&skill, "convert_time", json!({"datetime": "2024-07-01T09:00", "from_tz": "America/New_York", "to_tz": "Europe/Berlin"})).await;
    assert!(out.to_string().contains("2024-07-01T15:00"), "09:00 EDT is 15:00 CEST: {out}");
}

#[tokio::test]
async fn csv_summary_reads_only_its_granted_data() {
    let t = test_host();
    csv_data(&t);
    let skill = load(&t, CSV_SUMMARY).await;
    let out = ok(&skill, "summarize", json!({"path": "sales.csv"})).await;
    assert_eq!(out["rows"], 150, "{out}");
    let text = out.to_string();
    assert!(text.contains("amount") && text.contains("region"), "{text}");
    let files = ok(&skill, "list_files", json!({})).await;
    assert!(files.to_string().contains("sales.csv"), "{files}");
    let err = call(&skill, "summarize", json!({"path": "../../outside.csv"})).await.unwrap_err();
    assert!(matches!(err.code(), "denied" | "invalid_input"), "{err}");
    let err = call(&skill, "head", json!({"path": "missing.csv"})).await.unwrap_err();
    assert!(err.to_string().contains("missing.csv"), "{err}");
    assert_eq!(skill.skill.grant().dirs.len(), 1);
    let _: Value = out;
}
